"""The one test behind every verdict: Welch's t on the log of each repeat's median epoch.

The repeat is the unit: epochs of one repeat share a process, an allocator and the host's
state, so each repeat gives one figure (its median steady epoch) and the two sides' figures
are the samples. Times are compared on the log scale (a ratio is a difference of logs, and
a repeat's slowness is multiplicative), with Welch's unequal-variance t: a GPU's repeats and
a CPU's do not scatter alike, and Student's pooled t then calls identical stacks different
far more often than its level says. Its interval, exp(d ± t_crit · se), is the interval the
page prints, at the level the verdict is tested at, so the two cannot disagree. Why this
test and not another, measured: docs/method.md and perf/verdict_calibration.py.

Everything a verdict needs is here: the test, its interval at any level, the p-value of a
ratio beyond a margin (`compare`'s threshold), Holm's step-down over a page of them, the
smallest difference the test would have found, and the repeats a difference would need.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from envbench.inference import stats, tdist

ALPHA = 0.05   # the chance of a false verdict a page (or a run of `compare`) may take in all
POWER = 0.80   # what "would have seen" means: found this often at the measured noise
# Below this many clean repeats a side there is no interval: two repeats give a t with one
# degree of freedom whose interval spans a factor of ten at any real noise.
MIN_REPEATS = 3
# The most repeats a side that "how many repeats would it need" looks through.
MOST_REPEATS = 10_000


@dataclass(frozen=True)
class NoTest:
    """Why two sides could not be tested, in words the page prints."""

    reason: str
    # Fewer than MIN_REPEATS a side (the rest: no spread, bad times); the reason says it.
    too_few: bool = field(default=False, compare=False)


@dataclass(frozen=True)
class Test:
    """Welch's t test of log(a) against log(b): a's typical repeat over b's."""

    n: tuple[int, int]
    log_ratio: float            # mean log a - mean log b
    sd: tuple[float, float]     # each side's standard deviation of log repeat figures
    se: float
    df: float

    @property
    def ratio(self) -> float:
        """The ratio of the two sides' geometric means: the test's own estimate."""
        return math.exp(self.log_ratio)

    def p(self, margin: float = 0.0) -> float:
        """Two-sided p-value of the ratio lying beyond 1 ± margin (as a ratio: above
        1 + margin or below 1 / (1 + margin)): the smallest level whose interval lies
        wholly beyond it. 1.0 where the estimate itself is inside."""
        beyond = abs(self.log_ratio) - math.log1p(margin)
        if beyond <= 0:
            return 1.0
        return tdist.two_sided_p(beyond / self.se, self.df)

    def interval(self, alpha: float) -> tuple[float, float]:
        """The 1 - alpha interval of the ratio."""
        half = tdist.critical(alpha, self.df) * self.se
        return math.exp(self.log_ratio - half), math.exp(self.log_ratio + half)

    def detectable(self, alpha: float, power: float = POWER) -> float:
        """The smallest difference (a fraction: 0.12 is 12%) that this many repeats at this
        spread would have found with probability ``power`` at level ``alpha`` (the power of
        the noncentral t, envbench.inference.tdist)."""
        return math.expm1(_shift_for_power(power, alpha, self.df) * self.se)

    def repeats_for(self, difference: float, alpha: float, power: float = POWER) -> int | None:
        """Repeats a side (the same on both) that would find ``difference`` (a fraction)
        with probability ``power`` at level ``alpha``, were the spreads what they were here;
        None past MOST_REPEATS."""
        va, vb = self.sd[0] ** 2, self.sd[1] ** 2
        target = math.log1p(difference)

        def enough(n: int) -> bool:
            shift = target / math.sqrt((va + vb) / n)
            return tdist.power(shift, alpha, _welch_df(va / n, vb / n, n, n)) >= power

        if not enough(MOST_REPEATS):
            return None
        low, high = MIN_REPEATS - 1, MIN_REPEATS   # enough(high) is asked, never enough(low)
        while not enough(high):
            low, high = high, min(2 * high, MOST_REPEATS)
        while high - low > 1:                      # power grows with n: bisect
            middle = (low + high) // 2
            low, high = (low, middle) if enough(middle) else (middle, high)
        return high


