"""What the e2e tests share beyond fixtures: the repository, the e2e matrix and stacks, the
kit's CLI run as a user runs it, a second engine, and how this host refuses GPU cells.

Imported by name (``from e2e_support import ...``), never as ``conftest``: pytest imports
each folder's conftest.py under that one name, so tests/bench's and this folder's would
shadow each other where both are collected in one run.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from envbench.engine import gpu

ROOT = Path(__file__).resolve().parents[2]

E2E_MATRIX = ROOT / "tests" / "e2e" / "matrix.yaml"
TORCH = "2.13.0"
# The example workloads' packages (examples/vit, examples/hf-bert), which the e2e pip stack
# declares.
EXTRA = ("einops==0.8.2", "transformers==5.25.0")


def prepare(client: docker.DockerClient) -> tuple[str, str, Path]:
    """The Debian base (as the demo gets it: debootstrap, no registry), the base with python3
    and venv (a pip stack built on it needs no apt), and the wheelhouse of torch and the
    example workloads' packages for its Python (containers cannot reach the index here):
    the session fixtures, and what the noxfile makes once before two pytest processes share
    them (python tests/e2e/e2e_support.py)."""
    from envbench.images import baseimage
    from envbench.images import wheelhouse as wheelhouses

    base = baseimage.ensure_base(client)
    python_base = baseimage.ensure_python_base(client, base)
    python = client.containers.run(python_base, ["python3", "-c", "import sys; print('%d.%d' "
                                                 "% sys.version_info[:2])"], remove=True)
    return base, python_base, wheelhouses.ensure_wheelhouse(TORCH, python.decode().strip(),
                                                            extra=EXTRA)


def envbench(env: dict[str, str], *args: str, timeout: int = 1800) -> subprocess.CompletedProcess:
    """Run the kit's CLI as a user would and capture what they would see."""
    return subprocess.run([sys.executable, "-m", "envbench", *map(str, args)], cwd=ROOT, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout)


@contextlib.contextmanager
def second_engine(client, base_tag: str, home: Path, data: Path,
                  path: str | None = None) -> Iterator[str]:
    """A second dockerd for one test, in its own network namespace (whatever it does to
    bridges stays away from the main engine), its data in ``data``, with the base image
    loaded from the main engine (no registry to pull it from); yields its socket URL.
    ``path``: dockerd's PATH (what it finds there at start, e.g. a GPU hook, it keeps)."""
    if os.getuid() != 0 or shutil.which("dockerd") is None:
        pytest.skip("starting a second engine needs root and dockerd")
    socket = "unix://%s" % (home / "docker.sock")
    log = (home / "dockerd.log").open("w")
    env = dict(os.environ, PATH=path) if path else None
    daemon = subprocess.Popen(["unshare", "--net", "--", "dockerd", "--data-root",
                               str(data / "root"), "--exec-root", str(home / "exec"),
                               "--pidfile", str(home / "dockerd.pid"),
                               "--host", socket, "--bridge", "none", "--iptables=false",
                               "--ip6tables=false", "--storage-driver", "vfs"],
                              stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                              env=env)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                engine = docker.DockerClient(base_url=socket, timeout=300)
                engine.ping()
                break
            except docker.errors.DockerException:
                assert time.monotonic() < deadline, (home / "dockerd.log").read_text()[-2000:]
                time.sleep(0.2)
        engine.images.load(b"".join(client.images.get(base_tag).save(named=True)))
        yield socket
    finally:
        daemon.terminate()
        daemon.wait(timeout=60)


def gpu_refusal() -> tuple[str, str, str, int]:
    """How this host, whose engine has no NVIDIA runtime, refuses a run's GPU cells: (error
    type, sentence, the run's line, the exit code of a run whose CPU cells ran). A host with
    no NVIDIA GPU at all refuses them by design; one with a GPU lacks its runtime, a fault."""
    if gpu.host_gpus() is None and gpu.proc_driver() is None and not gpu.nvidia_on_pci():
        return "NoGpu", gpu.NO_GPU, "GPU cells are left out on this host: " + gpu.NO_GPU, 0
    return ("GpuUnavailable", gpu.NO_RUNTIME,
            "GPU cells cannot run on this host: " + gpu.NO_RUNTIME, 1)


# The default matrix's CUDA 13 stack, whose NVIDIA wheels (2.2 of its 3 GB, built for any
# Python) test_cuda_image's stack locks too.
CUDA_LOCK = ROOT / "locks" / "torch2.14-cu130.pylock.toml"


def prefetch_cuda_wheels() -> None:
    """Those NVIDIA wheels into the host's wheel cache (each checked by its sha256 on
    arrival), so that on a fresh machine the fetch overlaps the tests before the e2e ones."""
    import dataclasses

    from envbench.images import lock, wheelcache

    whole = lock.read(CUDA_LOCK)
    generic = tuple(w for w in whole.wheels if "-none-" in w.filename and "nvidia" in w.package)
    wheelcache.ensure(dataclasses.replace(whole, wheels=generic), None)


if __name__ == "__main__":
    # The noxfile starts this beside the host's tests: what the e2e tests share, made once.
    made = prepare(docker.from_env(timeout=600))
    print("e2e prerequisites ready: base %s, python base %s, wheelhouse %s" % made)
    prefetch_cuda_wheels()
