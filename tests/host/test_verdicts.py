"""The calibrated test behind every verdict, against independent oracles: scipy's t
distribution and Welch test, the noncentral t's power, Holm's procedure as its definition
states it, and the false-verdict rate the harness measures."""
from __future__ import annotations

import math
import random
import statistics

import pytest
import scipy.stats as scipy_stats

from envbench.inference import looks, tdist, verdicts

DFS = [0.7, 1.0, 2.0, 2.37, 4.0, 7.9, 18.0, 61.5, 400.0, 12000.0]


@pytest.mark.parametrize("df", DFS)
def test_the_t_tail_and_critical_value_are_scipys(df):
    for t in (0.0, 0.01, 0.5, 1.0, 1.96, 2.776, 4.3, 12.7, 63.7, 1e4):
        expected = 2 * scipy_stats.t.sf(t, df)
        assert tdist.two_sided_p(t, df) == pytest.approx(expected, rel=1e-9, abs=1e-300), t
        assert tdist.two_sided_p(-t, df) == tdist.two_sided_p(t, df)
        assert tdist.density(t, df) == pytest.approx(scipy_stats.t.pdf(t, df), rel=1e-10)
    for alpha in (0.9, 0.4, 0.1, 0.05, 0.0125, 0.05 / 7 / 4, 1e-4, 1e-8):
        expected = scipy_stats.t.isf(alpha / 2, df)
        assert tdist.critical(alpha, df) == pytest.approx(expected, rel=1e-9), alpha


# Welch's degrees of freedom lie between the smaller side's n - 1 and n_a + n_b - 2: with 3
# repeats a side at least 2.
@pytest.mark.parametrize("df", [2.0, 2.6, 4.0, 9.3, 40.0, 1000.0, 20000.0])
def test_the_tests_power_is_the_noncentral_ts(df):
    for alpha in (0.05, 0.0125, 1e-4):
        crit = scipy_stats.t.isf(alpha / 2, df)
        for shift in (0.0, 0.5, 2.0, 3.5, 6.0, 10.0):
            expected = scipy_stats.nct.sf(crit, df, shift) + scipy_stats.nct.sf(crit, df, -shift)
            assert tdist.power(shift, alpha, df) == pytest.approx(expected, abs=1e-7)
        shift = tdist.shift_for_power(0.8, alpha, df)
        assert scipy_stats.nct.sf(crit, df, shift) + scipy_stats.nct.sf(crit, df, -shift) == \
            pytest.approx(0.8, abs=1e-6)
    with pytest.raises(ValueError, match=r"^power must be within \(alpha, 1\)"):
        tdist.shift_for_power(0.01, 0.05, df)


def test_the_t_functions_refuse_what_has_no_answer():
    with pytest.raises(ValueError, match="^degrees of freedom must be a positive finite"):
        tdist.two_sided_p(1.0, 0.0)
    with pytest.raises(ValueError, match="^degrees of freedom must be a positive finite"):
        tdist.critical(0.05, math.inf)
    with pytest.raises(ValueError, match=r"^alpha must be within \(0, 1\), got 0$"):
        tdist.critical(0, 3.0)
    with pytest.raises(ValueError, match="^t is not a number$"):
        tdist.two_sided_p(math.nan, 3.0)
    assert tdist.two_sided_p(math.inf, 3.0) == 0.0
    assert tdist.incomplete_beta(2.0, 3.0, 0.0) == 0.0 and tdist.incomplete_beta(2, 3, 1) == 1
    with pytest.raises(ValueError, match="^x must be within"):
        tdist.incomplete_beta(2.0, 3.0, 1.5)


def _draw(rng, level, n, spread):
    return [level * math.exp(rng.gauss(0, spread)) for _ in range(n)]


def test_welchs_test_is_scipys_on_the_logs():
    rng = random.Random(3)
    for n_a, n_b, spread_a, spread_b, level in ((3, 3, 0.05, 0.05, 1.0), (3, 5, 0.01, 0.2, 1.3),
                                                (8, 4, 0.1, 0.02, 0.8), (40, 40, 0.03, 0.03, 1.02)):
        a, b = _draw(rng, level, n_a, spread_a), _draw(rng, 1.0, n_b, spread_b)
        test = verdicts.welch(a, b)
        assert isinstance(test, verdicts.Test)
        la, lb = [math.log(x) for x in a], [math.log(x) for x in b]
        oracle = scipy_stats.ttest_ind(la, lb, equal_var=False)
        assert test.p() == pytest.approx(oracle.pvalue, rel=1e-8)
        assert test.df == pytest.approx(oracle.df, rel=1e-12)
        low, high = oracle.confidence_interval(0.95)
        assert test.interval(0.05) == pytest.approx((math.exp(low), math.exp(high)), rel=1e-9)
        low, high = oracle.confidence_interval(1 - 0.004)
        assert test.interval(0.004) == pytest.approx((math.exp(low), math.exp(high)), rel=1e-9)
        assert test.ratio == pytest.approx(math.exp(statistics.fmean(la) - statistics.fmean(lb)))
        assert test.n == (n_a, n_b)


