"""Fixtures for bench's tests. These run twice under `nox -s tests`: in the host venv (current
torch, no torchvision) and under Debian's python3 with python3-torch 1.13 + torchvision (the old
stack and the classic pipeline)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

from cifar_fixture import write_cifar  # noqa: E402

from bench import result  # noqa: E402

try:
    import torchvision  # noqa: F401
    HAS_TORCHVISION = True
except ImportError:
    HAS_TORCHVISION = False

needs_torchvision = pytest.mark.skipif(
    not HAS_TORCHVISION,
    reason="torchvision is not importable beside this torch; the classic pipeline is tested "
           "in the Debian-stack run of these tests (see noxfile.py)")


@pytest.fixture(scope="session")
def cifar_dir(tmp_path_factory):
    return write_cifar(str(tmp_path_factory.mktemp("cifar")), per_batch=200, test_count=200)


def run_bench(tmp_path, *args, name="result.json"):
    """Run `python -m bench` as a user would; return (exit code, record, stdout+stderr)."""
    out = os.path.join(str(tmp_path), name)
    proc = subprocess.run([sys.executable, "-m", "bench", *map(str, args), "--out", out],
                          cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=600)
    with open(out) as f:
        record = json.load(f)
    assert result.validate(record) == [], result.validate(record)
    return proc.returncode, record, proc.stdout
