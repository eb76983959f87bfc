"""A real Docker engine, a locally built Debian base, a local wheelhouse, and the two e2e stacks.

With CI set, an engine that does not answer fails these tests; elsewhere they skip and say why.
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
from cifar_fixture import write_cifar

from envbench.engine import gpu
from envbench.images import baseimage
from envbench.images import wheelhouse as wheelhouses

ROOT = Path(__file__).resolve().parents[2]

E2E_MATRIX = ROOT / "tests" / "e2e" / "matrix.yaml"
TORCH = "2.13.0"
# The example workloads' packages (examples/vit, examples/hf-bert), which the e2e pip stack
# declares.
EXTRA = ("einops==0.8.2", "transformers==5.25.0")


# The modules whose images need the most disk at their peak (the CUDA 13 stack: ~20 GB with
# its builder stage and its build context of wheels), run first among these tests, while the
# disk holds none of the other modules' images and folders yet. Each removes what it made.
DISK_FIRST = ("test_cuda_image.py",)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    slots = [i for i, item in enumerate(items) if item.path.parent == here]
    ordered = sorted((items[i] for i in slots), key=lambda item: item.path.name not in DISK_FIRST)
    for slot, item in zip(slots, ordered):
        items[slot] = item


@pytest.fixture(scope="session")
def client() -> docker.DockerClient:
    try:
        engine = docker.from_env(timeout=600)
        engine.ping()
    except docker.errors.DockerException as exc:
        message = "no Docker engine answers (%s)" % str(exc)[:200]
        if os.environ.get("CI"):
            pytest.fail(message + "; .ci/run should have started dockerd")
        pytest.skip(message + "; start dockerd to run the end-to-end tests")
    return engine


@pytest.fixture(scope="session")
def base_tag(client) -> str:
    """The Debian base, as the demo gets it (baseimage): debootstrap with no registry."""
    return baseimage.ensure_base(client)


@pytest.fixture(scope="session")
def wheelhouse(client, python_base) -> Path:
    """torch 2.13.0 and its dependencies for the base's Python, with the example workload's
    einops, fetched once by the host (containers cannot reach the index here)."""
    python = client.containers.run(python_base, ["python3", "-c", "import sys; print('%d.%d' "
                                                 "% sys.version_info[:2])"], remove=True)
    return wheelhouses.ensure_wheelhouse(TORCH, python.decode().strip(), extra=EXTRA)


@pytest.fixture(scope="session")
def cifar(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cifar")
    write_cifar(str(root), per_batch=200, test_count=200)
    root.chmod(0o755)  # the container runs as the invoking user, not as the tmp dir's owner
    return root


@pytest.fixture(scope="session")
def python_base(client, base_tag) -> str:
    """The Debian base with python3 and venv: a pip stack built on it needs no apt, so its
    build runs with the network off."""
    return baseimage.ensure_python_base(client, base_tag)


@pytest.fixture(scope="session")
def e2e_env(base_tag, python_base, wheelhouse, tmp_path_factory) -> dict[str, str]:
    # Locks of the e2e matrix name this machine's wheelhouse: they live in a temporary
    # folder, not in the repository.
    return dict(os.environ, ENVBENCH_BASE=base_tag, ENVBENCH_PYTHON_BASE=python_base,
                ENVBENCH_WHEELHOUSE=str(wheelhouse),
                ENVBENCH_LOCKS=str(tmp_path_factory.mktemp("locks")))


def envbench(env: dict[str, str], *args: str, timeout: int = 1800) -> subprocess.CompletedProcess:
    """Run the kit's CLI as a user would and capture what they would see."""
    return subprocess.run([sys.executable, "-m", "envbench", *map(str, args)], cwd=ROOT, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout)


@pytest.fixture(scope="session")
def first_run(e2e_env, cifar, tmp_path_factory):
    """Build both stacks and run one cell in each: the run the other tests look at."""
    reports = tmp_path_factory.mktemp("reports")
    # The other tests look for exactly one repeat of each cell, in the matrix's order.
    proc = envbench(e2e_env, "bench", "--matrix", E2E_MATRIX, "--data", cifar, "--reports", reports,
                    "--order", "grouped")
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-4000:]
    return reports, proc.stdout


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

