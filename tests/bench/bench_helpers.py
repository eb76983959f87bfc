"""Helpers for bench's tests (a module of its own: several conftest.py files exist)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

try:  # the host's validator (jsonschema): bench's own tests must not need it
    from envbench.results import contract
except ImportError:  # a GPU box with only torch and pytest: bench's own required keys
    contract = None

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

try:
    import torchvision  # noqa: F401
    HAS_TORCHVISION = True
except ImportError:
    HAS_TORCHVISION = False

no_gpu = pytest.mark.skipif(
    __import__("torch").cuda.is_available(),
    reason="this machine has a GPU: the no-GPU failure path cannot be provoked here")

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
    # The contract's JSON Schema, with the host's validator: a real output must pass it.
    assert problems(record) == [], problems(record)
    return proc.returncode, record, proc.stdout


def problems(record):
    """The schema's problems with ``record``; without jsonschema, the required keys that
    bench's own result module lists (what a machine with torch alone can check)."""
    if contract is not None:
        return contract.problems(record)
    from bench import result

    missing = ["%s.%s" % (section, key) for section, keys in result.REQUIRED.items()
               for key in keys if key not in (record.get(section) or {})]
    return missing + [key for key in result.SCHEMA_DOCUMENT["required"] if key not in record]


def abort_without_core():
    """SIGABRT, as a C++ terminate does, without leaving a core file behind."""
    import os
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.abort()
