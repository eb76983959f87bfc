"""A real Docker engine, a locally built Debian base, a local wheelhouse, and the two e2e stacks.

With CI set, an engine that does not answer fails these tests; elsewhere they skip and say why.
"""
from __future__ import annotations

import os
from pathlib import Path

import docker
import pytest
from cifar_fixture import write_cifar
from e2e_support import E2E_MATRIX, envbench, prepare

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
def prepared(client) -> tuple[str, str, Path]:
    return prepare(client)


@pytest.fixture(scope="session")
def base_tag(prepared) -> str:
    """The Debian base, as the demo gets it (baseimage): debootstrap with no registry."""
    return prepared[0]


@pytest.fixture(scope="session")
def wheelhouse(prepared) -> Path:
    """torch 2.13.0 and its dependencies for the base's Python, with the example workload's
    einops, fetched once by the host (containers cannot reach the index here)."""
    return prepared[2]


@pytest.fixture(scope="session")
def cifar(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cifar")
    write_cifar(str(root), per_batch=200, test_count=200)
    root.chmod(0o755)  # the container runs as the invoking user, not as the tmp dir's owner
    return root


@pytest.fixture(scope="session")
def python_base(prepared) -> str:
    """The Debian base with python3 and venv: a pip stack built on it needs no apt, so its
    build runs with the network off."""
    return prepared[1]


@pytest.fixture(scope="session")
def e2e_env(base_tag, python_base, wheelhouse, tmp_path_factory) -> dict[str, str]:
    # Locks of the e2e matrix name this machine's wheelhouse: they live in a temporary
    # folder, not in the repository.
    return dict(os.environ, ENVBENCH_BASE=base_tag, ENVBENCH_PYTHON_BASE=python_base,
                ENVBENCH_WHEELHOUSE=str(wheelhouse),
                ENVBENCH_LOCKS=str(tmp_path_factory.mktemp("locks")))


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


