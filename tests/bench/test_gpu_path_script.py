"""perf/gpu_path.py, the script a lent GPU runs, smoke-tested here on the CPU: it must
run bench, keep every result, check it against the schema and print its table."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from bench_helpers import ROOT, problems


def test_the_gpu_script_runs_its_list_and_checks_what_it_wrote(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "perf/gpu_path.py", "--out", str(out),
                           "--device", "cpu", "--limit", "512", "--only", "resident",
                           "resident-ddp1-nccl", "resident-dp"], cwd=ROOT,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout
    assert sorted(os.listdir(str(out / "results"))) == [
        "resident-ddp1-nccl.json", "resident-dp.json", "resident.json",
        "resident.trace.json.gz"]  # the resident row is profiled: its trace lies beside it
    rates = {}
    for name in os.listdir(str(out / "results")):
        if not name.endswith(".json"):
            continue
        record = json.loads((out / "results" / name).read_text())
        assert problems(record) == []
        if record["status"] == "ok":
            rates[name[:-len(".json")]] = record["summary"]["samples_per_s"]
    table = (out / "table.md").read_text()
    assert table.startswith("GPU tests: not run on --device cpu\n")
    assert "| resident | ok |" in table and "ddp x1 gloo" in table
    assert "of the float32 probe's" in table and "top operators: aten::" in table
    # dp is CUDA-only: on this CPU its row is the clear failure, not a crash of the script.
    assert "| resident-dp | failed |" in table and "needs --device cuda" in table
    # Which of the two CPU runs is faster is a race on a busy machine: the verdict must be
    # the record with the higher steady throughput, whichever that is.
    assert set(rates) == {"resident", "resident-ddp1-nccl"}
    best = max(rates, key=rates.__getitem__)
    assert "Fastest: %s, %.0f training images/s" % (best, rates[best]) in table, table


def test_bench_s_tests_collect_with_nothing_but_torch_and_pytest():
    """A GPU box used for a quick native check has torch and pytest, not the host's packages
    (nor numpy, which PyPI's torch does not require): bench's tests must collect there, and
    the GPU tests run, checking results by bench's own keys."""
    hide = ("jsonschema", "pydantic", "yaml", "jinja2", "docker", "matplotlib", "rich",
            "numpy", "hypothesis", "envbench")
    code = ("import sys\n"
            "for name in %r: sys.modules[name] = None\n"
            "import pytest\n"
            "sys.exit(pytest.main(['--collect-only', '-q', '-p', 'no:cacheprovider',\n"
            "                      'tests/bench']))" % (hide,))
    # No plugins but pytest's own: the hidden packages' (hypothesis') are not there either.
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=120,
                          env=dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1"))
    assert proc.returncode == 0, proc.stdout
    assert "test_gpu.py::" in proc.stdout and "rror collecting" not in proc.stdout
    assert "test_training.py::" in proc.stdout and "test_gpu_path_script.py::" in proc.stdout
