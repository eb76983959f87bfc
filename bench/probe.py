"""The matmul probe: the best matrix-multiply rate this device reaches here, in the cell's
own dtype, threads and process, measured after the timed epochs.

It is the "achievable" ceiling the page sets a cell's achieved FLOP/s against: a workload
that reaches 60% of it is compute-bound and well fed; LeNet's fraction of a percent on a GPU
says the time goes to kernel launches and data, not to arithmetic. Square matrices double
in size until one multiply takes long enough to be timed well or the largest size is reached;
at each size the best of a few timed bursts counts (the least disturbed one).
"""
from __future__ import annotations

from time import perf_counter

import torch

DTYPES = {"off": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
# The sizes tried: n x n times n x n. A GPU needs large ones to fill its SMs; two CPU cores
# are near their best by 1024 and 2048 costs 17 GFLOP a multiply.
SIZES = {"cpu": (256, 512, 1024, 2048), "cuda": (1024, 2048, 4096, 8192)}
BURST_S = 0.05      # aim for bursts this long, so the clock's resolution does not matter
BURSTS = 3
BUDGET_S = {"cpu": 1.5, "cuda": 3.0}


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _burst(a, b, out, count, device):
    _sync(device)
    started = perf_counter()
    for _ in range(count):
        torch.mm(a, b, out=out)
    _sync(device)
    return perf_counter() - started


def measure(device, amp):
    """The probe section of the record: dtype, best rate (FLOP/s) and the size it came at."""
    dtype = DTYPES[amp]
    started = perf_counter()
    best = None
    tried = []
    budget = BUDGET_S[device.type]
    generator = torch.Generator(device=device).manual_seed(0)
    try:
        for n in SIZES[device.type]:
            a = torch.randn(n, n, device=device, dtype=dtype, generator=generator)
            b = torch.randn(n, n, device=device, dtype=dtype, generator=generator)
            out = torch.empty(n, n, device=device, dtype=dtype)
            once = _burst(a, b, out, 1, device)  # also the warm-up (library init, autotuning)
            once = min(once, _burst(a, b, out, 1, device))
            count = max(1, min(1000, int(BURST_S / max(once, 1e-7))))
            seconds = min(_burst(a, b, out, count, device) for _ in range(BURSTS))
            rate = 2.0 * n ** 3 * count / seconds
            tried.append(n)
            if best is None or rate > best[0]:
                best = (rate, n)
            del a, b, out
            # The next size costs 8x this one's multiply: stop where that would overrun.
            if perf_counter() - started + 8 * once * (count * BURSTS + 2) > budget:
                break
    except RuntimeError as exc:  # a dtype this device's torch cannot multiply
        if best is None:
            return {"dtype": str(dtype).replace("torch.", ""), "flops_per_s": None, "n": None,
                    "sizes": tried, "seconds": round(perf_counter() - started, 6),
                    "tf32": _tf32(device), "threads": torch.get_num_threads(),
                    "note": ("the probe's %s matmul failed: %s"
                             % (str(dtype).replace("torch.", ""), str(exc).splitlines()[0]))[:400]}
    return {"dtype": str(dtype).replace("torch.", ""), "flops_per_s": round(best[0], 1),
            "n": best[1], "sizes": tried, "seconds": round(perf_counter() - started, 6),
            "tf32": _tf32(device), "threads": torch.get_num_threads(), "note": None}


def _tf32(device):
    """Whether float32 matmuls may run in TF32 here (the cell's setting, left as it is)."""
    if device.type != "cuda":
        return None
    return bool(torch.backends.cuda.matmul.allow_tf32)
