"""stats against values worked out by hand (and numpy's documented definitions)."""
from __future__ import annotations

import itertools
import math
import random

import pytest

from envbench.inference import stats


def test_median_and_quantiles():
    assert stats.median([3, 1, 2]) == 2
    assert stats.median([4, 1, 3, 2]) == 2.5
    # numpy.quantile([1, 2, 3, 4], 0.25) == 1.75 (linear interpolation)
    assert stats.quantile([1, 2, 3, 4], 0.25) == pytest.approx(1.75)
    assert stats.quantile([10, 20, 30, 40, 50], 0.9) == pytest.approx(46.0)
    assert stats.quantile([7], 0.3) == 7
    with pytest.raises(ValueError, match="^quantile of no values$"):
        stats.quantile([], 0.5)
    with pytest.raises(ValueError, match=r"^q must be within \[0, 1\], got 1.5$"):
        stats.quantile([1], 1.5)
    with pytest.raises(ValueError, match="^mean of no values$"):
        stats.mean([])


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
    with pytest.raises(ValueError, match="^bootstrap of an empty sample$"):
        stats.hierarchical_ratio_ci([[]], b)


# Bootstrap distributions small enough to work out by hand. The median of three draws with
# replacement from {1, 2, 3} is 1 with probability 7/27 (at least two 1s), 3 with 7/27, and 2
# with 13/27: its 95% interval is (1, 3), and its 40% interval (the 0.3 and 0.7 quantiles) is
# (2, 2), since 7/27 = 0.26 < 0.3 and 20/27 = 0.74 > 0.7.


def test_the_two_stage_ratio_interval_matches_its_distribution_worked_out_by_hand():
    top = [[2.0], [4.0], [6.0]]  # twice {1, 2, 3}
    assert stats.hierarchical_ratio_ci(top, [[1.0]]) == (2.0, 6.0)
    assert stats.hierarchical_ratio_ci(top, [[1.0]], confidence=0.4) == (4.0, 4.0)
    # The denominator resampled the same way: 12 over {2, 4, 6} is {6, 3, 2}.
    assert stats.hierarchical_ratio_ci([[12.0]], top) == (2.0, 6.0)
    assert stats.hierarchical_ratio_ci([[12.0]], top, confidence=0.4) == (3.0, 3.0)
    # A zero denominator draw is left out, not divided by: over two epochs {0, 1} the median
    # is 0 (1/4, dropped), 0.5 (1/2) or 1 (1/4), so 1 / it is 2 (2/3) or 1 (1/3).
    assert stats.hierarchical_ratio_ci([[1.0]], [[0.0, 1.0]]) == (1.0, 2.0)
    for empty in ([], [[]]):
        with pytest.raises(ValueError, match="^bootstrap of an empty sample$"):
            stats.hierarchical_ratio_ci(empty, [[1.0]])
        with pytest.raises(ValueError, match="^bootstrap of an empty sample$"):
            stats.hierarchical_ratio_ci([[1.0]], empty)


def test_the_pooled_ratio_interval_matches_its_distribution_worked_out_by_hand():
    assert stats.bootstrap_ratio_ci([1.0, 2.0, 3.0], [1.0]) == (1.0, 3.0)
    assert stats.bootstrap_ratio_ci([1.0, 2.0, 3.0], [1.0], confidence=0.4) == (2.0, 2.0)
    assert stats.bootstrap_ratio_ci([6.0], [1.0, 2.0, 3.0], confidence=0.4) == (3.0, 3.0)
    assert stats.bootstrap_ratio_ci([1.0], [0.0, 1.0]) == (1.0, 2.0)
    # Another statistic, where asked: the mean of two draws from {1, 3} is 1, 2 or 3 too.
    assert stats.bootstrap_ratio_ci([1.0, 3.0], [1.0], statistic=stats.mean,
                                    confidence=0.4) == (2.0, 2.0)
    for empty in (([], [1.0]), ([1.0], [])):
        with pytest.raises(ValueError, match="^bootstrap of an empty sample$"):
            stats.bootstrap_ratio_ci(*empty)


