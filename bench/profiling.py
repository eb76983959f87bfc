"""The operator profile: a short torch.profiler window of train steps after the timed epochs.

It answers *why* an epoch takes what it takes: which operators the time goes to, and (across
two stacks) which of them moved. It runs after every timed figure is taken (epochs, memory,
summary, weights digest), so profiling a cell cannot change its headline; the steps it runs
are the loop's own step function, on the same model, data and options.

The record keeps the top operators by self time (CPU time on CPU, device time on CUDA) and
their share of the window's total, plus one "other" row, so the shares add up to 1. The full
Chrome trace is written gzipped beside the result (Perfetto and chrome://tracing open it).
"""
from __future__ import annotations

import gzip
import json
import os
from time import perf_counter

import torch

from bench import interrupts
from bench.batches import rows
from bench.messages import first_line

# Steps before the window (caches, autotuning, a compiled graph's first calls) and in it:
# as many as last about WINDOW_TARGET_S (a 5 ms LeNet step alone would give a window too
# short to rank well), from MIN_WINDOW_STEPS (a 2 s ResNet step on two CPU cores: three are
# plenty for a loop that does the same work each step) to MAX_WINDOW_STEPS. Under ddp every
# rank must run as many as rank 0 without being told: WINDOW_STEPS, fixed.
WARMUP_STEPS = 2
WINDOW_STEPS = 5
MIN_WINDOW_STEPS = 3
MAX_WINDOW_STEPS = 50
WINDOW_TARGET_S = 0.3
TOP = 15
OTHER = "(other operators)"


def _activities(cuda):
    """The profiler's activities for this device, and a note where the torch lacks one."""
    supported = torch.profiler.supported_activities()
    wanted = [torch.profiler.ProfilerActivity.CPU]
    note = None
    if cuda:
        if torch.profiler.ProfilerActivity.CUDA in supported:
            wanted.append(torch.profiler.ProfilerActivity.CUDA)
        else:
            note = ("this torch's profiler records no CUDA activity (built without kineto): "
                    "operators are ranked by CPU time")
    return wanted, note


def _self_device_s(average):
    """An operator's self time on the GPU: named self_device_time_total from torch 2.4 on,
    self_cuda_time_total before."""
    value = getattr(average, "self_device_time_total", None)
    if value is None:
        value = getattr(average, "self_cuda_time_total", 0)
    return (value or 0) / 1e6


def _is_cpu_side(average):
    """Operators and annotations, not the kernels themselves: a kernel's time is already its
    operator's self device time, and counting both would count it twice."""
    kind = getattr(average, "device_type", None)
    return kind is None or str(kind).endswith("CPU")


def operators(averages, by_device):
    """Top operators and the rest, from the profiler's key averages: name, calls, self CPU
    and device seconds, and the share of the window's total of the ranking time."""
    rows = []
    for average in averages:
        if not _is_cpu_side(average):
            continue
        rows.append({"name": average.key[:200], "calls": int(average.count),
                     "self_cpu_s": average.self_cpu_time_total / 1e6,
                     "self_device_s": _self_device_s(average) if by_device else None})
    key = "self_device_s" if by_device else "self_cpu_s"
    total = sum(row[key] for row in rows)
    rows.sort(key=lambda row: (-row[key], row["name"]))
    top, rest = rows[:TOP], rows[TOP:]
    if rest:
        top.append({"name": OTHER, "calls": sum(r["calls"] for r in rest),
                    "self_cpu_s": sum(r["self_cpu_s"] for r in rest),
                    "self_device_s": sum(r["self_device_s"] for r in rest) if by_device else None})
    for row in top:
        row["share"] = round(row[key] / total, 6) if total > 0 else None
        row["self_cpu_s"] = round(row["self_cpu_s"], 6)
        if by_device:
            row["self_device_s"] = round(row["self_device_s"], 6)
    return top, total


