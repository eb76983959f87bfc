"""The probes: the best matrix-multiply and convolution rates this device reaches here, in the
cell's own dtype, threads and process, measured after the timed epochs.

Their best is the "achievable" ceiling the page sets a cell's achieved FLOP/s against: a
workload that reaches 60% of it is compute-bound and well fed; LeNet's fraction of a percent on
a GPU says the time goes to kernel launches and data, not to arithmetic. Two kernels, because
a stack's libraries can differ by kind: Debian's torch 1.13 multiplies matrices through a
generic BLAS (4 GFLOP/s on a CPU where PyPI's torch reaches 300) while its convolutions run
through oneDNN, so a matmul ceiling alone put a convolutional cell at 329% of it.

Each probe doubles its size until one call takes long enough to be timed well or its largest
size is reached; at each size the best of a few timed bursts counts (the least disturbed one).
"""
from __future__ import annotations

from time import perf_counter

import torch
from torch.nn import functional

from bench.messages import first_line

DTYPES = {"off": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
# Matmul sizes: n x n times n x n. A GPU needs large ones to fill its SMs; two CPU cores are
# near their best by 1024 and 2048 costs 17 GFLOP a multiply.
SIZES = {"cpu": (256, 512, 1024, 2048), "cuda": (1024, 2048, 4096, 8192)}
# Convolution sizes: channels in and out of a 3x3 convolution (padding 1) over a batch of
# feature maps, a ResNet stage's shape: 0.5 to 7 GFLOP a call on a CPU, 15 to 970 on a GPU.
CONV_SIZES = {"cpu": (64, 128, 256), "cuda": (64, 128, 256, 512)}
CONV_MAPS = {"cpu": (8, 28), "cuda": (64, 56)}  # batch, height = width
BURST_S = 0.05      # aim for bursts this long, so the clock's resolution does not matter
BURSTS = 3
# Seconds each probe may take (the matmul's as before the convolution probe joined it).
BUDGET_S = {"matmul": {"cpu": 1.5, "cuda": 3.0}, "conv": {"cpu": 1.0, "cuda": 2.0}}
# How much more the next size costs than this one: n doubles (8x), channels double (4x).
GROWTH = {"matmul": 8, "conv": 4}


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _burst(call, count, device):
    _sync(device)
    started = perf_counter()
    for _ in range(count):
        call()
    _sync(device)
    return perf_counter() - started


def _matmul(n, device, dtype, generator):
    """A call doing one n x n matmul, and its FLOPs."""
    a = torch.randn(n, n, device=device, dtype=dtype, generator=generator)
    b = torch.randn(n, n, device=device, dtype=dtype, generator=generator)
    out = torch.empty(n, n, device=device, dtype=dtype)
    return (lambda: torch.mm(a, b, out=out)), 2.0 * n ** 3


def _conv(channels, device, dtype, generator):
    """A call doing one 3x3 convolution of ``channels`` in and out, and its FLOPs."""
    batch, side = CONV_MAPS[device.type]
    x = torch.randn(batch, channels, side, side, device=device, dtype=dtype, generator=generator)
    w = torch.randn(channels, channels, 3, 3, device=device, dtype=dtype, generator=generator)
    return (lambda: functional.conv2d(x, w, padding=1)), \
        2.0 * batch * channels * channels * 9 * side * side


def _best(kernel, sizes, device, dtype, budget, growth):
    """(best rate, size) over ``sizes``, and the sizes tried, within ``budget`` seconds (the
    next size costing ``growth`` times this one)."""
    started = perf_counter()
    best = None
    tried = []
    generator = torch.Generator(device=device).manual_seed(0)
    for size in sizes:
        call, flops = kernel(size, device, dtype, generator)
        once = _burst(call, 1, device)  # also the warm-up (library init, autotuning)
        once = min(once, _burst(call, 1, device))
        count = max(1, min(1000, int(BURST_S / max(once, 1e-7))))
        seconds = min(_burst(call, count, device) for _ in range(BURSTS))
        rate = flops * count / seconds
        tried.append(size)
        if best is None or rate > best[0]:
            best = (rate, size)
        del call
        # Stop where the next size would overrun the budget.
        if perf_counter() - started + growth * once * (count * BURSTS + 2) > budget:
            break
    return best, tried


def _failed(kind, dtype, exc):
    return "the probe's %s %s failed: %s" % (str(dtype).replace("torch.", ""), kind,
                                              first_line(exc))


def measure(device, amp):
    """The probe section of the record: dtype, the best rate (FLOP/s) of either kernel and
    which kernel and size it came at, and each kernel's own best."""
    dtype = DTYPES[amp]
    started = perf_counter()
    rates = {}
    tried = []
    n = None
    notes = []
    for kind, kernel, sizes in (("matmul", _matmul, SIZES), ("conv", _conv, CONV_SIZES)):
        try:
            best, sizes_tried = _best(kernel, sizes[device.type], device, dtype,
                                      BUDGET_S[kind][device.type], GROWTH[kind])
        except RuntimeError as exc:  # a dtype this device's torch cannot run this kernel in
            notes.append(_failed(kind, dtype, exc))
            rates[kind] = None
            continue
        rates[kind] = round(best[0], 1)
        if kind == "matmul":
            tried, n = sizes_tried, best[1]
    found = [(rate, kind) for kind, rate in rates.items() if rate]
    rate, kind = max(found) if found else (None, None)
    return {"dtype": str(dtype).replace("torch.", ""), "flops_per_s": rate, "kind": kind,
            "n": n, "sizes": tried, "matmul_flops_per_s": rates.get("matmul"),
            "conv_flops_per_s": rates.get("conv"), "seconds": round(perf_counter() - started, 6),
            "tf32": _tf32(device), "threads": torch.get_num_threads(),
            "note": "; ".join(notes)[:400] or None}


def _tf32(device):
    """Whether float32 matmuls may run in TF32 here (the cell's setting, left as it is)."""
    if device.type != "cuda":
        return None
    return bool(torch.backends.cuda.matmul.allow_tf32)