def test_the_p_of_a_ratio_beyond_a_margin_is_the_level_at_which_the_interval_leaves_it():
    test = verdicts.welch([1.10, 1.12, 1.09, 1.13], [1.0, 1.01, 0.99, 1.0])
    assert isinstance(test, verdicts.Test)
    for margin in (0.0, 0.02, 0.05, 0.08):
        p = test.p(margin)
        low, _ = test.interval(p * 1.000001)      # a hair above p: wholly beyond the margin
        assert low > 1 + margin
        low, _ = test.interval(p / 1.000001)      # a hair below: not quite
        assert low < 1 + margin
    assert test.p(0.5) == 1.0                     # the estimate itself is inside the margin
    slower = verdicts.welch([1.0, 1.01, 0.99, 1.0], [1.10, 1.12, 1.09, 1.13])
    assert isinstance(slower, verdicts.Test)
    assert slower.p(0.05) == pytest.approx(test.p(0.05), rel=1e-12)  # both directions alike


@pytest.mark.parametrize("a, b, reason", [
    ([1.0, 1.1], [1.0, 1.1, 1.2], "too few repeats for an interval: 2 and 3, 3 needed a side"),
    ([1.0], [1.0], "too few repeats for an interval: 1 and 1, 3 needed a side"),
    ([1.0, 1.0, 1.0], [2.0, 2.0, 2.0], "the repeats of both sides took identical times: with "
                                       "no spread there is no noise to judge a difference "
                                       "against"),
    ([1.0, math.nan, 1.1], [1.0, 1.1, 1.2], "a repeat's time is not a positive finite number: "
                                            "no interval"),
    ([1.0, math.inf, 1.1], [1.0, 1.1, 1.2], "a repeat's time is not a positive finite number: "
                                            "no interval"),
    ([1.0, 0.0, 1.1], [1.0, 1.1, 1.2], "a repeat's time is not a positive finite number: "
                                       "no interval"),
])
def test_what_cannot_carry_a_verdict_gets_a_sentence(a, b, reason):
    assert verdicts.welch(a, b) == verdicts.NoTest(reason)


def test_one_side_without_spread_leans_on_the_other_and_ten_thousand_repeats_are_cheap():
    test = verdicts.welch([2.0, 2.0, 2.0], [1.0, 1.1, 0.9, 1.05])
    assert isinstance(test, verdicts.Test) and test.df == pytest.approx(3.0)
    rng = random.Random(1)
    many = _draw(rng, 1.0, 10_000, 0.05)
    test = verdicts.welch(many, _draw(rng, 1.0, 10_000, 0.05))
    assert isinstance(test, verdicts.Test)
    needed = test.repeats_for(0.001, verdicts.ALPHA)
    assert needed is None or needed > 1000
    assert verdicts.typical_interval([1.0, 1.0, 1.0]) is None
    assert verdicts.typical_interval([1.0, 1.1]) is None


def test_the_typical_repeats_interval_is_the_one_sample_t_on_the_logs():
    figures = [1.34, 1.90, 2.01]   # the demo's torch 2.13 repeats, run cold
    logs = [math.log(f) for f in figures]
    low, high = scipy_stats.t.interval(0.95, 2, loc=statistics.fmean(logs),
                                       scale=statistics.stdev(logs) / math.sqrt(3))
    assert verdicts.typical_interval(figures) == pytest.approx((math.exp(low), math.exp(high)))


@pytest.mark.parametrize("n, spread", [(3, 0.05), (4, 0.02), (6, 0.1), (20, 0.05)])
def test_would_have_seen_is_found_eighty_percent_of_the_time(n, spread):
    """The stated difference, fed to the noncentral t (scipy) with the same spread, is
    found with 80% power (the shortcut of adding t's power quantile to the critical value
    said 75% at 3 repeats a side)."""
    rng = random.Random(n)
    a, b = _draw(rng, 1.0, n, spread), _draw(rng, 1.0, n, spread)
    test = verdicts.welch(a, b)
    assert isinstance(test, verdicts.Test)
    for alpha in (0.05, 0.0125):
        delta = math.log1p(test.detectable(alpha)) / test.se
        crit = scipy_stats.t.isf(alpha / 2, test.df)
        power = (scipy_stats.nct.sf(crit, test.df, delta)
                 + scipy_stats.nct.sf(crit, test.df, -delta))
        assert power == pytest.approx(0.80, abs=1e-6), (alpha, power)


