"""The GPU happy path, where a CUDA GPU exists (a lent GPU machine, a GPU VM): one real CUDA
run of bench, natively. Elsewhere every test here skips and says why; these skips are not
counted as coverage of anything (`perf/gpu_path.py` runs this file on a lent GPU)."""
from __future__ import annotations

import pytest
import torch
from bench_helpers import run_bench

from bench.result import PHASES

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="no CUDA GPU here (torch.cuda.is_available() is False): the GPU happy path runs "
           "on a GPU host (perf/gpu_path.py runs it on a lent one)")]


def test_one_cuda_run_names_its_gpu_splits_its_time_and_measures_its_memory(tmp_path):
    code, record, out = run_bench(tmp_path, "--device", "cuda", "--synthetic", "--limit",
                                  "4096", "--limit-test", "1024", "--epochs", "3",
                                  "--batch-size", "256", "--pipeline", "resident")
    assert code == 0, out
    assert record["status"] == "ok"
    # The device as CUDA itself names it, asked here, not by bench.
    assert record["env"]["device_name"] == torch.cuda.get_device_name(0)
    assert record["env"]["gpu_count"] == torch.cuda.device_count()
    major, minor = torch.cuda.get_device_capability(0)
    assert record["env"]["cuda"] == torch.version.cuda
    # The CUDA-event phase split of each steady epoch adds up to its wall time within 5%:
    # events resolved once at epoch end, data waits on the host clock.
    for epoch in record["epochs"][1:]:
        phases = epoch["phases_s"]
        assert set(phases) == set(PHASES)
        assert all(phases[p] > 0 for p in ("forward", "backward", "optimizer")), phases
        total = sum(phases.values())
        assert abs(total - epoch["wall_s"]) <= 0.05 * epoch["wall_s"], (total, epoch)
    memory = record["memory"]
    assert 0 < memory["gpu_peak_allocated_bytes"] <= memory["gpu_peak_reserved_bytes"]
    # LeNet's weights, a 256-image batch and its activations: far above a few hundred KiB.
    assert memory["gpu_peak_allocated_bytes"] > 256 * 3 * 32 * 32 * 4, (major, minor, memory)


def test_bf16_on_a_gpu_runs_in_bf16_or_is_refused_by_capability(tmp_path):
    code, record, out = run_bench(tmp_path, "--device", "cuda", "--synthetic", "--limit",
                                  "1024", "--limit-test", "256", "--epochs", "1",
                                  "--batch-size", "256", "--pipeline", "resident",
                                  "--amp", "bf16")
    major, _ = torch.cuda.get_device_capability(0)
    if major >= 8:  # the decision is the capability's, computed here
        assert code == 0 and record["summary"]["forward_dtype"] == "bfloat16", out
    else:
        assert code == 1 and record["error"]["type"] == "UnsupportedOption"
        assert "compute capability 8.0" in record["error"]["message"]


@pytest.mark.skipif(torch.cuda.device_count() < 2,
                    reason="%d CUDA GPU(s) here: every device's peak needs two or more"
                    % torch.cuda.device_count())
@pytest.mark.parametrize("mode", ["dp", "ddp"])
def test_a_multi_gpu_run_records_every_devices_memory_peak(tmp_path, mode):
    count = torch.cuda.device_count()
    code, record, out = run_bench(tmp_path, "--device", "cuda", "--synthetic", "--limit",
                                  "4096", "--limit-test", "1024", "--epochs", "2",
                                  "--batch-size", "256", "--pipeline", "resident",
                                  "--parallel", mode, "--nproc", str(count))
    assert code == 0, out
    memory = record["memory"]
    devices = memory["gpu_devices"]
    assert [d["index"] for d in devices] == list(range(count))
    assert all(0 < d["peak_allocated_bytes"] <= d["peak_reserved_bytes"] for d in devices)
    assert memory["gpu_peak_allocated_bytes"] == max(d["peak_allocated_bytes"] for d in devices)


def test_a_profiled_cuda_run_ranks_by_kernel_time_and_its_trace_holds_kernels(tmp_path):
    import gzip
    import json

    code, record, out = run_bench(tmp_path, "--device", "cuda", "--synthetic", "--limit",
                                  "2048", "--limit-test", "256", "--epochs", "1",
                                  "--batch-size", "256", "--pipeline", "resident",
                                  "--profile")
    assert code == 0, out
    profile = record["profile"]
    assert profile["ranked_by"] == "self_device" and profile["note"] is None
    assert sum(o["share"] for o in profile["operators"]) == pytest.approx(1.0, abs=1e-4)
    assert any(o["self_device_s"] > 0 for o in profile["operators"])
    with gzip.open(str(tmp_path / profile["trace"]), "rt") as f:
        events = json.load(f)["traceEvents"]
    assert any(e.get("cat") == "kernel" for e in events), "no CUDA kernel in the trace"


def test_the_probe_runs_in_bf16_on_a_gpu_that_has_it(tmp_path):
    major, _ = torch.cuda.get_device_capability(0)
    if major < 8:
        pytest.skip("compute capability %d.x has no bf16 tensor cores" % major)
    code, record, out = run_bench(tmp_path, "--device", "cuda", "--synthetic", "--limit",
                                  "1024", "--limit-test", "256", "--epochs", "1",
                                  "--batch-size", "256", "--pipeline", "resident",
                                  "--amp", "bf16")
    assert code == 0, out
    probe = record["probe"]
    assert probe["dtype"] == "bfloat16" and probe["note"] is None
    # Far above any CPU's: a bf16 tensor-core matmul of n >= 1024 on an Ampere or newer GPU.
    assert probe["flops_per_s"] > 5e12, probe


def test_the_event_clock_at_batch_32_is_bounded_and_said(tmp_path):
    """#31: at batch 32 an epoch is thousands of event records. The result carries what the
    clock cost the host (events created and recorded), measured in the cell's process."""
    code, record, out = run_bench(tmp_path, "--device", "cuda", "--synthetic", "--limit",
                                  "8192", "--limit-test", "1024", "--epochs", "2",
                                  "--batch-size", "32", "--pipeline", "resident",
                                  "--probe", "off")
    assert code == 0, out
    clock = record["clock"]
    assert clock["marks_per_epoch"] == 5 * (8192 // 32)
    assert 0 < clock["mark_s"] < 1e-3
    steady = record["epochs"][-1]["wall_s"]
    print("CUDA event clock at batch 32: %.2f µs a mark, %d marks, %.1f ms an epoch of %.3f s "
          "(%.2f%%)" % (clock["mark_s"] * 1e6, clock["marks_per_epoch"],
                        clock["epoch_s_at_most"] * 1e3, steady,
                        100 * clock["epoch_s_at_most"] / steady))
    assert clock["epoch_s_at_most"] < steady
