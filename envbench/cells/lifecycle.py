"""One cell's life, whatever runs it: decided (triage: refused, current, or to run), launched,
polled until it ends, taken in (takein: the record saved), counted and shown. Written once;
what runs a cell is an Executor: this engine (cells.dockercells) or a Slurm job's step
(slurm.jobcells). A cloud VM runs its target's cells with this engine, under this same
lifecycle, and the cloud path brings their records home whole.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from envbench.cells import console, takein, triage
from envbench.cells import expansion as cellmod
from envbench.cells.progress import MatrixProgress
from envbench.images.build import BuiltImage

# An executor hands each ended cell here: its record is made, saved, counted and returned.
Take = Callable[[takein.Placed, takein.Ending], dict[str, Any]]


class Executor(Protocol):
    """What runs cells. ``live``: a cell's output is shown as it runs, and launch returns
    once it has ended (this engine); else cells are seen only as they end, in poll (a batch
    job's steps)."""

    live: bool

    def launch(self, placed: takein.Placed, built: BuiltImage, take: Take) -> None:
        """Run the cell, or plan it into what start() begins; ``take`` it once it ends."""

    def start(self) -> None:
        """Every cell is launched: begin what runs them (a batch job is submitted)."""

    def poll(self, take: Take) -> bool:
        """Take the cells that ended since the last poll; False once none is left."""


@dataclass
class Cells:
    """The cells of one run as they end: each decided once, taken in once, counted before it
    is shown (a Ctrl-C between the two must not lose it from the count)."""

    results_dir: Path
    shown: MatrixProgress
    done: list[tuple[cellmod.Cell, dict[str, Any]]] = field(default_factory=list)
    # The executor's wall time beyond bench's own, per executed cell.
    overheads: list[float] = field(default_factory=list)

    def decided(self, decided: triage.Triage, show: bool = True) -> bool:
        """A refused or current cell recorded (and shown, where ``show``); True when the
        cell is to run."""
        if decided.runs:
            return True
        record = decided.refused if decided.refused is not None else decided.stored
        assert record is not None
        self.done.append((decided.prepared.cell, record))
        if show:
            self.shown.done(decided.line if decided.refused is not None else
                            "cached " + console.figure(record), executed=False)
        return False

    def taker(self, live: bool) -> Take:
        """The take-in an executor calls as a cell ends. Not ``live``: the cell is seen now,
        so its progress line starts here too."""
        def take(placed: takein.Placed, ending: takein.Ending) -> dict[str, Any]:
            if not live:
                self.shown.start(len(self.done) + 1, placed.p.cell.label)
            record = takein.take_in(ending, placed, self.results_dir, self.overheads)
            self.done.append((placed.p.cell, record))
            self.shown.done(console.figure(record), executed=True)
            return record
        return take

    def drain(self, executors: Sequence[Executor], poll_s: float) -> None:
        """Poll the executors until every cell they run has been taken in."""
        waiting = list(executors)
        while waiting:
            waiting = [e for e in waiting if e.poll(self.taker(e.live))]
            if waiting:
                time.sleep(poll_s)
