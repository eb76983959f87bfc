"""A user's workload folder as a hostile user shapes it: bytecode standing in for source,
a file swapped for a link to /dev/zero after the walk, folders 1,200 deep, the workload a
FIFO or a socket, a name with ':' in it. Each is one sentence before anything runs (or a
bounded refusal in the cell), never a hang, a traceback or a measurement under the wrong
identity. Real files, real `check`, real bench."""
from __future__ import annotations

import os
import py_compile
import socket
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from bench import workloads as catalog
from bench.errors import WorkloadError
from envbench.cells import containerrun
from envbench.matrix.workloads import WorkloadPlan

ROOT = Path(__file__).resolve().parents[2]
MODEL = "import torch\n\n\ndef net():\n    return torch.nn.Linear(3, 9)\n"
PACKAGE = textwrap.dedent('''
    import torch
    from .model import net


    def build(ctx):
        x = torch.randn(64, 3)
        y = torch.randint(0, 9, (64,))
        return {"model": net(), "train": (x, y), "test": (x[:16], y[:16])}
''')


def check(folder: Path, entry: str) -> subprocess.CompletedProcess:
    matrix = folder / "matrix.yaml"
    matrix.write_text("environments:\n  e: {torch: '2.13.0'}\ntargets: {cpu: {device: cpu}}\n"
                      "benchmark: {data: synthetic, workload: %s}\n" % entry)
    return subprocess.run([sys.executable, "-m", "envbench", "check", "--matrix", str(matrix),
                           "--synthetic"], cwd=ROOT, capture_output=True, text=True, timeout=120)


def _package(folder: Path) -> Path:
    package = folder / "mine"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(PACKAGE)
    (package / "model.py").write_text(MODEL)
    return package


def test_bytecode_with_no_source_is_refused_before_anything_runs(tmp_path):
    # Python imports model.pyc when model.py is gone: code the hash would not cover.
    package = _package(tmp_path)
    py_compile.compile(str(package / "model.py"), cfile=str(package / "model.pyc"))
    (package / "model.py").unlink()
    proc = check(tmp_path, "{file: mine}")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "model.pyc: compiled bytecode outside __pycache__ would run in place of source " \
           "the kit hashes: delete it and keep the .py" in proc.stderr, proc.stderr


def test_a_cells_bytecode_caches_are_hidden_and_one_that_appears_later_is_refused(tmp_path):
    """A .pyc in __pycache__ whose recorded mtime and size match its .py is loaded without
    the source being read: the cell hides every __pycache__ the host found behind an empty
    tmpfs, and bench refuses to import where one still holds files."""
    package = _package(tmp_path)
    # The crafted cache: another model's bytecode, stamped with model.py's mtime and size.
    other = tmp_path / "other.py"
    other.write_text(MODEL.replace("Linear(3, 9)", "Linear(3, 8)"))  # the same length
    assert other.stat().st_size == (package / "model.py").stat().st_size
    stamp = (package / "model.py").stat().st_mtime
    os.utime(other, (stamp, stamp))
    cache = package / "__pycache__"
    cache.mkdir()
    tag = sys.implementation.cache_tag
    py_compile.compile(str(other), cfile=str(cache / ("model.%s.pyc" % tag)))
    digest = catalog.digest(str(package))
    assert catalog.bytecode_caches(str(package)) == ["__pycache__"]
    # The cell's mounts: the folder read-only, its cache behind an empty tmpfs.
    plan = WorkloadPlan("mine", "cifar10", None, None, None, path=package, function="build",
                        sha256=digest, bytecode_caches=("__pycache__",))
    options = containerrun.container_options(
        ["x"], _cpu(), type("Image", (), {"id": "sha256:i", "tags": []})(),
        containerrun.Mounts(tmp_path, tmp_path, None, tmp_path), "cell", tmp_path / "out",
        plan)
    hidden = [m for m in options["mounts"] if m["Target"] == "/workload/mine/__pycache__"]
    assert len(hidden) == 1 and hidden[0]["Type"] == "tmpfs", options["mounts"]
    # Where the cache is not hidden (it appeared after the host looked), bench refuses.
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "bench", "--device", "cpu", "--synthetic",
                           "--epochs", "1", "--batch-size", "16", "--pipeline", "resident",
                           "--workload", "mine", "--workload-file",
                           str(package), "--workload-sha256", digest, "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "Traceback" not in proc.stdout[-2000:]
    assert "/__pycache__ holds bytecode that appeared after the host hashed the folder" \
        in out.read_text(), out.read_text()


