"""Result sets shaped like the classic write-up, for report tests and for looking at the page.

24 cells: 2 environments × (RTX 3060, i7-11800H) × batch (32, 256) × 3 repeats, 5 epochs each,
plus one failed cell and, on request, an environment with a hostile name.
"""
from __future__ import annotations

import copy
import hashlib
import random
import statistics
from pathlib import Path
from typing import Any

from bench import result
from envbench.results import contract
from envbench.results.record import Result

HOSTILE = "<script>alert(1)</script>"
# The model section bench writes for the tutorial's LeNet (tests/bench/test_flops.py counts it).
LENET_MODEL = {"name": "lenet", "parameters": 62006, "flops_per_image": 1303440,
               "flops": {"forward": 1303440, "train": 3204720, "method": "flop_counter",
                         "note": None},
               "unit": "images", "units_per_sample": 1, "quality": "accuracy",
               "source": "builtin", "sha256": None, "attention": None}
# (device, label, price, epoch seconds at batch 256, at batch 32): the write-up's figures.
TARGETS = {"gpu": ("cuda", "RTX 3060", 0.35, 23.4, 60.0),
           "cpu": ("cpu", "i7-11800H", 0.10, 189.7, 318.0)}
ENVIRONMENTS = {"seed-torch1.12-cu116": ("1.12.1+cu116", "11.6", 1.0),
                "torch2.5-cu124": ("2.5.1+cu124", "12.4", 0.8)}


