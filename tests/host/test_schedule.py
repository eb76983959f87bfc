"""The order cells run in, and how many repeats each measurement gets."""
from __future__ import annotations

import random

from test_matrix import GOOD

from bench.summary import steady
from envbench.cells import decide, expansion, schedule
from envbench.inference import verdicts
from envbench.matrix import models


def _cells():
    m = models.parse(GOOD)
    return expansion.expand(m)


def test_interleaved_rounds_hold_one_repeat_of_every_measurement_in_a_seeded_order():
    cells = _cells()
    rounds = schedule.rounds(cells, "interleaved", seed=11)
    measurements = {decide.measurement(c) for c in cells}
    assert len(rounds) == max(c.repeat for c in cells) + 1
    for number, slots in enumerate(rounds):
        assert {s.cell.repeat for s in slots} == {number}
        assert {decide.measurement(s.cell) for s in slots} == measurements
        assert [s.position for s in slots] == list(range(len(slots)))
    # The same seed replays the same order; another seed shuffles otherwise.
    again = schedule.rounds(cells, "interleaved", seed=11)
    assert [[s.cell for s in r] for r in again] == [[s.cell for s in r] for r in rounds]
    other = schedule.rounds(cells, "interleaved", seed=12)
    assert [[s.cell for s in r] for r in other] != [[s.cell for s in r] for r in rounds]
    # Shuffled, not the matrix's order: every environment's cells are not in one block.
    first = [s.cell.environment for s in rounds[0]]
    assert first != sorted(first, key=[c.environment for c in cells].index)


def test_grouped_keeps_every_repeat_of_a_measurement_together():
    cells = _cells()
    (slots,) = schedule.rounds(cells, "grouped", seed=0)
    assert [s.cell for s in slots] == cells
    assert [s.round for s in slots] == [c.repeat for c in cells]


def _record(walls, contended=False, status="ok"):
    return {"status": status, "epochs": [{"wall_s": w} for w in walls],
            "noise": {"contended": contended, "reasons": []}}


def _side(rng, level, repeats, spread=0.02):
    return [_record([level * (1 + rng.gauss(0, spread)) for _ in range(4)])
            for _ in range(repeats)]


A = ("a", "cpu", "—", False)
B = ("b", "cpu", "—", False)


def test_fixed_repeats_add_one_rerun_per_contended_repeat():
    policy = decide.Policy(repeats=3, max_repeats=10, precision=0.03)
    rng = random.Random(1)
    done = {A: _side(rng, 1.0, 3), B: _side(rng, 1.0, 2) + [_record([1.0] * 4, True)]}
    assert decide.wanted(policy, done) == {A: 3, B: 4}
    # The re-run itself ran contended: it is not re-run again.
    done[B].append(_record([1.0] * 4, True))
    assert decide.wanted(policy, done) == {A: 3, B: 4}


def test_auto_stops_when_the_answer_is_clear_and_goes_on_where_it_is_open():
    policy = decide.Policy(repeats=None, max_repeats=6, precision=0.03)
    rng = random.Random(2)
    clear = {A: _side(rng, 1.0, 3, 0.01), B: _side(rng, 1.5, 3, 0.01)}
    assert decide.wanted(policy, clear) == {A: 3, B: 3}
    # Identical stacks, noisy repeats: the interval straddles 1 and is wide: one more round,
    # up to max_repeats and no further.
    noisy = {A: _side(rng, 1.0, 3, 0.10), B: _side(rng, 1.0, 3, 0.10)}
    assert decide.wanted(policy, noisy) == {A: 4, B: 4}
    capped = {A: _side(rng, 1.0, 6, 0.10), B: _side(rng, 1.0, 6, 0.10)}
    assert decide.wanted(policy, capped) == {A: 6, B: 6}
    # Identical stacks, quiet repeats: a narrow interval around 1 is an answer too.
    quiet = {A: _side(rng, 1.0, 3, 0.001), B: _side(rng, 1.0, 3, 0.001)}
    assert decide.wanted(policy, quiet) == {A: 3, B: 3}


