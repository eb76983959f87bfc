"""Where the time goes, operator by operator: each profiled cell's top operators, the ones
that moved between two stacks, and the ones that account for a change in `compare`.

Times are per train step (the window's self time over its steps): two cells of the same
options train the same batch, so a step is the same work in both. A cell's figure is the
median over its profiled repeats. An operator outside a cell's top list was lumped into its
"other" row: its time there is unknown, shown as a dash, never as zero.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from bench.tracefile import TRACE_SUFFIX
from envbench.inference import stats
from envbench.report.grouping import Group, signature
from envbench.results.record import Result

OTHER = "(other operators)"   # bench.profiling.OTHER: the row of everything below the top
MOVED_ROWS = 8
ACCOUNTING_ROWS = 3


@dataclass(frozen=True)
class OperatorRow:
    name: str
    per_step_s: float | None     # median over the profiled repeats
    share: float | None          # of the window's total ranking time
    calls_per_step: float | None


@dataclass(frozen=True)
class CellProfile:
    group: Group
    ranked_by: str               # "CPU time" or "GPU time"
    rows: list[OperatorRow]
    traces: list[tuple[str, str]]    # (repeat, link relative to the page)
    notes: list[str]
    repeats: int                 # profiled repeats the figures are medians of


@dataclass(frozen=True)
class Moved:
    name: str
    old_s: float | None
    new_s: float | None
    old_share: float | None
    new_share: float | None

    @property
    def change_s(self) -> float | None:
        return self.new_s - self.old_s if self.old_s is not None and self.new_s is not None \
            else None


@dataclass(frozen=True)
class MovedTable:
    base: Group
    other: Group
    rows: list[Moved]


def profiled(g: Group) -> list[Result]:
    """The measured repeats with a profile that ranked something."""
    return [r for r in g.measured if r.profile is not None and r.profile.operators]


def _rows(records: list[Result]) -> dict[str, OperatorRow]:
    times: dict[str, list[float]] = {}
    shares: dict[str, list[float]] = {}
    calls: dict[str, list[float]] = {}
    for r in records:
        profile = r.profile
        assert profile is not None
        for op in profile.operators:
            spent = profile.per_step(op)
            if spent is not None:
                times.setdefault(op.name, []).append(spent)
            if op.share is not None:
                shares.setdefault(op.name, []).append(op.share)
            if profile.steps:
                calls.setdefault(op.name, []).append(op.calls / profile.steps)
    names = list(dict.fromkeys(op.name for r in records if r.profile
                               for op in r.profile.operators))
    return {n: OperatorRow(n, stats.median(times[n]) if n in times else None,
                           stats.median(shares[n]) if n in shares else None,
                           stats.median(calls[n]) if n in calls else None) for n in names}


def trace_file(r: Result) -> Path | None:
    """The trace beside a result file, where it was taken across and is still there."""
    if r.path is None or r.profile is None or not r.profile.trace:
        return None
    name = r.path.name
    path = r.path.with_name((name[:-len(".json")] if name.endswith(".json") else name)
                            + TRACE_SUFFIX)
    # A link planted in a results folder is not this cell's trace: the page links none.
    return path if path.name == r.profile.trace and path.is_file() and not path.is_symlink() \
        else None


def cell(g: Group, out: Path | None) -> CellProfile | None:
    records = profiled(g)
    notes = sorted({r.profile.note for r in g.measured if r.profile and r.profile.note})
    if not records:
        return CellProfile(g, "", [], [], notes, 0) if notes else None
    rows = sorted(_rows(records).values(),
                  key=lambda row: (row.name == OTHER, -(row.share or 0.0), row.name))
    traces = []
    for r in records:
        path = trace_file(r)
        if path is not None:
            href = os.path.relpath(path, out) if out is not None else str(path)
            traces.append(("repeat %d" % (r.cell.repeat + 1), href.replace(os.sep, "/")))
    device = any(r.profile is not None and r.profile.ranked_by == "self_device" for r in records)
    return CellProfile(g, "GPU time" if device else "CPU time", rows, traces, notes,
                       len(records))


def cells(groups: list[Group], out: Path | None) -> list[CellProfile]:
    return [c for c in (cell(g, out) for g in groups) if c is not None]


def moved(groups: list[Group], base_env: str | None) -> list[MovedTable]:
    """Per profiled group outside the baseline environment: the operators whose share moved
    most against the same target, workload and options in the baseline environment."""
    if base_env is None:
        return []
    bases = {signature(g, across_environments=True): g for g in groups
             if g.environment == base_env and profiled(g)}
    out = []
    for g in groups:
        if g.environment == base_env or not profiled(g):
            continue
        base = bases.get(signature(g, across_environments=True))
        if base is None:
            continue
        rows = changes(base, g)
        rows.sort(key=lambda m: -abs((m.new_share or 0.0) - (m.old_share or 0.0)))
        out.append(MovedTable(base, g, rows[:MOVED_ROWS]))
    return out


def changes(old: Group, new: Group) -> list[Moved]:
    """Every named operator of either group's top list, old against new."""
    before, after = _rows(profiled(old)), _rows(profiled(new))
    names = [n for n in dict.fromkeys([*before, *after]) if n != OTHER]
    return [Moved(n, before[n].per_step_s if n in before else None,
                  after[n].per_step_s if n in after else None,
                  before[n].share if n in before else None,
                  after[n].share if n in after else None) for n in names]


def accounting(old: Group, new: Group, slower: bool) -> list[Moved]:
    """The operators that account for a change: those whose time per step grew most (a
    regression, ``slower``) or shrank most (an improvement). Empty unless both runs were
    profiled."""
    if not profiled(old) or not profiled(new):
        return []
    rows = [m for m in changes(old, new) if m.change_s is not None
            and (m.change_s > 0 if slower else m.change_s < 0)]
    rows.sort(key=lambda m: -abs(m.change_s or 0.0))
    return rows[:ACCOUNTING_ROWS]
