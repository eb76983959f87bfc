"""stats against values worked out by hand (and numpy's documented definitions)."""
from __future__ import annotations

import math
import random

import pytest

from envbench import stats


def test_median_and_quantiles():
    assert stats.median([3, 1, 2]) == 2
    assert stats.median([4, 1, 3, 2]) == 2.5
    # numpy.quantile([1, 2, 3, 4], 0.25) == 1.75 (linear interpolation)
    assert stats.quantile([1, 2, 3, 4], 0.25) == pytest.approx(1.75)
    assert stats.quantile([10, 20, 30, 40, 50], 0.9) == pytest.approx(46.0)
    assert stats.quantile([7], 0.3) == 7
    with pytest.raises(ValueError):
        stats.quantile([], 0.5)
    with pytest.raises(ValueError):
        stats.quantile([1], 1.5)


def test_mean_stdev_cv():
    values = [2, 4, 4, 4, 5, 5, 7, 9]
    assert stats.mean(values) == 5
    # sample variance = 32 / 7
    assert stats.stdev(values) == pytest.approx(math.sqrt(32 / 7))
    assert stats.cv(values) == pytest.approx(math.sqrt(32 / 7) / 5)
    assert stats.cv([3.0]) == 0.0 and stats.stdev([3.0]) == 0.0


def test_bootstrap_ratio_ci_brackets_the_ratio_and_is_repeatable():
    cpu = [189.0, 190.5, 188.2, 191.0, 189.9, 190.1]
    gpu = [23.1, 23.5, 23.4, 23.2, 23.6, 23.3]
    low, high = stats.bootstrap_ratio_ci(cpu, gpu)
    point = stats.median(cpu) / stats.median(gpu)
    assert low <= point <= high
    assert 7.9 < low and high < 8.3  # the write-up's 8.1x, tightly bounded by its spread
    assert stats.bootstrap_ratio_ci(cpu, gpu) == (low, high)
    assert stats.bootstrap_ratio_ci([2.0], [1.0]) == (2.0, 2.0)  # no spread, no interval


def _experiment(rng, level, repeats, epochs, repeat_sd, epoch_sd):
    """One side of a measurement: each repeat has its own level (the process, the allocator,
    the host's state), and its epochs scatter a little around it."""
    sides = []
    for _ in range(repeats):
        repeat_level = level * (1 + rng.gauss(0, repeat_sd))
        sides.append([repeat_level * (1 + rng.gauss(0, epoch_sd)) for _ in range(epochs)])
    return sides


def test_the_repeat_is_the_unit_its_interval_covers_the_true_ratio_and_pooled_epochs_do_not():
    """500 simulated comparisons of two identical stacks (true ratio 1), 4 repeats of 4 steady
    epochs a side, repeats 5% apart, epochs 1% apart within a repeat: the two-stage interval
    holds 1 close to 95% of the time; resampling pooled epochs treats 16 correlated epochs
    as independent and claims a difference far more often."""
    rng = random.Random(7)
    hierarchical = pooled = 0
    runs = 500
    for i in range(runs):
        a = _experiment(rng, 1.0, 4, 4, 0.05, 0.01)
        b = _experiment(rng, 1.0, 4, 4, 0.05, 0.01)
        low, high = stats.hierarchical_ratio_ci(a, b, resamples=400, seed=i)
        hierarchical += low <= 1.0 <= high
        low, high = stats.bootstrap_ratio_ci([x for r in a for x in r],
                                             [x for r in b for x in r], resamples=400, seed=i)
        pooled += low <= 1.0 <= high
    print("coverage of the true ratio: two-stage %.3f, pooled epochs %.3f"
          % (hierarchical / runs, pooled / runs))
    assert hierarchical / runs >= 0.88
    assert pooled / runs <= 0.80


def test_the_hierarchical_interval_is_of_the_repeat_medians_and_repeatable():
    a = [[2.0, 2.1, 1.9], [2.2, 2.2, 2.3], [1.8, 1.9, 2.0]]
    b = [[1.0, 1.0, 1.1], [1.1, 1.0, 1.0], [0.9, 1.0, 1.0]]
    # The figure: the median over repeats of each repeat's median epoch.
    assert stats.repeat_median(a) == 2.0 and stats.repeat_median(b) == 1.0
    low, high = stats.hierarchical_ratio_ci(a, b, seed=3)
    assert low < 2.0 < high and (low, high) == stats.hierarchical_ratio_ci(a, b, seed=3)
    assert min(min(r) for r in a) / max(max(r) for r in b) <= low
    with pytest.raises(ValueError):
        stats.hierarchical_ratio_ci([[]], b)
    low, high = stats.hierarchical_median_ci(a, seed=3)
    # Within the lowest and highest epochs, around the figure, repeatable.
    assert 1.8 <= low < 2.0 < high <= 2.3 and (low, high) == stats.hierarchical_median_ci(a, seed=3)
