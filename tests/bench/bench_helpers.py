"""Helpers for bench's tests (a module of its own: several conftest.py files exist)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from bench import result

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

try:
    import torchvision  # noqa: F401
    HAS_TORCHVISION = True
except ImportError:
    HAS_TORCHVISION = False

needs_torchvision = pytest.mark.skipif(
    not HAS_TORCHVISION,
    reason="torchvision is not importable beside this torch; the classic pipeline is tested "
           "in the Debian-stack run of these tests (see noxfile.py)")


def run_bench(tmp_path, *args, name="result.json"):
    """Run `python -m bench` as a user would; return (exit code, record, stdout+stderr)."""
    out = os.path.join(str(tmp_path), name)
    proc = subprocess.run([sys.executable, "-m", "bench", *map(str, args), "--out", out],
                          cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=600)
    with open(out) as f:
        record = json.load(f)
    assert result.validate(record) == [], result.validate(record)
    return proc.returncode, record, proc.stdout
