"""A page's verdicts tested as one family, so that the page as a whole is wrong at most 5%.

A page with k comparisons, each tested at 5%, calls at least one of them wrongly far more
often than 5% (about 1 in 5 at k = 4, were they independent). Every comparison the page
prints an interval for (environment against environment, target speedups, scaling rows) is
in the family, and Holm's step-down (envbench.inference.verdicts.holm) gives each the level it is
tested at: the family-wise error, the chance that any verdict on the page is false, stays
at most 5%, and a comparison far from 1 (a GPU against a CPU) costs the others little.
Holm rather than Benjamini–Hochberg: the page promises that its verdicts are all right
together, not that most of them are.

A comparison whose repeats came from `repeats: auto` enters with its p-value divided by its
share (envbench.inference.looks), so its level is the family's times that share: the looks and the
family are one union bound.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from envbench.inference import verdicts
from envbench.report.grouping import Speedup


@dataclass(frozen=True)
class Family:
    """What the page says of its verdicts as a whole."""

    size: int       # comparisons with a test
    looked: int     # of them, from repeats that `repeats: auto` decided by looking

    @property
    def sentence(self) -> str:
        """One line for the page; empty where nothing was tested."""
        if not self.size:
            return ""
        level = "%g%%" % (100 * verdicts.ALPHA)
        if self.size == 1:
            text = "1 comparison: at most a %s chance that its verdict is false." % level
            looked = " Its repeats were decided by repeats: auto, which looked after each " \
                     "round; each look spent its share of the %s." % level
        else:
            text = ("%d comparisons, tested together (Holm's step-down): at most a %s chance "
                    "that any of these verdicts is false." % (self.size, level))
            looked = (" %d of them come from repeats: auto, which looked after each round; "
                      "each look spent its share of the %s." % (self.looked, level))
        return text + (looked if self.looked else "")


def test_together(speedups: Iterable[Speedup], alpha: float = verdicts.ALPHA) -> Family:
    """Give every tested comparison among ``speedups`` its level in the family (each pair
    of groups once, however many places show it) and say what the family is."""
    pairs: dict[tuple[tuple[str, ...], tuple[str, ...]], list[Speedup]] = {}
    for s in speedups:
        # A group over itself (the baseline target's own row) is shown as "baseline": no
        # comparison, and none of the family's level goes to it.
        if isinstance(s.test, verdicts.Test) and s.group is not s.baseline:
            pairs.setdefault((s.group.key, s.baseline.key), []).append(s)
    members = list(pairs.values())
    pvalues = []
    for same in members:
        test = same[0].test
        assert isinstance(test, verdicts.Test)   # only tested comparisons are members
        pvalues.append(test.p() / same[0].share)
    levels = verdicts.holm(pvalues, alpha)
    for level, same in zip(levels, members):
        for s in same:
            s.tested_at(level)
    return Family(len(members), sum(1 for same in members if same[0].share < 1.0))
