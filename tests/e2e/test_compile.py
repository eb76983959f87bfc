"""torch.compile in an image: cells that compile get a C compiler in their image (Triton's
shim needs gcc and Python.h, inductor on CPU g++), and a `compile: default` cell runs."""
from __future__ import annotations

import json

import pytest
from e2e_support import envbench

pytestmark = pytest.mark.e2e


def test_a_compile_default_cell_runs_on_the_cpu_target_in_a_cpu_image(e2e_env, client, tmp_path):
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(
        "environments:\n"
        "  torch2.13-compile:\n"
        "    python: \"3.11\"\n    torch: \"2.13.0\"\n"
        "    base: \"${ENVBENCH_PYTHON_BASE}\"\n    wheelhouse: \"${ENVBENCH_WHEELHOUSE}\"\n"
        "targets:\n  cpu: {device: cpu, cpus: 2, memory: 4g, timeout_s: 900}\n"
        "benchmark: {epochs: 2, batch_size: 64, pipeline: resident, repeats: 1, limit: 512, "
        "limit_test: 128, data: synthetic, compile: default}\n")
    reports = tmp_path / "reports"
    # Grouped: the one planned repeat only (interleaved rounds would add one for a repeat a
    # busy machine contended).
    proc = envbench(e2e_env, "bench", "--matrix", matrix, "--reports", reports, "--offline",
                    "--order", "grouped")
    assert proc.returncode == 0, proc.stdout[-4000:]
    (path,) = (reports / "results").glob("*.json")
    record = json.loads(path.read_text())
    assert record["status"] == "ok" and record["config"]["compile"] == "default"
    assert len(record["epochs"]) == 2
    # The image may predate this test (the tag is a content hash), so ask the image itself,
    # not the build's log line: gcc, g++ and Python's headers are in it.
    found = client.containers.run(
        record["env"]["image"]["id"], entrypoint=["sh", "-c"], remove=True, network_mode="none",
        command=["command -v gcc; command -v g++; /opt/venv/bin/python -c "
                 "'import sysconfig, os; print(os.path.exists(os.path.join("
                 "sysconfig.get_paths()[\"include\"], \"Python.h\")))'"]).decode().split()
    assert found[-1] == "True" and any(f.endswith("/gcc") for f in found) \
        and any(f.endswith("/g++") for f in found), found