def test_repeats_for_is_the_first_count_with_the_power():
    test = verdicts.welch([1.0, 1.08, 0.95, 1.02], [1.01, 0.97, 1.06, 0.99])
    assert isinstance(test, verdicts.Test)
    va, vb = test.sd[0] ** 2, test.sd[1] ** 2

    def power(n):  # the noncentral t (scipy) at Welch's df for n a side
        df = (va + vb) ** 2 / ((va ** 2 + vb ** 2) / (n - 1))
        shift = math.log(1.05) / math.sqrt((va + vb) / n)
        crit = scipy_stats.t.isf(0.025, df)
        return scipy_stats.nct.sf(crit, df, shift) + scipy_stats.nct.sf(crit, df, -shift)

    needed = test.repeats_for(0.05, 0.05)
    assert needed is not None and needed > 3
    assert power(needed - 1) < 0.8 <= power(needed)
    assert test.repeats_for(10.0, 0.05) == 3     # a tenfold difference: the minimum
    assert test.repeats_for(1e-6, 0.05) is None  # past MOST_REPEATS


def _holm_by_definition(pvalues, alpha):
    """Reject the i-th smallest while every p up to it is at most alpha / (k - rank)."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    rejected = set()
    for rank, i in enumerate(order):
        if pvalues[i] < alpha / (len(pvalues) - rank):
            rejected.add(i)
        else:
            break
    return rejected


def test_holms_levels_reject_exactly_what_holm_rejects():
    rng = random.Random(4)
    for _ in range(2000):
        k = rng.randint(1, 9)
        pvalues = [rng.choice([rng.random(), rng.random() / 100, 0.01, 0.0125]) for _ in range(k)]
        levels = verdicts.holm(pvalues, 0.05)
        assert {i for i, (p, lv) in enumerate(zip(pvalues, levels)) if p < lv} == \
            _holm_by_definition(pvalues, 0.05)
        assert all(0.05 / k <= lv <= 0.05 for lv in levels)
    # 0.001 passes 0.05 / 3; 0.03 fails 0.025, which all after it are then tested at.
    assert verdicts.holm([0.001, 0.04, 0.03], 0.05) == [0.05 / 3, 0.025, 0.025]
    assert verdicts.holm([0.001, 0.04, 0.02], 0.05) == [0.05 / 3, 0.05, 0.025]
    # The first that fails sets the level of all after it.
    assert verdicts.holm([0.001, 0.5, 0.03, 0.2], 0.05) == [0.0125, 0.05 / 3, 0.05 / 3,
                                                            0.05 / 3]
    assert verdicts.holm([], 0.05) == []


def test_the_looks_shares_sum_to_one_and_put_a_quarter_first_and_half_last():
    for most in range(3, 101):
        shares = [looks.share(look, most) for look in range(3, most + 1)]
        assert math.fsum(shares) == pytest.approx(1.0, abs=1e-12), most
        if most > 3:
            assert shares[0] == 0.25 and shares[-1] == (0.75 if most == 4 else 0.5)
    assert looks.share(3, 3) == 1.0
    assert looks.share(12, 10) == looks.share(5, 10)  # past the design: its smallest share
    assert [looks.share(look, 6) for look in (3, 4, 5, 6)] == [0.25, 0.125, 0.125, 0.5]


def test_a_comparison_in_step_spends_its_looks_share_and_any_other_pays_both():
    a = looks.Side(6, 4, run=7, point="cpu|—|")
    assert looks.share_of(a, a) == 0.125
    for other in (looks.Side(6, 4, run=8, point="cpu|—|"),    # another run
                  looks.Side(6, 5, run=7, point="cpu|—|"),    # another look
                  looks.Side(6, 4, run=7, point="gpu|—|"),    # another point (a target pair)
                  looks.Side(10, 4, run=7, point="cpu|—|")):  # another design
        assert looks.share_of(a, other) == a.share * other.share
    fixed = looks.Side(None, 3)
    assert looks.share_of(fixed, fixed) == 1.0 and looks.share_of(a, fixed) == 0.125


def _false_verdicts(n, trials, spread, rng, alpha=verdicts.ALPHA):
    wrong = 0
    for _ in range(trials):
        low, high = verdicts.welch(_draw(rng, 1.0, n, spread),   # type: ignore[union-attr]
                                   _draw(rng, 1.0, n, spread)).interval(alpha)
        wrong += not low <= 1.0 <= high
    return wrong


def _wilson_low(hits, n, z=1.959964):
    centre = (hits + z * z / 2) / (n + z * z)
    half = z * math.sqrt(hits * (n - hits) / n + z * z / 4) / (n + z * z)
    return centre - half


@pytest.mark.parametrize("n", [3, 4, 6, 8])
def test_identical_stacks_are_called_different_at_most_five_percent_of_the_time(n):
    """A/A at the default repeats and beyond, 2,000 trials each: the lower bound of the
    false-verdict rate's 95% interval must not be above 5%. (The old bootstrap fails this
    at 3 repeats: 10.5% measured, lower bound 9.2%.)"""
    trials = 2000
    wrong = _false_verdicts(n, trials, 0.05, random.Random(100 + n))
    print("A/A, %d repeats a side: %d of %d false (%.1f%%)" % (n, wrong, trials,
                                                               100 * wrong / trials))
    assert _wilson_low(wrong, trials) <= verdicts.ALPHA
