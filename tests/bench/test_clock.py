"""The phase clock's own cost, measured in the cell's process after its epochs: every result
carries the bound of what its clock can have added to an epoch (its marks times one mark's
cost), so a page can say how much of an epoch is the measurement itself."""
from __future__ import annotations

import math

from bench_helpers import run_bench

from bench import timing

LENET = ["--device", "cpu", "--synthetic", "--epochs", "2", "--batch-size", "64",
         "--pipeline", "resident", "--limit", "1024", "--limit-test", "256", "--probe", "off"]


def _check(clock, wall_s):
    assert clock["mark_s"] > 0 and math.isfinite(clock["mark_s"])
    assert clock["mark_s"] < 1e-3  # a perf_counter read and a few dict updates, not more
    assert clock["epoch_s_at_most"] == round(clock["marks_per_epoch"] * clock["mark_s"], 6)
    assert clock["epoch_s_at_most"] < wall_s


def test_each_step_is_five_marks_and_their_cost_is_bounded(tmp_path):
    code, record, out = run_bench(tmp_path, *LENET)
    assert code == 0, out
    steps = 1024 // 64
    clock = record["clock"]
    assert clock["marks_per_epoch"] == 5 * steps  # data, h2d, forward, backward, optimizer
    _check(clock, record["epochs"][-1]["wall_s"])


def test_an_epochs_last_short_accumulation_group_is_one_more_mark(tmp_path):
    code, record, out = run_bench(tmp_path, *LENET, "--accumulate", "3")
    assert code == 0, out
    steps = 1024 // 64  # 16 micro-steps: five groups of 3, then one of 1 closed at the end
    assert record["clock"]["marks_per_epoch"] == 5 * steps + 1
    _check(record["clock"], record["epochs"][-1]["wall_s"])


def test_the_cost_is_measured_not_assumed():
    few, many = timing.cost(False, 200), timing.cost(False, 20000)
    assert few > 0 and many > 0
    # The same work per mark whatever the count: within a factor, not a fixed figure.
    assert 0.05 < few / many < 20
