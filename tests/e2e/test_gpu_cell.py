"""The GPU happy path in a container: one real CUDA cell, bench in its image with the GPUs
attached (--gpus), where the engine has a working NVIDIA runtime. Elsewhere it skips and says
why; the skip is not counted as coverage (CI's machines have no GPU)."""
from __future__ import annotations

import json

import pytest
from e2e_support import envbench

from bench.result import PHASES
from envbench.engine import gpu

pytestmark = [pytest.mark.e2e, pytest.mark.gpu]

# The default matrix's CUDA 13 stack (PyPI's Linux torch wheels are CUDA builds), on the
# synthetic set: no data set, no PyTorch index needed.
MATRIX = """\
environments:
  torch2.14-cu130:
    python: "3.13"
    torch: "2.14.1"
    torchvision: "0.29.2"
    cuda: "13.0"
targets:
  gpu: {device: cuda, gpus: 1, timeout_s: 1800}
benchmark: {epochs: 3, batch_size: 256, pipeline: resident, repeats: 1, limit: 4096,
            limit_test: 1024, data: synthetic}
"""


def test_one_cuda_cell_in_its_image_with_the_gpu_attached(client, e2e_env, tmp_path):
    found = gpu.state(client, None)
    if not found.runtime or not found.gpus:
        pytest.skip("no GPU for containers here (%s): the GPU cell runs on a GPU host"
                    % (found.problem or "no NVIDIA runtime"))
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(MATRIX)
    reports = tmp_path / "reports"
    proc = envbench(e2e_env, "bench", "--matrix", matrix, "--reports", reports,
                    "--order", "grouped", timeout=3600)
    assert proc.returncode == 0, proc.stdout[-4000:]
    (path,) = (reports / "results").glob("*.json")
    record = json.loads(path.read_text())
    assert record["status"] == "ok" and str(record["cell"]["resources"]["gpus"]) == "1"
    # The GPU the container saw is the one this host's nvidia-smi lists first.
    assert record["env"]["device_name"] == found.gpus[0].name
    assert record["env"]["gpu_count"] == 1
    for epoch in record["epochs"][1:]:
        phases = epoch["phases_s"]
        assert set(phases) == set(PHASES)
        assert abs(sum(phases.values()) - epoch["wall_s"]) <= 0.05 * epoch["wall_s"], epoch
    memory = record["memory"]
    assert 0 < memory["gpu_peak_allocated_bytes"] <= memory["gpu_peak_reserved_bytes"]