# A page asks it of one comparison in its HTML and again in its Markdown.
_shift_for_power = lru_cache(maxsize=1024)(tdist.shift_for_power)


def _welch_df(va: float, vb: float, na: int, nb: int) -> float:
    """Welch–Satterthwaite degrees of freedom of two variances of means ``va``, ``vb``."""
    return (va + vb) ** 2 / (va ** 2 / (na - 1) + vb ** 2 / (nb - 1))


def _logs(figures: Sequence[float]) -> list[float] | None:
    if not all(isinstance(f, (int, float)) and math.isfinite(f) and f > 0 for f in figures):
        return None
    return [math.log(f) for f in figures]


def welch(a: Sequence[float], b: Sequence[float]) -> Test | NoTest:
    """Test a's repeat figures (one number per repeat, positive) against b's."""
    if min(len(a), len(b)) < MIN_REPEATS:
        return NoTest("too few repeats for an interval: %d and %d, %d needed a side"
                      % (len(a), len(b), MIN_REPEATS), too_few=True)
    la, lb = _logs(a), _logs(b)
    if la is None or lb is None:
        return NoTest("a repeat's time is not a positive finite number: no interval")
    sa, sb = stats.stdev(la), stats.stdev(lb)
    if sa == 0 and sb == 0:
        return NoTest("the repeats of both sides took identical times: with no spread "
                      "there is no noise to judge a difference against")
    va, vb = sa * sa / len(la), sb * sb / len(lb)
    return Test((len(la), len(lb)), stats.mean(la) - stats.mean(lb), (sa, sb),
                math.sqrt(va + vb), _welch_df(va, vb, len(la), len(lb)))


def repeat_figures(repeats: Sequence[Sequence[float]]) -> list[float]:
    """Each repeat's figure: the median of its steady epochs (a repeat without any, none)."""
    return [stats.median(epochs) for epochs in repeats if epochs]


def of_repeats(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]]) -> Test | NoTest:
    """welch() of two sides given as each repeat's steady epoch times."""
    return welch(repeat_figures(a), repeat_figures(b))


def typical_interval(figures: Sequence[float],
                     alpha: float = ALPHA) -> tuple[float, float] | None:
    """The 1 - alpha interval of one side's typical repeat (the geometric mean of its
    figures), by the one-sample t on their logs; None below MIN_REPEATS figures, or where
    they do not differ or are not all positive and finite."""
    logs = _logs(figures)
    if logs is None or len(logs) < MIN_REPEATS or stats.stdev(logs) == 0:
        return None
    half = tdist.critical(alpha, len(logs) - 1) * stats.stdev(logs) / math.sqrt(len(logs))
    centre = stats.mean(logs)
    return math.exp(centre - half), math.exp(centre + half)


def holm(pvalues: Sequence[float], alpha: float = ALPHA) -> list[float]:
    """Holm's step-down over a family: the level each hypothesis is tested at, in the order
    given, such that p < level is its rejection and the family's chance of any false
    rejection is at most alpha. Sorted by p, the i-th (from 0) is tested at alpha / (k - i)
    while every one before it was rejected; from the first that is not, all the rest are
    tested at that first one's level (none of them can be rejected there: p only grows)."""
    k = len(pvalues)
    order = sorted(range(k), key=lambda i: pvalues[i])
    levels = [0.0] * k
    stopped: float | None = None
    for rank, i in enumerate(order):
        level = alpha / (k - rank) if stopped is None else stopped
        if stopped is None and not pvalues[i] < level:
            stopped = level
        levels[i] = level
    return levels
