"""pip's settings, read without pip (bench.pipconfig: ./noxw on a stock VM has no pip, and the
host's fetches use the same reader), against pip itself: `pip config list` in the same
environment is the oracle, weighed the way pip weighs what it lists. A file pip cannot read
is passed over by name, and a FIFO is not waited on."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from bench.pipconfig import pip_config_files, pip_settings

# pip's own reading of its files and variables (its Configuration, as `pip install` loads
# it: each file's values in pip's order, the variables last), weighed the way pip's options
# parser reads them for `pip install`: a variable over [install] over [global], a later
# file over an earlier one. [download] is the kit's own addition, between the two.
ORACLE = """
import json
from pip._internal.configuration import Configuration
configuration = Configuration(isolated=False)
configuration.load()
print(json.dumps(list(configuration.items())))
"""
WEIGHT = {":env:": 4, "install": 3, "download": 2, "global": 1}


def pip_lists(env: dict[str, str]) -> dict[str, str]:
    loaded = json.loads(subprocess.run([sys.executable, "-c", ORACLE], env=env,
                                       capture_output=True, text=True, timeout=120,
                                       check=True).stdout)
    found: dict[str, tuple[int, str]] = {}
    for _, values in loaded:
        for key, value in values.items():
            section, _, name = key.partition(".")
            rank = WEIGHT.get(section, 0)
            if rank and name != "config-file" and rank >= found.get(name, (0, ""))[0]:
                found[name] = (rank, value)
    return {name: value for name, (_, value) in found.items() if value}


@pytest.fixture
def place(tmp_path):
    """An environment of the test's own: its home, its XDG folders, no PIP_* of this host's."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "XDG_"))}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(tmp_path / "config"),
               XDG_CONFIG_DIRS="%s%s%s" % (tmp_path / "xdg1", os.pathsep, tmp_path / "xdg2"),
               PIP_DISABLE_PIP_VERSION_CHECK="1")
    return tmp_path, env


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def ours(env: dict[str, str], said: list[str] | None = None) -> dict[str, str]:
    """bench.pipconfig's reading with ``env`` as the environment (its HOME included)."""
    return pip_settings(env, warn=None if said is None else said.append)


def test_every_file_section_and_variable_weighs_as_pip_weighs_it(place):
    tmp, env = place
    write(tmp / "xdg1" / "pip" / "pip.conf",
          "[global]\nindex-url = https://one.example/simple\ntimeout = 10\n"
          "proxy = http://proxy-one.example:3128\n")
    write(tmp / "xdg2" / "pip" / "pip.conf",
          "[global]\nindex-url = https://two.example/simple\n")
    write(tmp / "home" / ".pip" / "pip.conf",
          "[download]\nfind-links = /legacy/wheels\n[install]\ncert = /legacy/ca.pem\n")
    write(tmp / "config" / "pip" / "pip.conf",
          "[global]\ntimeout = 30\nextra-index-url =\n    https://a.example/simple\n"
          "    https://b.example/simple\n[install]\nfind_links = /user/wheels\n"
          "[freeze]\nall = true\n")
    env["PIP_PROXY"] = "http://proxy-env.example:3128"
    env["PIP_NO_CACHE_DIR"] = "1"
    expected = pip_lists(env)
    assert expected["proxy"] == "http://proxy-env.example:3128"  # the oracle saw them all
    assert ours(env) == expected


def test_a_named_config_file_replaces_the_users_and_the_null_device_turns_all_off(place):
    tmp, env = place
    write(tmp / "config" / "pip" / "pip.conf", "[global]\nindex-url = https://user.example\n")
    write(tmp / "xdg1" / "pip" / "pip.conf", "[global]\ntimeout = 11\n")
    named = write(tmp / "named.conf", "[install]\nconstraint = /c.txt\n")
    env["PIP_CONFIG_FILE"] = str(named)
    assert "index-url" not in pip_lists(env)  # pip skipped the user's file
    assert ours(env) == pip_lists(env)
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_INDEX_URL"] = "https://env.example/simple"
    assert ours(env) == pip_lists(env) == {"index-url": "https://env.example/simple",
                                           "disable-pip-version-check": "1"}
    assert pip_config_files(env) == []


def test_a_file_that_cannot_be_read_is_passed_over_by_name_and_the_rest_still_count(place):
    """pip itself stops at a malformed file; the kit names it and reads on."""
    tmp, env = place
    write(tmp / "xdg1" / "pip" / "pip.conf", "[global]\nindex-url = https://kept.example\n")
    broken = write(tmp / "config" / "pip" / "pip.conf", "index-url = no section\n")
    said: list[str] = []
    assert ours(env, said)["index-url"] == "https://kept.example"
    assert len(said) == 1 and said[0].startswith(
        "pip's configuration %s is passed over: " % broken)
    broken.write_bytes(b"[global]\ntimeout = \xff\n")
    said.clear()
    ours(env, said)
    assert said == ["pip's configuration %s is passed over: not UTF-8 text" % broken]


def test_a_fifo_named_as_the_config_file_is_not_waited_on(place):
    tmp, env = place
    fifo = tmp / "pip.fifo"
    os.mkfifo(fifo)
    env["PIP_CONFIG_FILE"] = str(fifo)
    said: list[str] = []
    done = threading.Event()

    def read() -> None:
        ours(env, said)
        done.set()
    threading.Thread(target=read, daemon=True).start()
    assert done.wait(20), "reading pip's settings waited on a FIFO"
    assert said == ["pip's configuration %s is passed over: a FIFO (named pipe), not a "
                    "regular file" % fifo]
