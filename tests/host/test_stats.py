"""stats against values worked out by hand (and numpy's documented definitions)."""
from __future__ import annotations

import math

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