def test_the_documented_defaults_are_the_ones_used():
    """A 95% interval from 2,000 resamples with seed 0: the report promises those (and that
    identical input gives a byte-identical page)."""
    rng = random.Random(11)
    a = [[rng.uniform(9, 11) for _ in range(4)] for _ in range(4)]
    b = [[rng.uniform(4, 6) for _ in range(4)] for _ in range(4)]
    flat_a, flat_b = [x for r in a for x in r], [x for r in b for x in r]
    explicit = {"confidence": 0.95, "resamples": 2000, "seed": 0}
    assert stats.hierarchical_ratio_ci(a, b) == stats.hierarchical_ratio_ci(a, b, **explicit)
    assert stats.bootstrap_ratio_ci(flat_a, flat_b) == stats.bootstrap_ratio_ci(
        flat_a, flat_b, statistic=stats.median, **explicit)
    # And they are not whatever any other seed or count would give.
    ratio = stats.hierarchical_ratio_ci(a, b)
    assert ratio != stats.hierarchical_ratio_ci(a, b, seed=1)
    assert ratio != stats.hierarchical_ratio_ci(a, b, resamples=2001)
    assert ratio != stats.hierarchical_ratio_ci(a, b, confidence=0.9)
    pooled = stats.bootstrap_ratio_ci(flat_a, flat_b)
    assert pooled != stats.bootstrap_ratio_ci(flat_a, flat_b, seed=1)
    assert pooled != stats.bootstrap_ratio_ci(flat_a, flat_b, resamples=2001)


def test_the_edges_of_quantile_stdev_and_cv():
    assert stats.quantile([3, 1, 2], 0.0) == 1 and stats.quantile([3, 1, 2], 1.0) == 3
    assert stats.stdev([1.0, 3.0]) == pytest.approx(math.sqrt(2.0))  # two values: n - 1 = 1
    assert stats.cv([-1.0, 1.0]) == 0.0  # a zero mean has no relative spread to give


def _exact_median_distribution(values: list[float]) -> dict[float, float]:
    """Every one of the n^n equally likely draws of n with replacement, enumerated."""
    counts: dict[float, int] = {}
    for draw in itertools.product(values, repeat=len(values)):
        m = stats.median(draw)
        counts[m] = counts.get(m, 0) + 1
    total = len(values) ** len(values)
    return {m: c / total for m, c in counts.items()}


@pytest.mark.parametrize("values", [[1.0, 2.0, 4.0, 8.0, 16.0], [1.0, 2.0, 4.0, 8.0],
                                    [3.0, 1.0, 3.0, 2.0, 1.0, 5.0]])
def test_a_repeats_median_is_drawn_with_the_distribution_of_drawing_its_epochs(values):
    """The one-step draw of a resampled repeat's median (odd and even counts, ties) against
    the distribution of the median of n draws, worked out by enumerating every draw."""
    exact = _exact_median_distribution(values)
    rng = random.Random(7)
    ordered = sorted(values)
    runs = 40000
    seen: dict[float, int] = {}
    for _ in range(runs):
        m = stats._median_of_draws(ordered, rng)
        seen[m] = seen.get(m, 0) + 1
    assert set(seen) <= set(exact), set(seen) - set(exact)
    for m, p in exact.items():
        # Four standard errors of a binomial proportion at 40,000 draws.
        assert abs(seen.get(m, 0) / runs - p) <= 4 * math.sqrt(p * (1 - p) / runs) + 1e-9, m


def test_the_bootstrap_takes_fewer_resamples_where_the_repeats_are_very_many():
    rng = random.Random(1)
    many = [[1.0 + rng.random() for _ in range(3)] for _ in range(1000)]
    few = [[2.0 + rng.random() for _ in range(3)] for _ in range(5)]
    # 1,005 repeat draws a resample: 400,000 // 1,005 = 398 resamples, not 2,000.
    assert stats.hierarchical_ratio_ci(many, few) == stats.hierarchical_ratio_ci(
        many, few, resamples=398)
    assert stats.hierarchical_ratio_ci(many, few) != stats.hierarchical_ratio_ci(
        many, few, resamples=397)
    # Past the floor it takes MIN_RESAMPLES whatever the count.
    huge = many * 3
    assert stats.hierarchical_ratio_ci(huge, few) == stats.hierarchical_ratio_ci(
        huge, few, resamples=200)
    assert stats.hierarchical_ratio_ci(huge, few, resamples=5000) == \
        stats.hierarchical_ratio_ci(huge, few, resamples=200)
