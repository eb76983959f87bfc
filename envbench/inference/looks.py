"""`repeats: auto` as a sequential design: the 5% a verdict may be wrong is spent over the
looks the run takes, so that looking again adds no error.

A run with `repeats: auto` looks at its comparisons after the first MIN_REPEATS rounds and
after every round after them, up to max_repeats, and stops a measurement's repeats once its
comparisons are decided. Testing each look at the full level would let chance decide at
whichever look it first pleased (optional stopping: 12% false verdicts measured, not 5%).
Here look l may spend only share(l) of the level, the shares summing to 1, so whatever the
run did, the chance that any of its looks was falsely decided is at most the level (the
union bound: P(any look wrong) <= sum of each look's level). A share is fixed before the
run, and a page reads it back from the results: their `order.max_repeats` says the repeats
were auto, and their count says at which look the run stopped.

The shares: a quarter at the first look (where clear differences stop), half at the last
(where close calls are decided with most repeats), and a quarter spread over the looks in
between. Chosen by measurement against equal shares and against O'Brien–Fleming-like ones
(perf/verdict_calibration.py --designs; docs/method.md has the table): all three stay
below 5% false verdicts, and this one finds a real 5-10% difference most often.

Within a run, every environment of one point (a target, a variant, --quick or not) takes
the same rounds (one more for all while any of their comparisons is open), so the two sides
of an environment comparison are always at the same look, and the comparison has one share.
Any other pair (two targets, two variants, sides from different runs) is charged both
sides' shares, their product: the pair's looks then fall on a grid, not a line, and the
products over the grid sum to 1, so the union bound holds however the looks fell.
"""
from __future__ import annotations

from dataclasses import dataclass

from envbench.inference.verdicts import MIN_REPEATS

FIRST_SHARE = 0.25
LAST_SHARE = 0.5


def share(look: int, max_repeats: int) -> float:
    """The share of the level that a run with `repeats: auto` up to ``max_repeats`` spends
    at the look it takes with ``look`` repeats a side. A look outside the design (more
    repeats than it allows) gets its smallest share."""
    looks = max_repeats - MIN_REPEATS + 1
    if looks <= 1:
        return 1.0
    between = looks - 2
    shares = {MIN_REPEATS: FIRST_SHARE,
              max_repeats: LAST_SHARE + (0.0 if between else 1.0 - FIRST_SHARE - LAST_SHARE)}
    for middle in range(MIN_REPEATS + 1, max_repeats):
        shares[middle] = (1.0 - FIRST_SHARE - LAST_SHARE) / between
    return shares.get(look, min(shares.values()))


@dataclass(frozen=True)
class Side:
    """What a comparison's side says of how its repeats were decided."""

    max_repeats: int | None   # None: a fixed number of repeats (no look at any comparison)
    repeats: int              # the repeats it holds (its records: clean, contended, failed)
    run: int | None = None    # the run that took its last repeat (the order's seed)
    point: str | None = None  # the target, variant and marks whose rounds it took in step

    @property
    def share(self) -> float:
        return 1.0 if self.max_repeats is None else share(self.repeats, self.max_repeats)


def share_of(a: Side, b: Side) -> float:
    """The share of the level a comparison of a and b may spend: one look's where both come
    from one auto run in step (one run, design, point and look), else both sides' shares."""
    in_step = (a.max_repeats is not None and a.max_repeats == b.max_repeats
               and a.repeats == b.repeats and a.run is not None and a.run == b.run
               and a.point is not None and a.point == b.point)
    return a.share if in_step else a.share * b.share