def _cpu():
    from envbench.cells.resources import Resources
    return Resources(device="cpu", cpus=None, cpuset=None, threads=2, threads_from="host",
                     host_cpus=2, memory=None, swap=None, gpus=None)


@pytest.mark.parametrize("swap", ["/dev/zero", "fifo"])
def test_a_file_swapped_after_the_walk_is_refused_not_read_for_ever(tmp_path, swap):
    package = _package(tmp_path)
    target = package / "model.py"
    found = catalog._files(str(package))  # the walk saw a regular file
    target.unlink()
    if swap == "fifo":
        os.mkfifo(target)
    else:
        target.symlink_to(swap)
    outcome: list[object] = []

    def hash_it() -> None:
        original = catalog._files
        catalog._files = lambda path: found  # the walk's answer, from before the swap
        try:
            outcome.append(catalog.digest(str(package)))
        except WorkloadError as exc:
            outcome.append(exc)
        finally:
            catalog._files = original

    worker = threading.Thread(target=hash_it, daemon=True)
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), "the hash read %s for 30 s" % swap
    (error,) = outcome
    assert isinstance(error, WorkloadError)
    assert ("model.py became a symbolic link while it was read" if swap != "fifo" else
            "model.py became a FIFO (named pipe) while it was read") in str(error)


def test_folders_1200_deep_are_one_sentence(tmp_path):
    package = _package(tmp_path)
    made = [package]
    for _ in range(1200):  # one by one: os.makedirs recurses as deep
        made.append(made[-1] / "d")
        made[-1].mkdir()
    try:
        proc = check(tmp_path, "{file: mine}")
    finally:  # pytest's own clean-up recurses as deep too
        for folder in reversed(made[1:]):
            folder.rmdir()
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "has folders more than 32 levels deep" in proc.stderr


@pytest.mark.parametrize("kind", ["fifo", "socket"])
def test_a_workload_that_is_a_fifo_or_a_socket_is_named_for_what_it_is(tmp_path, kind):
    path = tmp_path / "mine.py"
    if kind == "fifo":
        os.mkfifo(path)
        said = "a FIFO (named pipe)"
    else:
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        said = "a socket"
    proc = check(tmp_path, "{file: mine.py}")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "benchmark.workload.file: mine.py is %s, not a .py file or a folder" % said \
        in proc.stderr, proc.stderr


def test_a_name_with_a_colon_is_mounted_as_a_path_not_a_volume_specification(tmp_path):
    path = tmp_path / "v1:final.py"
    path.write_text(PACKAGE.replace("from .model import net", "") + MODEL)
    proc = check(tmp_path, "{file: 'v1:final.py'}")
    assert proc.returncode == 0, proc.stderr
    plan = WorkloadPlan("v1-final", "cifar10", None, None, None, path=path, function="build",
                        sha256=catalog.digest(str(path)))
    options = containerrun.container_options(
        ["x"], _cpu(), type("Image", (), {"id": "sha256:i", "tags": []})(),
        containerrun.Mounts(tmp_path, tmp_path, None, tmp_path), "cell", tmp_path / "out",
        plan)
    (mount,) = [m for m in options["mounts"] if m["Source"] == str(path)]
    assert mount["Target"] == "/workload/v1:final.py" and mount["ReadOnly"] is True
