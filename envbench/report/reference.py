"""The classic GPU-vs-CPU write-up's figures: a reference shown beside measured rows, never as
a measurement. Its setup: LeNet on CIFAR-10, the PyTorch tutorial's pipeline, 5 epochs,
torch 1.12.1 + CUDA 11.6, an RTX 3060 (laptop) against an i7-11800H."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envbench.report.grouping import Group
from envbench.results.record import Result

GB = 10**9

STACK = {"torch": "1.12.1", "cuda": "11.6"}
HARDWARE = {"cuda": "NVIDIA GeForce RTX 3060 (laptop)", "cpu": "Intel Core i7-11800H"}

# (what, device or None for a ratio, batch size, value, unit). Units: s, x, share, bytes.
FIGURES: list[tuple[str, str | None, int | None, float, str]] = [
    ("epoch time", "cuda", 256, 23.4, "s"),
    ("epoch time", "cpu", 256, 189.7, "s"),
    ("GPU speedup over CPU", None, 256, 8.1, "x"),
    ("GPU speedup over CPU", None, 32, 5.3, "x"),
    ("data loading share of the epoch", "cuda", 256, 0.12, "share"),
    ("data loading share of the epoch", "cpu", 256, 0.09, "share"),
    ("backward share of the epoch", "cuda", 256, 0.28, "share"),
    ("backward share of the epoch", "cpu", 256, 0.63, "share"),
    ("GPU memory", "cuda", 256, 1.2 * GB, "bytes"),
    ("host memory", "cuda", 256, 0.8 * GB, "bytes"),
    ("host memory", "cpu", 256, 3.4 * GB, "bytes"),
    ("swap", "cpu", 256, 1.2 * GB, "bytes"),
]


def is_seed_stack(env: Mapping[str, Any]) -> bool:
    """Whether a measured fingerprint is the write-up's stack (a CUDA 11.6 build of 1.12.1)."""
    torch = str(env.get("torch") or "")
    return torch.split("+")[0] == STACK["torch"] and env.get("cuda") == STACK["cuda"]


def _is_write_up_setup(record: Result) -> bool:
    config = record.config
    return (config["pipeline"] == "classic" and config["amp"] == "off"
            and not config["channels_last"] and config["compile"] == "off"
            and config["accumulate"] == 1 and not record.cell.quick
            and config["workload"] == "lenet" and config["parallel"] == "none"
            and is_seed_stack(record.env))


def _text(value: float, unit: str) -> str:
    return {"s": "%.1f s", "x": "%.1f×", "share": "%.0f%%", "bytes": "%.1f GB"}[unit] % (
        value * 100 if unit == "share" else value / GB if unit == "bytes" else value)


def compare(groups: list[Any], fmt: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per write-up figure: the reference, and the seed stack's measured figure
    under the same setup where this report has it (``fmt`` formats seconds, ratios, shares
    and bytes the way the rest of the page does)."""
    seed: dict[tuple[str | None, int | None], Group] = {}
    for g in groups:
        ok = [r for r in g.ok if _is_write_up_setup(r)]
        if ok:
            seed.setdefault((g.device, g.batch_size), g)
    rows = []
    for what, device, batch, value, unit in FIGURES:
        measured, where = None, None
        if unit == "x":
            gpu, cpu = seed.get(("cuda", batch)), seed.get(("cpu", batch))
            if gpu is not None and cpu is not None and gpu.epoch_s and cpu.epoch_s:
                measured = fmt["x"](cpu.epoch_s / gpu.epoch_s)
                where = "%s over %s" % (gpu.title, cpu.title)
        else:
            g = seed.get((device, batch))
            if g is not None:
                figure = {"epoch time": g.epoch_s,
                          "data loading share of the epoch": g.share("data"),
                          "backward share of the epoch": g.share("backward"),
                          "GPU memory": g.memory("gpu_peak_reserved_bytes"),
                          "host memory": g.memory("process_rss_peak_bytes"),
                          "swap": g.memory("swap_peak_bytes")}[what]
                measured = fmt[unit](figure) if figure is not None else None
                where = g.title
        rows.append({"what": what, "device": HARDWARE[device] if device else "GPU / CPU",
                     "batch": batch, "reference": _text(value, unit), "measured": measured,
                     "measured_on": where})
    return rows


# Lambda's published ResNet-50 training throughput, images/s per GPU: "PyTorch Training GPU
# Benchmarks 2023" (NGC's PyTorch 22.10 container: torch 1.13.0a0, CUDA 11.8, NVIDIA's
# optimised ResNet-50 v1.5 with DALI data loading), https://lambdalabs.com/gpu-benchmarks.
LAMBDA_SOURCE = ("Lambda, Deep Learning GPU Benchmarks, PyTorch training 2023 (NGC PyTorch "
                 "22.10: torch 1.13, CUDA 11.8; NVIDIA's ResNet-50 v1.5 with DALI)")
LAMBDA_URL = "https://lambdalabs.com/gpu-benchmarks"
LAMBDA_RESNET50: list[tuple[str, str, int]] = [
    ("A100 80GB SXM4", "fp16", 1582),
    ("H100 80GB SXM5", "fp16", 2616),
    ("A100 80GB SXM4", "tf32", 1066),
    ("H100 80GB SXM5", "tf32", 1753),
]
# What a cell's --amp is in Lambda's words: fp16 is mixed precision; off is TF32 on an
# Ampere or newer GPU, where PyTorch runs convolutions in TF32 by default (cuDNN's
# allow_tf32), which is ResNet-50's work.
PRECISION = {"fp16": "fp16", "off": "tf32"}


def resnet50_rows(groups: list[Group]) -> list[dict[str, Any]]:
    """Lambda's figures, each with this report's resnet50 GPU cells at that precision:
    images/s per GPU (a dp or ddp cell's throughput over its devices)."""
    rows = []
    for gpu, precision, value in LAMBDA_RESNET50:
        measured = []
        for g in groups:
            if (g.workload != "resnet50" or g.device != "cuda" or g.units_per_s is None
                    or PRECISION.get(str(g.config["amp"])) != precision):
                continue
            devices = max(r.world_size for r in g.measured)
            measured.append({"group": g, "per_gpu": g.units_per_s / devices})
        rows.append({"gpu": gpu, "precision": precision, "reference": value,
                     "measured": measured})
    return rows