def _write_trace(prof, path):
    """The Chrome trace, gzipped, always as {"traceEvents": [...]} (torch's legacy profiler
    writes a bare list; both viewers read the object form)."""
    raw = path + ".tmp.json"
    prof.export_chrome_trace(raw)
    try:
        # strict=False: torch 1.13 writes a record_function name's newline raw into the
        # trace, which strict JSON refuses (and the whole profile was lost to it).
        with open(raw, encoding="utf-8", errors="replace") as f:
            trace = json.load(f, strict=False)
    finally:
        os.unlink(raw)
    if isinstance(trace, list):
        trace = {"traceEvents": trace}
    tmp = path + ".tmp"
    with gzip.open(tmp, "wt", encoding="utf-8") as f:
        json.dump(trace, f)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    return os.path.getsize(path)


def _counts(group):
    """Warm-up and window steps, each whole accumulation groups of ``group`` micro-steps."""
    def whole(steps):
        return group * -(-steps // group)
    return whole(WARMUP_STEPS), whole(WINDOW_STEPS)


def window(step, batches, device, trace_file, group=1, adapt=True):
    """Run the warm-up steps, then the window's under the profiler: ``step(inputs, targets,
    index)`` on what ``batches`` yields. Returns the profile section of the record.
    ``adapt`` False keeps the fixed step counts that other ddp ranks follow."""
    cuda = device.type == "cuda"
    activities, note = _activities(cuda)
    warmup, steps = _counts(group)
    started = perf_counter()
    for index in range(warmup):
        interrupts.check()
        step(*next(batches), index)
    if cuda:
        torch.cuda.synchronize(device)
    # The warm-up's steps are the slowest (first calls): the estimate errs to fewer steps.
    if adapt:
        per_step = (perf_counter() - started) / warmup
        wanted = min(MAX_WINDOW_STEPS,
                     max(MIN_WINDOW_STEPS, int(WINDOW_TARGET_S / max(per_step, 1e-6)) + 1))
        steps = group * -(-wanted // group)
    samples = 0
    with torch.profiler.profile(activities=activities) as prof:
        started = perf_counter()
        for index in range(steps):
            interrupts.check()
            inputs, targets = next(batches)
            step(inputs, targets, warmup + index)
            samples += rows(inputs)
        if cuda:
            torch.cuda.synchronize(device)
        window_s = perf_counter() - started
    by_device = cuda and note is None
    top, total = operators(prof.key_averages(), by_device)
    trace_bytes = None
    if trace_file:
        try:
            trace_bytes = _write_trace(prof, trace_file)
        except (ValueError, OSError) as exc:  # the ranked operators are kept either way
            note = "; ".join(x for x in (note, "the trace could not be written: %s"
                                         % first_line(exc, 200)) if x)
            trace_file = None
    return {
        "steps": steps, "warmup_steps": warmup, "samples": samples,
        "window_s": round(window_s, 6), "ranked_by": "self_device" if by_device else "self_cpu",
        "total_s": round(total, 6), "operators": top,
        "trace": trace_file,
        "trace_bytes": trace_bytes, "note": note,
    }


def failed(exc):
    """The profile section of a window that raised: no operators, and why."""
    first = first_line(exc)
    return {"steps": None, "warmup_steps": None, "samples": None, "window_s": None,
            "ranked_by": None, "total_s": None, "operators": [], "trace": None,
            "trace_bytes": None,
            "note": ("the profile window failed: %s: %s" % (type(exc).__name__, first))[:400]}


def cycle(pipeline, first_epoch):
    """The pipeline's train batches without end: the window may want more steps than a small
    (--limit) epoch has. Each pass is a new epoch's order."""
    epoch = first_epoch
    while True:
        for batch in pipeline.train_batches(epoch):
            yield batch
        epoch += 1


def follow(step, batches, group=1):
    """What another ddp rank does during rank 0's window: the same steps, unprofiled (each
    step's gradient all-reduce needs every rank)."""
    for index in range(sum(_counts(group))):
        step(*next(batches), index)
