"""The operator profile and the matmul probe, as bench runs them after the timed epochs.

Run on the host's torch and on Debian's torch 1.13 (whose profiler has no kineto and writes
the legacy trace): both must give the same record and a trace in the same shape.
"""
from __future__ import annotations

import gzip
import json
import math
import os

import pytest
from bench_helpers import run_bench

LENET = ["--device", "cpu", "--synthetic", "--epochs", "2", "--batch-size", "64",
         "--pipeline", "resident", "--limit", "1024", "--limit-test", "256",
         "--deterministic"]
OTHER = "(other operators)"


def _trace_events(path):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        trace = json.load(f)
    assert isinstance(trace, dict)  # always the object form, whatever the torch wrote
    return trace["traceEvents"]


def test_a_profiled_cell_has_its_top_operators_a_share_column_that_adds_up_and_a_trace(tmp_path):
    code, record, out = run_bench(tmp_path, *LENET, "--profile")
    assert code == 0, out
    assert record["config"]["profile"] is True
    profile = record["profile"]
    ops = profile["operators"]
    assert len(ops) >= 5 and profile["note"] is None and profile["ranked_by"] == "self_cpu"
    # Each share is the operator's self time over the window's total, and they add up to 1
    # with the "other" row (rounding to 6 places, per row).
    assert sum(o["share"] for o in ops) == pytest.approx(1.0, abs=1e-4)
    for o in ops:
        assert o["share"] == pytest.approx(o["self_cpu_s"] / profile["total_s"], abs=2e-4)
    assert [o["self_cpu_s"] for o in ops if o["name"] != OTHER] == sorted(
        (o["self_cpu_s"] for o in ops if o["name"] != OTHER), reverse=True)
    assert profile["steps"] >= 3 and profile["samples"] == 64 * profile["steps"]
    names = {o["name"] for o in ops}
    assert any("conv" in n for n in names), names  # LeNet's time is in its convolutions
    # The trace lies beside the result, named after it, and json reads it.
    assert profile["trace"] == "result.trace.json.gz"
    path = tmp_path / profile["trace"]
    assert path.stat().st_size == profile["trace_bytes"]
    events = {e.get("name") for e in _trace_events(path)}
    assert "aten::conv2d" in events and ({"aten::addmm", "aten::linear"} & events)
    assert not [p for p in os.listdir(str(tmp_path)) if p.endswith(".tmp")]


def test_a_gpt_profile_shows_its_matmuls(tmp_path):
    code, record, out = run_bench(
        tmp_path, "--device", "cpu", "--synthetic", "--epochs", "1", "--batch-size", "8",
        "--pipeline", "resident", "--workload", "gpt-tiny", "--limit", "32", "--limit-test",
        "8", "--profile", "--probe", "off")
    assert code == 0, out
    events = {e.get("name") for e in _trace_events(tmp_path / record["profile"]["trace"])}
    assert events & {"aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::linear"}
    assert record["probe"] is None


def test_profiling_and_the_probe_change_nothing_the_timed_run_measured(tmp_path):
    """They run after the epochs, the memory snapshot and the weights' digest: the same
    seeded, deterministic run trains to the same weights and losses with or without them."""
    plain = run_bench(tmp_path, *LENET, "--probe", "off", name="plain.json")[1]
    profiled = run_bench(tmp_path, *LENET, "--profile", name="profiled.json")[1]
    assert plain["profile"] is None and plain["probe"] is None
    assert profiled["summary"]["weights_sha256"] == plain["summary"]["weights_sha256"]
    assert [e["train_loss"] for e in profiled["epochs"]] == [e["train_loss"]
                                                              for e in plain["epochs"]]
    assert [e["test_acc"] for e in profiled["epochs"]] == [e["test_acc"]
                                                            for e in plain["epochs"]]


