"""Hostile matrices: nothing reaches a Dockerfile or the engine unchecked, and `check` says
so before any build, with the key path and no traceback."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from envbench.errors import MatrixError, UserError
from envbench.images import dockerfile, wheelhouse
from envbench.matrix import models, sources
from envbench.matrix.models import Environment

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
    (["report", "--offline"], "--offline"),
    (["build", "--quick"], "--quick"),
    (["build", "--synthetic"], "--synthetic"),
    (["check", "--reports", "x"], "--reports x"),
])
def test_an_option_a_command_would_ignore_is_refused_with_the_ones_it_takes(argv, refused):
    proc = subprocess.run([sys.executable, "-m", "envbench", *argv], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    command = argv[0]
    assert proc.stderr.startswith("error: envbench %s does not take %s; its options are: "
                                  % (command, refused)), proc.stderr
    assert "--matrix" in proc.stderr


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
