"""Descriptive statistics the report uses, in one place: medians, quantiles, spread.

Plain Python (no numpy on the host): inputs are a few dozen epoch times. The verdicts'
test lives in envbench.inference.verdicts; the two bootstraps here are what verdicts stood on before
it, kept for the calibration harness (perf/verdict_calibration.py --methods), which
measures them beside it.
"""
from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence


def quantile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default, 'type 7')."""
    if not values:
        raise ValueError("quantile of no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError("q must be within [0, 1], got %r" % q)
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def median(values: Sequence[float]) -> float:
    return quantile(values, 0.5)


def mean(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("mean of no values")
    return math.fsum(values) / len(values)


def stdev(values: Sequence[float]) -> float:
    """Sample standard deviation (n - 1); 0 for a single value."""
    if len(values) < 2:
        return 0.0
    centre = mean(values)
    return math.sqrt(math.fsum((v - centre) ** 2 for v in values) / (len(values) - 1))


def cv(values: Sequence[float]) -> float:
    """Coefficient of variation: stdev / mean (0 for fewer than two values)."""
    centre = mean(values)
    return stdev(values) / centre if centre else 0.0


def bootstrap_ratio_ci(numerator: Sequence[float], denominator: Sequence[float],
                       statistic: Callable[[Sequence[float]], float] = median,
                       confidence: float = 0.95, resamples: int = 2000,
                       seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap CI of statistic(numerator) / statistic(denominator).

    Each side is resampled with replacement independently; the seed makes the report
    byte-identical for identical input.
    """
    if not numerator or not denominator:
        raise ValueError("bootstrap of an empty sample")
    rng = random.Random(seed)
    ratios = []
    for _ in range(resamples):
        top = statistic([rng.choice(numerator) for _ in numerator])
        bottom = statistic([rng.choice(denominator) for _ in denominator])
        if bottom:
            ratios.append(top / bottom)
    tail = (1.0 - confidence) / 2.0
    return quantile(ratios, tail), quantile(ratios, 1.0 - tail)


def repeat_median(repeats: Sequence[Sequence[float]]) -> float:
    """The figure of a cell: the median over repeats of each repeat's median epoch."""
    return median([median(epochs) for epochs in repeats])


# The two-stage bootstrap's work is bounded whatever it is given. A drawn repeat's
# median is drawn in one step from the order statistics of its sorted epochs, so a repeat of
# 1,000 epochs costs what one of 5 does; and where the repeats are so many that the resamples
# would pass MAX_REPEAT_DRAWS repeat draws, fewer resamples are taken (MIN_RESAMPLES at least).
MAX_REPEAT_DRAWS = 400_000
MIN_RESAMPLES = 200


def _median_of_draws(ordered: Sequence[float], rng: random.Random) -> float:
    """The median of len(ordered) draws with replacement from ``ordered`` (sorted), drawn
    exactly without drawing them: the draws are ordered[floor(n U)] for uniform U, so their
    k-th smallest is ordered[floor(n U_(k))], and U_(k) ~ Beta(k, n + 1 - k). For even n the
    next one up is U_(k) plus (1 - U_(k)) times the least of the n - k uniforms above it."""
    n = len(ordered)
    k = (n + 1) // 2
    u = rng.betavariate(k, n + 1 - k)
    low = ordered[min(int(n * u), n - 1)]
    if n % 2:
        return low
    above = u + (1.0 - u) * rng.betavariate(1, n - k)
    return (low + ordered[min(int(n * above), n - 1)]) / 2.0


def _resampled(repeats: Sequence[Sequence[float]], rng: random.Random) -> float:
    """One hierarchical draw: repeats with replacement, then epochs within each drawn repeat
    (``repeats`` each sorted)."""
    drawn = [repeats[rng.randrange(len(repeats))] for _ in repeats]
    return median([_median_of_draws(epochs, rng) for epochs in drawn])


def _bounded(resamples: int, *sides: Sequence[Sequence[float]]) -> int:
    """The resample count, cut where it would pass MAX_REPEAT_DRAWS (see above)."""
    per_resample = sum(len(side) for side in sides)
    return max(MIN_RESAMPLES, min(resamples, MAX_REPEAT_DRAWS // per_resample))


def _sorted(repeats: Sequence[Sequence[float]]) -> list[list[float]]:
    return [sorted(epochs) for epochs in repeats]


def hierarchical_ratio_ci(numerator: Sequence[Sequence[float]],
                          denominator: Sequence[Sequence[float]], confidence: float = 0.95,
                          resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap CI of repeat_median(numerator) / repeat_median(denominator).

    The repeat is the unit: epochs of one repeat share a process, an allocator and the
    host's state, so they are not independent draws, and resampling pooled epochs makes an
    interval far narrower than the repeat-to-repeat spread. Each resample draws repeats with
    replacement, then epochs within each drawn repeat (a two-stage bootstrap).
    """
    if not numerator or not denominator or not all(numerator) or not all(denominator):
        raise ValueError("bootstrap of an empty sample")
    rng = random.Random(seed)
    top, under = _sorted(numerator), _sorted(denominator)
    ratios = []
    for _ in range(_bounded(resamples, numerator, denominator)):
        bottom = _resampled(under, rng)
        if bottom:
            ratios.append(_resampled(top, rng) / bottom)
    tail = (1.0 - confidence) / 2.0
    return quantile(ratios, tail), quantile(ratios, 1.0 - tail)
