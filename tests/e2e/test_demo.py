"""`./noxw -s demo` as a user runs it, on the machine most users have: an Ubuntu 24.04 host.
It ends with a report comparing two real stacks, and the report's figures are the medians of
the result files it wrote.

The host is a stand-in (tests/e2e/test_noxw_vm.py's fresh VM: python3 without pip, a sudo
user, the host's engine) whose /etc/os-release says Ubuntu 24.04 "noble"; Ubuntu's archive is
out of reach here, so apt underneath is Debian's. The kit used to pick its base by the host's
release (debian:noble-slim, then debootstrap "noble") and stopped after 15 s.
"""
from __future__ import annotations

import hashlib
import json
import re
import shutil
import statistics
import subprocess

import pytest
from test_noxw_vm import RECIPE, USER, _run, checkout  # noqa: F401 - checkout is a fixture

from envbench.commands import demo
from envbench.engine import textbuild
from envbench.images import wheelhouse as wheelhouses

pytestmark = pytest.mark.e2e

UBUNTU_NOBLE = ('PRETTY_NAME="Ubuntu 24.04.1 LTS"\nNAME="Ubuntu"\nVERSION_ID="24.04"\n'
                'VERSION="24.04.1 LTS (Noble Numbat)"\nVERSION_CODENAME=noble\nID=ubuntu\n'
                'ID_LIKE=debian\nUBUNTU_CODENAME=noble\n')


@pytest.fixture(scope="module")
def ubuntu_host(client, base_tag) -> str:
    recipe = RECIPE.format(base=base_tag, user=USER).replace(
        "USER %s\n" % USER, "RUN rm -f /etc/os-release /usr/lib/os-release && printf '%s' "
        "> /usr/lib/os-release && ln -s ../usr/lib/os-release /etc/os-release\nUSER %s\n"
        % (UBUNTU_NOBLE.replace("\n", "\\n"), USER))
    tag = "envbench-test/ubuntu-noble-vm:%s" % hashlib.sha256(recipe.encode()).hexdigest()[:12]
    if not client.images.list(name=tag):
        textbuild.build(client, recipe, tag)
    return tag


def test_the_demo_ends_with_a_report_of_its_two_stacks_on_an_ubuntu_host(
        client, ubuntu_host, python_base, checkout, tmp_path):  # noqa: F811 - the fixture
    code, said, _ = _run(client, ubuntu_host, checkout, "cat /etc/os-release", socket=False,
                         group=False)
    assert "VERSION_CODENAME=noble" in said and "ID=ubuntu" in said, said
    # The demo's torch wheels, fetched here by the host's pip (its own configuration) as the
    # demo would on a VM that reaches PyTorch's index, in the stand-in's cache.
    python = client.containers.run(python_base, ["python3", "-c", "import sys; print('%d.%d' "
                                                 "% sys.version_info[:2])"], remove=True)
    wheels = wheelhouses.ensure_wheelhouse(demo.TORCH, python.decode().strip())
    cache = tmp_path / "cache"
    shutil.copytree(wheels, cache / "envbench" / wheels.name)
    subprocess.run(["chown", "-R", "4242:4242", str(cache)], check=True)
    shutil.rmtree(checkout / "reports" / "demo", ignore_errors=True)
    code, stdout, took = _run(client, ubuntu_host, checkout, "./noxw -s demo", socket=True,
                              group=True, timeout=1800, cache=cache, at_host_paths=True)
    print("the demo on an Ubuntu 24.04 stand-in: %.0f s, noxw's cold start included" % took)
    assert code == 0, stdout[-4000:]
    assert "Traceback" not in stdout and "noble" not in stdout, stdout[-4000:]
    reports = checkout / "reports" / "demo"
    timing = re.search(r"demo: set-up \(engine, base images\) \d+ s; image builds, wheels and "
                       r"data side by side \d+ s; cells \d+ s; report \d+ s; \d+ s in all",
                       stdout)
    assert timing, stdout[-2000:]
    # The two builds print side by side (where the engine did not have them): each line is
    # one build's, whole.
    prefixes = ("  debian-python3-torch | ", "  torch2.13.0-cpu | ")
    build_lines = [line for line in stdout.splitlines() if line.startswith(prefixes)]
    assert all(sum(line.count(p) for p in prefixes) == 1 for line in build_lines)
    assert "demo: open %s" % (reports / "index.html") in stdout
    proc_stdout = stdout

    records = [json.loads(p.read_text()) for p in (reports / "results").glob("*.json")]
    assert all(r["status"] == "ok" for r in records)
    environments = {r["cell"]["environment"] for r in records}
    # repeats: auto: at least three rounds; more only while the comparison was open, and
    # then the run said so; never past max_repeats (6), re-runs of contended repeats aside.
    used = {name: sum(1 for r in records if r["cell"]["environment"] == name)
            for name in environments}
    contended = sum(1 for r in records if r["noise"]["contended"])
    print("repeats used:", used, "contended:", contended)
    assert all(3 <= n <= 6 + contended for n in used.values())
    # The two stacks took their rounds in step, and every result says the repeats were auto
    # up to 6: the page spends each look's share of the 5% (envbench.inference.looks).
    assert len(set(used.values())) == 1, used
    assert all(r["cell"]["order"]["max_repeats"] == 6 for r in records)
    if max(used.values()) > 3:
        assert "more cell(s) (comparisons still open" in proc_stdout
    assert environments == {"debian-python3-torch", "torch2.13.0-cpu"}
    torches = {r["cell"]["environment"]: r["env"]["torch"] for r in records}
    assert torches["debian-python3-torch"].startswith("1.13")
    assert torches["torch2.13.0-cpu"].startswith("2.13.0")
    page = (reports / "index.html").read_text()
    for name in environments:
        mine = [r for r in records if r["cell"]["environment"] == name]
        clean = [r for r in mine if not r["noise"]["contended"]] or mine
        median = statistics.median(r["summary"]["epoch_s_median"] for r in clean)
        table = re.search(r'<table class="headline" data-environment="%s"[^>]*>(.*?)</table>'
                          % re.escape(name), page, flags=re.S).group(1)
        assert ">%.2f<" % median in table, (name, median)
    # The family line, and a verdict where the difference is real (Debian's torch 1.13 took
    # about twice as long as PyPI's 2.13 on every host this ran on).
    assert ("1 comparison: at most a 5% chance that its verdict is false. Its repeats were "
            "decided by repeats: auto") in page
    cell = re.search(r'<tr data-env="torch2.13.0-cpu">(.*?)</tr>', page, flags=re.S).group(1)
    print("the demo's verdict:", re.sub(r"<[^>]+>", " ", cell))
    assert re.search(r"\d\.\d\d× (faster|slower) \(\d\.\d\d–\d\.\d\d\)", cell), cell
    assert re.search(r"\d+(\.\d+)?% interval; would have seen ≥ \d+(\.\d)?%", cell), cell
    synthetic = all(r["config"]["synthetic"] for r in records)
    assert ("Every result here ran on synthetic data" in page) is synthetic