def test_the_probe_measures_a_positive_finite_rate_in_the_cells_dtype(tmp_path):
    record = run_bench(tmp_path, *LENET)[1]
    probe = record["probe"]
    assert record["config"]["probe"] == "on" and probe["note"] is None
    assert probe["dtype"] == "float32" and probe["tf32"] is None
    assert math.isfinite(probe["flops_per_s"]) and probe["flops_per_s"] > 1e8
    assert probe["n"] in probe["sizes"] and probe["threads"] >= 1


def test_the_probe_runs_in_bf16_under_amp_bf16(tmp_path):
    code, record, out = run_bench(tmp_path, *LENET, "--amp", "bf16")
    if code != 0 and "not supported" in record["error"]["message"]:
        pytest.skip("this torch has no CPU bf16 autocast: %s" % record["error"]["message"])
    assert code == 0, out
    assert record["probe"]["dtype"] == "bfloat16"
    assert record["probe"]["flops_per_s"] > 0


def test_a_window_is_whole_accumulation_groups(tmp_path):
    code, record, out = run_bench(tmp_path, *LENET, "--accumulate", "3", "--profile",
                                  "--probe", "off")
    assert code == 0, out
    assert record["profile"]["steps"] % 3 == 0 and record["profile"]["warmup_steps"] % 3 == 0


def test_the_window_lasts_about_its_target_from_three_steps_to_fifty(tmp_path):
    import time

    import torch

    from bench import profiling

    def batches():
        while True:
            yield torch.ones(4, 8), torch.zeros(4)

    def steps_of(pause):
        def step(images, labels, index):
            torch.mm(images, images.t())
            time.sleep(pause)
        return profiling.window(step, batches(), torch.device("cpu"), None)

    slow, fast = steps_of(0.2), steps_of(0.0)
    assert slow["steps"] == profiling.MIN_WINDOW_STEPS and slow["window_s"] >= 0.6
    assert fast["steps"] == profiling.MAX_WINDOW_STEPS  # a step of microseconds
    assert fast["trace"] is None and fast["samples"] == 4 * fast["steps"]
    # Whole accumulation groups of 4 micro-steps, and a fixed count where ranks must agree.
    grouped = profiling.window(lambda *a: time.sleep(0.2), batches(), torch.device("cpu"),
                               None, group=4)
    assert grouped["steps"] == 4 and grouped["warmup_steps"] == 4
    fixed = profiling.window(lambda *a: None, batches(), torch.device("cpu"), None, adapt=False)
    assert fixed["steps"] == profiling.WINDOW_STEPS


NAMED_RANGE = '''
import torch
from torch import nn


class Labelled(nn.Module):
    """Its forward in a record_function range whose name holds a newline (Debian's torch
    1.13 writes it raw into the trace, which strict JSON refuses)."""

    def __init__(self):
        super().__init__()
        self.net = nn.Linear(12, 4)

    def forward(self, x):
        with torch.autograd.profiler.record_function("forward\\nof the model"):
            return self.net(x)


def build(ctx):
    g = torch.Generator().manual_seed(ctx.seed)
    x = torch.randn(256, 12, generator=g)
    y = torch.randint(0, 4, (256,), generator=g)
    return {"model": Labelled(), "train": (x, y), "test": (x[:64], y[:64])}
'''


def test_a_range_name_with_a_newline_loses_neither_the_operators_nor_the_trace(tmp_path):
    path = os.path.join(str(tmp_path), "labelled.py")
    with open(path, "w") as f:
        f.write(NAMED_RANGE)
    code, record, out = run_bench(tmp_path, "--device", "cpu", "--synthetic", "--epochs", "1",
                                  "--batch-size", "32", "--pipeline", "resident", "--workload",
                                  "mine", "--workload-file", path, "--profile")
    assert code == 0, out
    profile = record["profile"]
    names = [o["name"] for o in profile["operators"]]
    assert "forward\nof the model" in names, names
    assert profile["note"] is None and profile["trace"], profile
    events = _trace_events(os.path.join(str(tmp_path), profile["trace"]))
    # Kineto drops the newline from the trace; torch 1.13 keeps it raw.
    assert any("".join(str(e.get("name")).split()) == "forwardofthemodel" for e in events)
