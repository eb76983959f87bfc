"""Hostile matrices: nothing reaches a Dockerfile or the engine unchecked, and `check` says
so before any build, with the key path and no traceback."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envbench import provision
from envbench.cloud import fetch, local, tasks
from envbench.images import dockerfile, wheelhouse
from envbench.matrix import models, sources
from envbench.matrix.models import Environment
from envbench.results import clusters
from envbench.user_errors import MatrixError, UserError

ROOT = Path(__file__).resolve().parents[2]
TARGETS = "targets:\n  cpu: {device: cpu}\n"


def check(tmp_path: Path, environments: str, env: dict[str, str] | None = None,
          *options: str) -> subprocess.CompletedProcess:
    path = tmp_path / "matrix.yaml"
    path.write_text("environments:\n" + environments + TARGETS)
    return subprocess.run([sys.executable, "-m", "envbench", "check", "--matrix", str(path),
                           "--synthetic", *options], cwd=ROOT, capture_output=True, text=True,
                          env=dict(__import__("os").environ, **(env or {})))


@pytest.mark.parametrize("environment, expected", [
    # Refused in the matrix itself.
    ('  x: {torch: "2.13.0", apt: ["curl; rm -rf /"]}\n',
     "environments.x.apt: 'curl; rm -rf /' is not a Debian package name"),
    ('  x: {torch: "2.13.0", apt: ["a\\nRUN id"]}\n', "is not a Debian package name"),
    ('  x: {torch: "2.13.0", index_url: "https://idx.example/x\\nRUN id"}\n',
     "environments.x.index_url: 'https://idx.example/x\\nRUN id' is not an index URL"),
    ('  x: {torch: "2.13.0", index_url: "file:///etc"}\n', "is not an index URL (expected http"),
    ('  x: {torch: "2.13.0", base: "python:3.12\\nRUN id"}\n',
     "environments.x.base: 'python:3.12\\nRUN id' is not an image reference"),
    ('  x: {torch: "2.13.0", base: "Python:3.12"}\n', "is not an image reference"),
    ('  a..b: {torch: "2.13.0"}\n', "environments: 'a..b': 'a..b' cannot name an image"),
    ('  Seed: {torch: "2.13.0"}\n  seed: {torch: "2.13.0"}\n',
     "environments: 'Seed' and 'seed' would share the image envbench/seed"),
    # Refused once ${VAR}s are expanded, before anything is built.
    ('  x: {torch: "2.13.0", index_url: "${ENVBENCH_T_URL}/cpu"}\n',
     "environments.x.index_url: ${ENVBENCH_T_URL} is not set"),
    ('  x: {torch: "2.13.0", index_url: "${ENVBENCH_T_EVIL}/cpu"}\n',
     "environments.x.index_url: 'https://idx.example/\\nRUN id/cpu' is not an index URL"),
    ('  x: {torch: "2.13.0", base: "${ENVBENCH_T_EVIL}"}\n',
     "environments.x.base: 'https://idx.example/\\nRUN id' is not an image reference"),
    ('  x: {torch: "2.13.0", wheelhouse: "./no-wheels"}\n', "environments.x.wheelhouse: "),
    ('  x: {torch: "2.13.0", dockerfile: "nope.j2"}\n', "environments.x.dockerfile: "),
])
def test_hostile_environments_are_refused_by_check_with_the_key(tmp_path, environment, expected):
    proc = check(tmp_path, environment, {"ENVBENCH_T_EVIL": "https://idx.example/\nRUN id"})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert expected in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


def test_a_default_in_a_variable_and_a_clean_check(tmp_path, monkeypatch):
    proc = check(tmp_path, '  x: {torch: "2.13.0", index_url: '
                           '"${ENVBENCH_T_UNSET:-https://idx.example/whl}/cpu"}\n')
    assert proc.returncode == 0, proc.stderr
    assert "valid, 3 cells" in proc.stdout
    monkeypatch.delenv("ENVBENCH_T_UNSET", raising=False)
    env = Environment(torch="2.13.0", index_url="${ENVBENCH_T_UNSET:-https://idx.example/whl}/cpu")
    assert sources.index_url("x", env) == "https://idx.example/whl/cpu"
    monkeypatch.setenv("ENVBENCH_T_UNSET", "https://mirror.example/")
    assert sources.index_url("x", env) == "https://mirror.example/cpu"


def test_every_rendered_value_is_shell_quoted(tmp_path):
    """Defence in depth: a value that got past the checks (here: built without them) is
    still one shell word on its RUN line."""
    env = Environment.model_construct(**dict(Environment(torch="2.13.0").__dict__,
                                             apt=("a b; id",)))
    text = dockerfile.plan("x", env, tmp_path).dockerfile
    assert "--no-install-recommends 'a b; id'" in text
    # The index URL is checked again after expansion, so $(...) never reaches a RUN line.
    evil = Environment.model_construct(**dict(Environment(torch="2.13.0").__dict__,
                                              index_url="https://x/$(id)"))
    with pytest.raises(UserError, match="holds whitespace, quotes or shell characters"):
        dockerfile.plan("x", evil, tmp_path)
    clean = Environment(source="debian", base="envbench/debian:bookworm", apt=["g++"])
    assert "python3-torchvision g++" in dockerfile.plan("y", clean, tmp_path).dockerfile


def test_bounds_of_targets():
    def problems(target: str) -> list[str]:
        with pytest.raises(MatrixError) as caught:
            models.parse("environments: {x: {torch: \"2.13.0\"}}\ntargets: {c: %s}\n" % target)
        return caught.value.problems

    assert problems("{device: cpu, memory: '1'}") == [
        "targets.c: memory: 1 is below 64m, too little for any torch to start"]
    assert problems("{device: cpu, memory: 63m}")[0].endswith("too little for any torch to start")
    assert "Input should be a finite number" in problems("{device: cpu, price_per_hour: .inf}")[0]
    assert "greater than or equal to 0" in problems("{device: cpu, price_per_hour: -0.1}")[0]
    assert "less than or equal to 604800" in problems("{device: cpu, timeout_s: 604801}")[0]
    assert models.parse("environments: {x: {torch: \"2.13.0\"}}\n"
                        "targets: {c: {device: cpu, memory: 64m, timeout_s: 604800}}\n")


def test_an_unset_variable_fails_the_plan_not_the_process():
    env = Environment(torch="2.13.0", base="${ENVBENCH_T_NOT_SET}")
    with pytest.raises(UserError, match=r"environments.x.base: \$\{ENVBENCH_T_NOT_SET\} is not"):
        dockerfile.plan("x", env, Path("."))


@pytest.mark.parametrize("argv, refused", [
    (["report", "--offlne"], "--offlne"),
    (["build", "--quik"], "--quik"),
    (["check", "--no-such-option", "x"], "--no-such-option x"),
])
def test_an_option_no_verb_takes_is_refused_with_the_ones_this_one_takes(argv, refused):
    proc = subprocess.run([sys.executable, "-m", "envbench", *argv], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    command = argv[0]
    assert proc.stderr.startswith("error: envbench %s does not take %s; its options are: "
                                  % (command, refused)), proc.stderr
    assert "--matrix" in proc.stderr


def test_chained_sessions_options_of_other_verbs_are_ignored_with_one_line_each(tmp_path):
    """`./noxw -s doctor bench-cuda report -- --quick --order-seed 3` gives each verb every
    option: report leaves out bench's (with their values) and says so, then does its work
    (here: says that the empty folder holds no results, not that it was asked wrongly)."""
    empty = tmp_path / "none"
    empty.mkdir()
    proc = subprocess.run([sys.executable, "-m", "envbench", "report", str(empty), "--offline",
                           "--order-seed", "3", "--frozen", "--out", str(tmp_path / "out")],
                          cwd=ROOT, capture_output=True, text=True)
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[:3] == [
        "envbench report: ignoring --offline (an option of build, bench, check, slurm; chained "
        "sessions share their options)",
        "envbench report: ignoring --order-seed (an option of bench, slurm; chained sessions "
        "share their options)",
        "envbench report: ignoring --frozen (an option of build, bench, check, slurm; chained "
        "sessions share their options)"], lines
    assert proc.returncode == 1 and lines[3].startswith("error: no results to report in ")


def test_terminal_escapes_from_elsewhere_are_not_printed_raw():
    from envbench import terminal
    hostile = ("ok\x1b[2J\x1b[H\x1b]0;pwned\x07 title\x1b[31mred\x1b[0m\r"
               "hidden\x00\x7f\x9b6n done")
    shown = terminal.safe(hostile)
    assert "\x1b" not in shown and "\x07" not in shown and "\r" not in shown
    # Sequences go whole; a lone control (\r, NUL, DEL, the C1 CSI) shows as '?'.
    assert shown == "ok titlered?hidden???6n done"
    assert terminal.safe("tab\tstays") == "tab\tstays"


def _kit_wheelhouse(tmp_path: Path) -> Path:
    folder = tmp_path / "wheelhouse-kit"
    folder.mkdir()
    (folder / "nox-2026.10.20-py3-none-any.whl").write_bytes(b"nox wheel")
    (folder / "docker-7.1.0-py3-none-any.whl").write_bytes(b"docker wheel")
    wheelhouse.write_manifest(folder)
    wheelhouse.check_manifest(folder)  # as fetched: accepted
    return folder


def test_a_wheel_planted_in_the_kit_wheelhouse_is_refused_by_name(tmp_path):
    folder = _kit_wheelhouse(tmp_path)
    (folder / "nox-9999-py3-none-any.whl").write_bytes(b"evil")
    with pytest.raises(UserError, match="holds nox-9999-py3-none-any.whl, which this machine "
                                        "did not fetch; remove .* to fetch it again$"):
        wheelhouse.check_manifest(folder)


def test_a_changed_lost_or_linked_kit_wheel_is_refused_by_name(tmp_path):
    folder = _kit_wheelhouse(tmp_path)
    (folder / "docker-7.1.0-py3-none-any.whl").write_bytes(b"docker wheel, swapped")
    with pytest.raises(UserError, match="docker-7.1.0-py3-none-any.whl changed since it was "
                                        "fetched"):
        wheelhouse.check_manifest(folder)
    (folder / "docker-7.1.0-py3-none-any.whl").unlink()
    with pytest.raises(UserError, match="lost docker-7.1.0-py3-none-any.whl since"):
        wheelhouse.check_manifest(folder)
    (tmp_path / "elsewhere.whl").write_bytes(b"docker wheel")
    (folder / "docker-7.1.0-py3-none-any.whl").symlink_to(tmp_path / "elsewhere.whl")
    with pytest.raises(UserError, match="docker-7.1.0-py3-none-any.whl, which is not a plain"):
        wheelhouse.check_manifest(folder)


@pytest.mark.parametrize("name", ["cpu\n", "cpu\r", "cp\nu", "cpu\x1b[2J"])
def test_a_name_with_a_trailing_newline_or_control_is_refused_with_the_key(name):
    """`$` matched before a final newline, so "cpu\\n" passed as a name; \\Z does not."""
    text = "environments:\n  a: {torch: \"2.13.0\"}\ntargets:\n  %s: {device: cpu}\n" \
        % json.dumps(name)
    with pytest.raises(MatrixError) as refused:
        models.parse(text)
    assert any(p.startswith("targets") for p in refused.value.problems), refused.value.problems


def test_a_hostile_runs_json_leaves_out_what_is_not_the_kits(tmp_path):
    """REPORTS/cloud/runs.json is read for the report's cloud table: a link, a FIFO, NaN,
    and entries of the wrong shape are left out, never a traceback or a hang."""
    good = {"target": "vm", "cluster": "envbench-vm", "accelerators": "CPU VM",
            "infra": "ssh/local", "price_per_hour": 0.05, "price_source": "matrix",
            "state": "done", "provisioned": True, "results": ["a.json"]}
    path = clusters.path_of(tmp_path)
    path.parent.mkdir(parents=True)
    entries = [good, dict(good, cost="free"), dict(good, state="pwned"),
               dict(good, results=[1]), dict(good, provisioned="yes"), ["not", "a", "run"]]
    path.write_text(json.dumps({"runs": entries}))
    assert [r.target for r in clusters.read(tmp_path)] == ["vm"]
    path.write_text(json.dumps({"runs": [good]}).replace("0.05", "NaN"))
    assert clusters.read(tmp_path) == []
    path.write_text(json.dumps({"runs": "all of them"}))
    assert clusters.read(tmp_path) == []
    path.unlink()
    path.symlink_to("/dev/zero")
    assert clusters.read(tmp_path) == []
    path.unlink()
    os.mkfifo(path)  # a reader that opened it blocking would wait for a writer forever
    assert clusters.read(tmp_path) == []


def test_a_job_log_restores_only_valid_results_under_plain_names(tmp_path):
    """The fallback from a VM's job log: bad base64, text that is not UTF-8, JSON that is no
    result and names that leave the folder are refused with the reason; nothing is written."""
    import base64

    def line(name: str, payload: bytes) -> str:
        return "(task, pid=7) %s %s %s" % (tasks.RESULT_MARKER, name,
                                          base64.b64encode(payload).decode())

    log = "\n".join([
        "(task, pid=7) %s bad.json !!!not-base64!!!" % tasks.RESULT_MARKER,
        "(task, pid=7) %s cut.json QUJ" % tasks.RESULT_MARKER,  # cut short
        line("latin.json", "caf\xe9".encode("latin-1")),
        line("notaresult.json", b'{"schema": 2}'),
        line("../escape.json", b"{}"),
        line(".hidden.json", b"{}"),
    ])
    written, refused = fetch.restore(log, tmp_path / "results")
    assert written == [] and not (tmp_path / "results").exists()
    reasons = dict(refused)
    assert set(reasons) == {"cut.json", "latin.json", "notaresult.json", "../escape.json",
                            ".hidden.json"}, refused  # bad.json: not even a marker line
    assert reasons["../escape.json"] == reasons[".hidden.json"] == "not a result file name"
    assert reasons["latin.json"].startswith("not base64 of UTF-8 text")
    assert reasons["cut.json"].startswith("not base64 of UTF-8 text")
    assert not list(tmp_path.parent.glob("escape.json"))


def test_secrets_never_reach_a_command_line():
    """The local launcher runs the task over ssh: the env (secrets included) goes through
    ssh's stdin into a 0600 file, so no argv on either side (`ps`) carries a value."""
    command = local.LocalLauncher._command(object(), {"HF_TOKEN": "s3cret-value"}, "echo run")
    assert "s3cret-value" not in command and "HF_TOKEN" not in command
    assert command.startswith(". %s && " % local.ENV_FILE)


def test_apt_runs_noninteractive_through_sudo_with_no_stdin(tmp_path, monkeypatch):
    """sudo drops DEBIAN_FRONTEND from the environment and a debconf prompt waits on stdin:
    apt-get must get the variable on its command line and no terminal. A stand-in apt-get
    on PATH records what it got (argv, the variable, whether stdin gave it anything)."""
    if os.geteuid() != 0:
        pytest.skip("apt_install runs apt-get directly only as root (else through sudo -n)")
    record = tmp_path / "seen"
    shim = tmp_path / "apt-get"
    shim.write_text("#!/bin/sh\n"
                    "echo \"argv=$*|frontend=$DEBIAN_FRONTEND|stdin=$(head -c 5)|\" >> %s\n"
                    % record)
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (tmp_path, os.environ["PATH"]))
    monkeypatch.delenv("DEBIAN_FRONTEND", raising=False)
    provision.apt_install(["envbench-test-pkg"], io.StringIO())
    assert record.read_text().splitlines() == [
        "argv=update -qq|frontend=noninteractive|stdin=|",
        "argv=install -y -qq envbench-test-pkg|frontend=noninteractive|stdin=|"]
