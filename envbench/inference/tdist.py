"""Student's t distribution in plain Python (the host has no scipy): tail areas and critical
values for any positive degrees of freedom, fractional ones included (Welch's test has them).

The tail area is the regularized incomplete beta function, P(|T| > t) = I_x(df/2, 1/2) with
x = df / (df + t^2), evaluated by its continued fraction (Lentz's method, as in Numerical
Recipes' betacf); the critical value inverts it by Newton's method inside a bisection
bracket, so it cannot wander off where the density is flat. The power of the two-sided test
(the noncentral t's tail) is an average over the chi-square in the statistic's denominator,
integrated numerically: the shortcut of adding a power quantile of t to the critical value
overstates the power by several percent at 2 to 4 degrees of freedom.
"""
from __future__ import annotations

import math
from functools import lru_cache

_TINY = 1e-300
_EPS = 1e-15
_MAX_TERMS = 500


def _continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b), converging fast for x < (a + 1) / (a + b + 2)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, _MAX_TERMS + 1):
        m2 = 2 * m
        for numerator in (m * (b - m) * x / ((qam + m2) * (a + m2)),
                          -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + numerator / c
            c = c if abs(c) > _TINY else _TINY
            h *= d * c
        if abs(d * c - 1.0) < _EPS:
            break
    return h


def incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), for a, b > 0 and 0 <= x <= 1."""
    if not 0.0 <= x <= 1.0:
        raise ValueError("x must be within [0, 1], got %r" % x)
    if x in (0.0, 1.0):
        return x
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                 + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _continued_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _continued_fraction(b, a, 1.0 - x) / b


def _check_df(df: float) -> None:
    if not df > 0 or math.isinf(df):
        raise ValueError("degrees of freedom must be a positive finite number, got %r" % df)


def two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for T with ``df`` degrees of freedom."""
    _check_df(df)
    if math.isnan(t):
        raise ValueError("t is not a number")
    if math.isinf(t):
        return 0.0
    return incomplete_beta(df / 2.0, 0.5, df / (df + t * t))


def density(t: float, df: float) -> float:
    _check_df(df)
    log_c = (math.lgamma((df + 1.0) / 2.0) - math.lgamma(df / 2.0)
             - 0.5 * math.log(df * math.pi))
    return math.exp(log_c - (df + 1.0) / 2.0 * math.log1p(t * t / df))


def critical(alpha: float, df: float) -> float:
    """The t >= 0 with P(|T| >= t) = alpha: a two-sided test at level alpha rejects beyond
    it, and estimate ± critical * se is the 1 - alpha interval. (critical(2p, df) is the
    one-sided 1 - p quantile.)"""
    _check_df(df)
    if not 0.0 < alpha < 1.0:
        raise ValueError("alpha must be within (0, 1), got %r" % alpha)
    low, high = 0.0, 1.0
    while two_sided_p(high, df) > alpha:
        low, high = high, high * 2.0
        if high > 1e300:
            return math.inf  # alpha below what a float can tell apart from 0
    t = (low + high) / 2.0
    for _ in range(200):
        excess = two_sided_p(t, df) - alpha   # falls as t grows
        if excess == 0.0:
            return t
        if excess > 0:
            low = t
        else:
            high = t
        slope = 2.0 * density(t, df)          # -d/dt of the two-sided tail
        step = t + excess / slope if slope > 0 else math.nan
        if not low < step < high:
            step = (low + high) / 2.0           # Newton left the bracket: bisect instead
        if abs(step - t) <= 1e-15 * step or high - low <= 1e-15 * high:
            return step
        t = step
    return t


def _normal_tail(z: float) -> float:
    """P(Z > z) for a standard normal Z."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))


# The chi-square average is a sum over a grid of y = log(V / 2) (the trapezoid rule, which
# converges fast on a smooth integrand that vanishes at both ends), from where its left tail
# (exponential, rate k) is below e^-30 to where its right tail (doubly exponential) is. The
# grid takes GRID_STEPS steps a standard deviation of y, and halves its step until the
# normal tail's own turn (about 2 / max(shift, critical) wide in y) spans TURN_STEPS steps:
# at 2 degrees of freedom and a level of 1e-4 the turn is a hundredth of y's spread.
GRID_STEPS = 10
TURN_STEPS = 8
# A bound on one grid's cost (about 0.1 s a power): reached only below 2 degrees of freedom,
# which Welch's test never has with 3 repeats a side.
MOST_POINTS = 200_000


def _y_spread(k: float) -> float:
    """The standard deviation of log(X) for X ~ Gamma(k), near enough for a grid."""
    return math.sqrt(1.0 / k + 1.0 / (2.0 * k * k))


@lru_cache(maxsize=256)
def _chi_grid(df: float, halvings: int) -> tuple[tuple[float, float], ...]:
    """(weight, sqrt(V / df)) pairs averaging over V ~ chi-square(df): with V = 2 e^y, the
    density of y is exp(k y - e^y) / Gamma(k) for k = df / 2."""
    k = df / 2.0
    low = min(math.log(k) - 12.0 * _y_spread(k), -30.0 / k)
    high = math.log(k + 12.0 * math.sqrt(k) + 40.0)
    step = _y_spread(k) / GRID_STEPS / 2 ** halvings
    steps = max(200, min(MOST_POINTS, math.ceil((high - low) / step)))
    step = (high - low) / steps
    points = []
    for i in range(steps + 1):
        y = low + i * step
        weight = math.exp(k * y - math.exp(y) - math.lgamma(k)) * step
        if i in (0, steps):
            weight /= 2.0
        points.append((weight, math.sqrt(2.0 * math.exp(y) / df)))
    total = math.fsum(w for w, _ in points)
    return tuple((w / total, s) for w, s in points)


def power(shift: float, alpha: float, df: float) -> float:
    """The chance that a two-sided t test at level ``alpha`` rejects when the true
    difference is ``shift`` standard errors: P(|T'| > critical) for T' = (Z + shift) /
    sqrt(V / df), the noncentral t."""
    c = critical(alpha, df)
    turn = 2.0 / max(abs(shift), c, 1.0)
    coarse = _y_spread(df / 2.0) / GRID_STEPS
    halvings = max(0, math.ceil(math.log2(coarse * TURN_STEPS / turn)))
    return math.fsum(w * (_normal_tail(c * s - shift) + _normal_tail(c * s + shift))
                     for w, s in _chi_grid(df, halvings))


def shift_for_power(wanted: float, alpha: float, df: float) -> float:
    """How many standard errors a difference must be for the test to find it with
    probability ``wanted``: the inverse of power() in its shift, by bisection."""
    if not alpha < wanted < 1.0:
        raise ValueError("power must be within (alpha, 1), got %r" % wanted)
    low, high = 0.0, critical(alpha, df) + 4.0
    while power(high, alpha, df) < wanted:
        low, high = high, 2.0 * high
    while high - low > 1e-9 * high:
        middle = (low + high) / 2.0
        low, high = (middle, high) if power(middle, alpha, df) < wanted else (low, middle)
    return (low + high) / 2.0