def test_auto_does_not_repeat_what_cannot_run_and_counts_only_clean_repeats():
    policy = decide.Policy(repeats=None, max_repeats=6, precision=0.03)
    rng = random.Random(3)
    failed = [_record([], status="failed")] * 3
    done = {A: failed, B: _side(rng, 1.0, 3, 0.001)}
    assert decide.wanted(policy, done) == {A: 3, B: 3}
    # Two of B's three repeats contended: too few clean ones, so another round.
    done = {A: _side(rng, 1.0, 3, 0.001),
            B: _side(rng, 1.0, 1, 0.001) + [_record([1.0] * 4, True)] * 2}
    assert decide.wanted(policy, done)[B] == 4
    # A machine that stays busy: every repeat of B contended. Rounds stop at max_repeats,
    # re-runs included, not at twice that.
    busy = {A: _side(rng, 1.0, 6, 0.10), B: [_record([1.0] * 4, True)] * 6}
    assert decide.wanted(policy, busy)[B] == 6
    busy[B] = busy[B][:5]
    assert decide.wanted(policy, busy)[B] == 6


C = ("c", "cpu", "—", False)


def test_auto_keeps_every_environment_of_a_point_in_step():
    """A against B and A against C are decided, B against C is not: all three take the next
    round, so that every comparison of the point stays at one look (envbench.inference.looks)."""
    policy = decide.Policy(repeats=None, max_repeats=6, precision=0.03)
    rng = random.Random(4)
    done = {A: _side(rng, 1.0, 3, 0.01), B: _side(rng, 1.5, 3, 0.10),
            C: _side(rng, 1.5, 3, 0.10)}
    assert decide.wanted(policy, done) == {A: 4, B: 4, C: 4}
    # Another point (another target) is not held back by this one's open comparison.
    other = ("a", "gpu", "—", False), ("b", "gpu", "—", False)
    done.update({other[0]: _side(rng, 1.0, 3, 0.01), other[1]: _side(rng, 2.0, 3, 0.01)})
    wanted = decide.wanted(policy, done)
    assert wanted[other[0]] == 3 and wanted[other[1]] == 3 and wanted[A] == 4


def _figures_side(figures):
    return [_record([f] * 3) for f in figures]


def test_auto_decides_a_look_at_that_looks_share_of_the_level_not_at_five_percent():
    """Repeats whose Welch p is 0.03: a verdict at 5%, not at the 1.25% the first look of
    six may spend (a quarter), nor at the 0.625% each look between may spend."""
    policy = decide.Policy(repeats=None, max_repeats=6, precision=0.03)
    a, b = [1.00, 1.05, 0.97], [1.10, 1.16, 1.12]
    test = verdicts.welch(b, a)
    assert isinstance(test, verdicts.Test) and 0.0125 < test.p() < 0.05, test.p()
    done = {A: _figures_side(a), B: _figures_side(b)}
    assert decide.wanted(policy, done) == {A: 4, B: 4}
    # Fixed at 3, the same repeats are a verdict at 5%: the share is all that held it open.
    assert not decide.open_comparison([[f] * 3 for f in a], [[f] * 3 for f in b], 0.03, 3, 3)
    # At the last look (half the level: 2.5%) a p of 0.015 decides; at a middle look of ten
    # (a sixth of the quarter between: 0.21%) it does not.
    a6, b6 = [1.00, 1.05, 0.97, 1.02, 0.99, 1.06], [1.124, 1.049, 1.081, 1.028, 1.113, 1.06]
    test = verdicts.welch(b6, a6)
    assert isinstance(test, verdicts.Test) and 0.00625 < test.p() < 0.025, test.p()
    walls_a, walls_b = [[f] * 3 for f in a6], [[f] * 3 for f in b6]
    assert not decide.open_comparison(walls_a, walls_b, 0.03, 6, 6)
    assert decide.open_comparison(walls_a, walls_b, 0.03, 5, 10)


def test_the_run_records_that_its_repeats_were_auto_and_up_to_how_many():
    slot = schedule.rounds(_cells(), "interleaved", seed=3)[0][0]
    assert slot.record("interleaved", 3, 6) == {"mode": "interleaved", "seed": 3, "round": 0,
                                                "position": 0, "max_repeats": 6}
    assert "max_repeats" not in slot.record("interleaved", 3)
    assert decide.Policy(None, 6, 0.03).looks_up_to == 6
    assert decide.Policy(3, 6, 0.03).looks_up_to is None


