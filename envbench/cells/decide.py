"""How many repeats each measurement needs: the matrix's number, one re-run for each repeat
that ran contended, and with `repeats: auto` more rounds only where a comparison is open.

A measurement is its cell without the repeat number; a point is a target, a variant and
--quick, and the measurements of one point (its environments) are compared with each other
(the page's main answer). With `repeats: auto`, after MIN_REPEATS rounds a point's
comparisons are looked at after every round: one is decided when its interval (the
calibrated test, envbench.inference.verdicts, at the share of the level this look may spend,
envbench.inference.looks) lies wholly on one side of 1, or straddles 1 but is narrower than the
matrix's precision ("no difference at this precision"). While any of a point's comparisons
is open, every environment of the point takes one more round, so that all its comparisons
stay at one look; the kit stops at max_repeats either way, re-runs of contended repeats
included.
"""
from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench.summary import steady
from envbench.cells.expansion import Cell
from envbench.inference import looks, verdicts
from envbench.inference.verdicts import MIN_REPEATS
from envbench.results.identity import variant_text


@dataclass(frozen=True)
class Policy:
    """The matrix's repeats: a fixed number, or auto between MIN_REPEATS and a maximum."""

    repeats: int | None   # None: auto
    max_repeats: int
    precision: float

    @property
    def looks_up_to(self) -> int | None:
        """Where the repeats are auto: the most the run may take (it looks up to there)."""
        return self.max_repeats if self.repeats is None else None

    @property
    def planned(self) -> int:
        """The repeats every measurement gets in the planned rounds."""
        return self.repeats if self.repeats is not None else MIN_REPEATS


def measurement(cell: Cell) -> tuple[str, str, str, bool]:
    return (cell.environment, cell.target, variant_text(cell.variant), cell.quick)


def clean_repeats(records: Sequence[dict[str, Any]]) -> list[list[float]]:
    """The steady epoch times of each repeat that finished and ran alone."""
    out = []
    for r in records:
        if r.get("status") != "ok" or not r.get("epochs") or (r.get("noise") or {}).get(
                "contended"):
            continue
        out.append([e["wall_s"] for e in steady(r["epochs"])])
    return out


def contended(records: Sequence[dict[str, Any]]) -> int:
    return sum(1 for r in records if (r.get("noise") or {}).get("contended"))


def open_comparison(a: list[list[float]], b: list[list[float]], precision: float,
                    look: int, max_repeats: int) -> bool:
    """Too few clean repeats on a side (or none that differ), or an interval at this look's
    share of the level that straddles 1 and is wider than the precision."""
    test = verdicts.of_repeats(a, b)
    if isinstance(test, verdicts.NoTest):
        return True
    low, high = test.interval(verdicts.ALPHA * looks.share(look, max_repeats))
    return low <= 1.0 <= high and high - low > precision


Measurement = tuple[str, str, str, bool]


def wanted(policy: Policy, done: dict[Measurement, list[dict[str, Any]]]
           ) -> dict[Measurement, int]:
    """For each measurement, how many repeats it should have now."""
    out = {}
    for key, records in done.items():
        count, rerun = len(records), contended(records[:policy.planned])
        if policy.repeats is not None:
            out[key] = policy.repeats + min(rerun, policy.repeats)
        else:
            out[key] = count
    if policy.repeats is not None:
        return out
    # auto: one more round for every environment of a point while any of its comparisons
    # is open (too few clean repeats counts as open), up to the maximum.
    by_point: dict[tuple[str, str, bool], list[Measurement]] = {}
    for key in done:
        by_point.setdefault((key[1], key[2], key[3]), []).append(key)
    for keys in by_point.values():
        # A cell that cannot run here (no GPU, a failed build) is not repeated.
        runnable = [k for k in keys if any(r.get("status") == "ok" for r in done[k])]
        clean = {k: clean_repeats(done[k]) for k in runnable}
        # In step, every runnable environment of the point holds as many repeats: the look.
        look = max((len(done[k]) for k in runnable), default=0)
        still_open = any(len(clean[k]) < MIN_REPEATS for k in runnable) or any(
            open_comparison(clean[x], clean[y], policy.precision, look, policy.max_repeats)
            for x, y in itertools.combinations(runnable, 2))
        if not still_open:
            continue
        for key in runnable:
            # max_repeats is the most repeats a measurement gets, re-runs of contended ones
            # included: on a machine that stays busy the run ends there (its contended
            # repeats marked), instead of running up to twice as many rounds.
            if len(done[key]) < policy.max_repeats:
                out[key] = len(done[key]) + 1
    return out