def make_record(env: str, target: str, batch: int, repeat: int, rng: random.Random,
                torch: str = "2.5.1", cuda: str | None = "12.4", factor: float = 1.0,
                quick: bool = False, label: str | None = None,
                device_name: str | None = None) -> dict:
    """A schema-5 result as the host would store it, with the write-up's shape of figures."""
    device, default_label, price, at256, at32 = TARGETS[target]
    base = (at256 if batch == 256 else at32) * factor
    config = {"device": device, "data": "/data", "synthetic": False, "epochs": 5,
              "batch_size": batch, "pipeline": "classic", "workers": 2, "amp": "off",
              "channels_last": False, "compile": "off", "accumulate": 1, "threads": 8,
              "seed": 0, "deterministic": True, "cudnn_benchmark": False, "lr": 0.001,
              "momentum": 0.9, "limit": None, "limit_test": None, "save_weights": None,
              "workload": "lenet", "workload_file": None, "workload_function": None,
              "workload_sha256": None, "parallel": "none", "nproc": None, "quantize_eval": "off",
              "pin_memory": "on" if device == "cuda" else "off",
              "non_blocking": "on" if device == "cuda" else "off", "profile": False,
              "probe": "off"}
    config["epochs"] = 1 if quick else 5  # what bench ran: a quick cell runs one epoch
    record = result.new_record(config)
    record["status"] = "ok"
    record["model"] = dict(LENET_MODEL)
    record["parallel"] = {"mode": "none", "world_size": 1, "backend": None,
                          "per_device_batch": batch, "global_batch": batch,
                          "threads_per_rank": 8}
    record["written_at"] = "2026-12-01T10:00:%02dZ" % repeat
    record["cell"] = {"environment": env, "target": target,
                      "target_label": default_label if label is None else label,
                      "price_per_hour": price, "repeat": repeat, "variant": {"batch_size": batch},
                      "target_accuracy": 0.5, "id": "%s-%s-%d-%d" % (env, target, batch, repeat),
                      "quick": quick,
                      "resources": {"device": device, "cpus": 8 if device == "cpu" else None,
                                    "cpuset": "0-7" if device == "cpu" else None, "threads": 8,
                                    "threads_from": "cpus" if device == "cpu" else "host",
                                    "host_cpus": 16, "memory": None, "swap": None,
                                    "gpus": "all" if device == "cuda" else None},
                      "data": {"source": "cifar10", "sha256": "ef" * 32}}
    gpu_name = device_name or "NVIDIA GeForce RTX 3060 Laptop GPU"
    record["env"] = {"python": "3.8.18" if torch.startswith("1.") else "3.12.7", "torch": torch,
                     "torchvision": "0.13.1", "cuda": cuda, "cudnn": 8302,
                     "device_name": gpu_name if device == "cuda" else
                     "11th Gen Intel(R) Core(TM) i7-11800H @ 2.30GHz",
                     "driver": "535.104.05" if device == "cuda" else None,
                     "gpu_count": 1 if device == "cuda" else 0,
                     "cpu_model": "11th Gen Intel(R) Core(TM) i7-11800H @ 2.30GHz",
                     "cpu_count": 16, "threads": 8, "bench_sha256": "ab" * 32,
                     "image": {"tag": "envbench/%s:0123" % env,
                               "id": "sha256:" + hashlib.sha256(env.encode()).hexdigest(),
                               "base": "python:3.12-slim",
                               "base_digest": "python@sha256:" + "cd" * 32}}
    epochs = []
    acc = 0.30
    count = 5000 if quick else 50000
    for epoch in range(1 if quick else 5):
        wall = base * (1.25 if epoch == 0 else 1.0) * (1 + rng.uniform(-0.02, 0.02))
        wall *= 0.1 if quick else 1.0
        acc = min(0.9, acc + 0.06)
        gpu = device == "cuda"
        share = {"data": 0.12 if gpu else 0.09, "h2d": 0.02 if gpu else 0.0,
                 "forward": 0.25 if device == "cuda" else 0.18,
                 "backward": 0.28 if device == "cuda" else 0.63, "optimizer": 0.08}
        epochs.append({"epoch": epoch, "wall_s": round(wall, 4), "samples": count,
                       "samples_per_s": round(count / wall, 3),
                       "phases_s": {k: round(v * wall, 4) for k, v in share.items()},
                       "train_loss": round(2.2 - 0.25 * epoch, 4), "test_acc": round(acc, 4),
                       "test_s": round(wall * 0.1, 4)})
    record["epochs"] = epochs
    steady = sorted(e["wall_s"] for e in (epochs[1:] or epochs))
    record["summary"] = {"epoch_s_median": statistics.median(steady),
                         "first_epoch_s": epochs[0]["wall_s"],
                         "samples_per_s": statistics.median(e["samples_per_s"]
                                                            for e in (epochs[1:] or epochs)),
                         "final_test_acc": epochs[-1]["test_acc"],
                         "weights_sha256": hashlib.sha256(("%s-%s-%d" % (env, target, batch))
                                                          .encode()).hexdigest(),
                         "forward_dtype": "float32"}
    # The clock's own cost as bench measures it: 5 marks a step, an event each on CUDA.
    marks = 5 * -(-epochs[-1]["samples"] // batch)
    mark_s = (6.5e-6 if device == "cuda" else 4e-7) * (1 + rng.uniform(-0.1, 0.1))
    record["clock"] = {"marks_per_epoch": marks, "mark_s": round(mark_s, 9),
                       "epoch_s_at_most": round(marks * mark_s, 6)}
    record["memory"] = {"process_rss_peak_bytes": int(3.4 * 2**30) if device == "cpu" else 2**31,
                        "child_rss_peak_bytes": 2**28,
                        "cgroup_peak_bytes": int(3.6 * 2**30), "swap_peak_bytes": 0,
                        "swap_peak_method": "cgroup2 memory.swap.peak",
                        "gpu_peak_allocated_bytes": int(1.2 * 2**30) if device == "cuda" else None,
                        "gpu_peak_reserved_bytes": int(1.4 * 2**30) if device == "cuda" else None}
    return record


def write_set(folder: Path, hostile: bool = False, failed: bool = True) -> list[dict]:
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(7)
    records = []
    for env, (torch, cuda, factor) in ENVIRONMENTS.items():
        for target in TARGETS:
            for batch in (32, 256):
                for repeat in range(3):
                    records.append(make_record(env, target, batch, repeat, rng, torch, cuda,
                                               factor))
    if hostile:
        records.append(make_record(HOSTILE, "cpu", 256, 0, rng))
    if failed:
        bad = result.new_record(dict(records[0]["config"], batch_size=256))
        bad["cell"] = dict(records[0]["cell"], environment="torch2.5-cu124", repeat=3,
                           variant={"batch_size": 256})
        bad["error"] = {"type": "OutOfMemory", "message": "CUDA out of memory <b>bold</b>"}
        bad["env"] = {k: None for k in result.REQUIRED["env"]}
        # The runner records the image a failed cell ran in: it is a repeat of its cell.
        bad["env"]["image"] = next(r["env"]["image"] for r in records
                                   if r["cell"]["environment"] == "torch2.5-cu124")
        bad["summary"] = dict.fromkeys(result.REQUIRED["summary"])
        bad["epochs"] = []
        bad["written_at"] = "2026-12-01T11:00:00Z"
        bad["log_tail"] = ["epoch 1/5 ...", "RuntimeError: CUDA out of memory"]
        records.append(bad)
    for i, record in enumerate(records):
        result.write_atomic(str(folder / ("%03d.json" % i)), record)
    return records


def as_cpu_cell(record: dict, environment: str, repeat: int, threads: int = 2) -> dict:
    """A result bench wrote natively (no host around it), given the cell section the host adds:
    ``environment``'s ``repeat`` on a CPU target with ``threads``, on the synthetic set."""
    record["cell"] = {
        "environment": environment, "target": "cpu", "target_label": None,
        "price_per_hour": None, "repeat": repeat, "variant": {}, "target_accuracy": None,
        "id": "%s-%d" % (environment, repeat), "quick": False,
        "resources": {"device": "cpu", "cpus": None, "cpuset": None, "threads": threads,
                      "threads_from": "host", "host_cpus": 2, "memory": None, "swap": None,
                      "gpus": None},
        "data": {"source": "synthetic", "sha256": None}}
    return record


def viewed(records: list[dict[str, Any]]) -> list[Result]:
    """Records as the report reads them: checked by the contract, then the typed view."""
    return [Result.of(contract.check(copy.deepcopy(r))) for r in records]


def refoot(record: dict) -> dict:
    """After a test sets epoch walls by hand: the figures bench derives from them made to
    agree again (the host leaves out a result whose figures contradict each other): as many
    epochs as its config ran, numbered, samples/s, phases in the same shares of the wall,
    and the summary."""
    epochs = record["epochs"]
    wanted = record["config"]["epochs"]
    while len(epochs) < wanted:
        epochs.append(copy.deepcopy(epochs[-1]))
    del epochs[wanted:]
    limit = record["config"].get("limit")
    for number, epoch in enumerate(epochs):
        wall = epoch["wall_s"]
        if limit is not None:
            epoch["samples"] = min(epoch["samples"], limit)
        total = sum(epoch["phases_s"].values()) or 1.0
        epoch["epoch"] = number
        epoch["samples_per_s"] = round(epoch["samples"] / wall, 3)
        epoch["phases_s"] = {k: round(v / total * wall * 0.97, 6)
                             for k, v in epoch["phases_s"].items()}
    steady = epochs[1:] or epochs
    record["summary"].update(
        epoch_s_median=statistics.median(e["wall_s"] for e in steady),
        first_epoch_s=epochs[0]["wall_s"],
        samples_per_s=statistics.median(e["samples_per_s"] for e in steady),
        final_test_acc=epochs[-1]["test_acc"])
    return record
