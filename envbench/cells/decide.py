"""How many repeats each measurement needs: the matrix's number, one re-run for each repeat
that ran contended, and with `repeats: auto` more rounds only where a comparison is open.

A measurement is its cell without the repeat number. Two measurements are compared when
they differ only in the environment (the page's main answer). With `repeats: auto`, after
MIN_REPEATS clean repeats a comparison is decided when the interval of its ratio (the
two-stage bootstrap, envbench.stats) lies wholly on one side of 1, or straddles 1 but is
narrower than the matrix's precision ("no difference at this precision"); the kit stops at
max_repeats either way, re-runs of contended repeats included.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench.summary import steady
from envbench import stats
from envbench.cells.expansion import Cell
from envbench.results.identity import variant_text

MIN_REPEATS = 3


@dataclass(frozen=True)
class Policy:
    """The matrix's repeats: a fixed number, or auto between MIN_REPEATS and a maximum."""

    repeats: int | None   # None: auto
    max_repeats: int
    precision: float

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


def open_comparison(a: list[list[float]], b: list[list[float]], precision: float) -> bool:
    """Too few clean repeats on a side, or an interval that straddles 1 and is wider than
    the precision."""
    if len(a) < MIN_REPEATS or len(b) < MIN_REPEATS:
        return True
    low, high = stats.hierarchical_ratio_ci(a, b)
    return low <= 1.0 <= high and high - low > precision


def wanted(policy: Policy, done: dict[tuple[str, str, str, bool], list[dict[str, Any]]]
           ) -> dict[tuple[str, str, str, bool], int]:
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
    # auto: one more round for every measurement in an open comparison (too few clean
    # repeats counts as open), up to the maximum.
    by_point: dict[tuple[str, str, bool], list[tuple[str, str, str, bool]]] = {}
    for key in done:
        by_point.setdefault((key[1], key[2], key[3]), []).append(key)
    for key, records in done.items():
        if not any(r.get("status") == "ok" for r in records):
            continue  # a cell that cannot run here (no GPU, a failed build) is not repeated
        # max_repeats is the most repeats a measurement gets, re-runs of contended ones
        # included: on a machine that stays busy the run ends there (its contended repeats
        # marked), instead of running up to twice as many rounds.
        limit = policy.max_repeats
        peers = [k for k in by_point[(key[1], key[2], key[3])] if k != key
                 and any(r.get("status") == "ok" for r in done[k])]
        mine = clean_repeats(records)
        still_open = len(mine) < MIN_REPEATS or any(
            open_comparison(mine, clean_repeats(done[peer]), policy.precision)
            for peer in peers)
        if still_open and len(records) < limit:
            out[key] = len(records) + 1
    return out
