"""Fixtures for bench's tests. These run twice under `nox -s tests`: in the host venv (current
torch, no torchvision) and under Debian's python3 with python3-torch 1.13 + torchvision (the old
stack and the classic pipeline)."""
from __future__ import annotations

import pytest
from cifar_fixture import write_cifar


@pytest.fixture(scope="session")
def cifar_dir(tmp_path_factory):
    return write_cifar(str(tmp_path_factory.mktemp("cifar")), per_batch=200, test_count=200)
