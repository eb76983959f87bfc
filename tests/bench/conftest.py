"""Fixtures for bench's tests. These run twice under `./noxw -s tests`: in the host venv (current
torch, no torchvision) and under Debian's python3 with python3-torch 1.13 + torchvision (the old
stack and the classic pipeline)."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def cifar_dir(tmp_path_factory):
    # numpy writes the official layout's pickles; a GPU box with torch and pytest alone
    # still collects and runs every test that needs no data set.
    pytest.importorskip("numpy", reason="numpy writes the CIFAR-10 test set's pickles")
    from cifar_fixture import write_cifar

    return write_cifar(str(tmp_path_factory.mktemp("cifar")), per_batch=200, test_count=200)