def test_auto_spends_the_first_looks_quarter_not_the_smallest_share_of_ten():
    """Welch p 0.0085: decided at the first look of ten (a quarter of 5%: 1.25%), open at a
    middle look of ten (0.21%), the smallest share there is."""
    policy = decide.Policy(repeats=None, max_repeats=10, precision=0.03)
    a, b = [1.00, 1.05, 0.97], [1.18, 1.22, 1.20]
    test = verdicts.welch(b, a)
    assert isinstance(test, verdicts.Test) and 0.0021 < test.p() < 0.0125, test.p()
    assert decide.wanted(policy, {A: _figures_side(a), B: _figures_side(b)}) == {A: 3, B: 3}
    walls_a, walls_b = [[f] * 3 for f in a], [[f] * 3 for f in b]
    assert not decide.open_comparison(walls_a, walls_b, 0.03, 3, 10)
    assert decide.open_comparison(walls_a, walls_b, 0.03, 5, 10)


def test_a_variant_is_its_own_point_and_a_decided_one_does_not_end_the_look():
    """Two variants on one target: the first decided, the second open. Only the second's
    environments take another round, and the first being decided stops nothing after it."""
    policy = decide.Policy(repeats=None, max_repeats=6, precision=0.03)
    rng = random.Random(5)
    small = ("a", "cpu", "batch 64", False), ("b", "cpu", "batch 64", False)
    large = ("a", "cpu", "batch 128", False), ("b", "cpu", "batch 128", False)
    done = {small[0]: _side(rng, 1.0, 3, 0.01), small[1]: _side(rng, 1.5, 3, 0.01),
            large[0]: _side(rng, 1.0, 3, 0.10), large[1]: _side(rng, 1.0, 3, 0.10)}
    assert decide.wanted(policy, done) == {small[0]: 3, small[1]: 3, large[0]: 4, large[1]: 4}


def test_a_point_where_nothing_could_run_wants_what_it_has():
    policy = decide.Policy(repeats=None, max_repeats=6, precision=0.03)
    failed = [_record([], status="failed")] * 3
    assert decide.wanted(policy, {A: failed, B: failed[:2]}) == {A: 3, B: 2}


def test_clean_repeats_are_the_finished_uncontended_ones_in_order():
    walls = [1.0, 2.0, 3.0, 4.0]
    records = [_record(walls, contended=True),          # skipped, and the next still read
               _record([5.0] * 4, status="failed"),     # epochs, but the run failed
               _record(walls),
               _record([], status="ok")]                # finished with no epochs: nothing
    assert decide.clean_repeats(records) == [[e["wall_s"] for e in steady(_epochs(walls))]]
    assert decide.contended(records) == 1


def _epochs(walls):
    return [{"wall_s": w} for w in walls]


def test_too_few_repeats_on_a_side_is_an_open_comparison():
    assert decide.open_comparison([[1.0, 1.0]] * 2, [[1.0, 1.0]] * 3, 0.03, 3, 6)
    assert decide.open_comparison([], [[1.0, 1.0]] * 3, 0.03, 3, 6)


class _Interval:
    """A test whose interval is given: the rule at its edges, whatever data gives them."""

    def __init__(self, low, high):
        self.bounds = (low, high)

    def interval(self, alpha):
        return self.bounds


def test_an_interval_that_touches_one_is_open_and_one_as_wide_as_the_precision_is_not(
        monkeypatch):
    def given(low, high):
        monkeypatch.setattr(decide.verdicts, "of_repeats", lambda a, b: _Interval(low, high))
        return decide.open_comparison([[1.0]] * 3, [[1.0]] * 3, 0.25, 3, 6)

    assert given(1.0, 1.5) and given(0.5, 1.0)      # 1 inside, at either end: open
    assert not given(1.001, 1.5) and not given(0.5, 0.999)
    assert not given(0.875, 1.125)                   # exactly the precision wide: decided
    assert given(0.875, 1.1251)
