"""The statistics the report uses, in one place: medians, quantiles, spread, bootstrap CIs.

Plain Python (no numpy on the host): inputs are a few dozen epoch times.
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


def _resampled(repeats: Sequence[Sequence[float]], rng: random.Random) -> float:
    """One hierarchical draw: repeats with replacement, then epochs within each drawn repeat."""
    drawn = [repeats[rng.randrange(len(repeats))] for _ in repeats]
    return median([median([epochs[rng.randrange(len(epochs))] for _ in epochs])
                   for epochs in drawn])


def hierarchical_median_ci(repeats: Sequence[Sequence[float]], confidence: float = 0.95,
                           resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap CI of repeat_median(repeats), drawn the same two-stage way as
    hierarchical_ratio_ci: repeats with replacement, then epochs within each."""
    if not repeats or not all(repeats):
        raise ValueError("bootstrap of an empty sample")
    rng = random.Random(seed)
    draws = [_resampled(repeats, rng) for _ in range(resamples)]
    tail = (1.0 - confidence) / 2.0
    return quantile(draws, tail), quantile(draws, 1.0 - tail)


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
    ratios = []
    for _ in range(resamples):
        bottom = _resampled(denominator, rng)
        if bottom:
            ratios.append(_resampled(numerator, rng) / bottom)
    tail = (1.0 - confidence) / 2.0
    return quantile(ratios, tail), quantile(ratios, 1.0 - tail)
