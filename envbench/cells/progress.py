"""Progress of a matrix run: cells done of all, time so far, time left, and each running
cell's epochs as bench prints them. A live bar on a terminal (rich), plain lines elsewhere
(CI logs, pipes): never a silent minute either way."""
from __future__ import annotations

import threading
import time
from typing import Any, TextIO

from envbench import terminal


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return "%dh%02dm" % (seconds // 3600, seconds % 3600 // 60) if seconds >= 3600 else \
        "%dm%02ds" % (seconds // 60, seconds % 60) if seconds >= 60 else "%ds" % seconds


# What one cell's own output may put on the console: bench prints a line per epoch, so this is
# far past a real run's; a workload that prints megabytes has the rest in its log only (a
# 50 MB print reached the console whole).
LINES_SHOWN = 300
LINE_CHARS = 1000


class MatrixProgress:
    """One per run: ``start(cell)``, ``line(text)`` for the cell's output, ``done(outcome)``."""

    def __init__(self, total: int, out: TextIO, live: bool | None = None):
        self.total, self.out = total, out
        self.done_count = 0
        self.started = time.perf_counter()
        self.executed: list[float] = []  # seconds of cells that ran (cached ones take none)
        self._cell_started = 0.0
        self._label = ""
        self._lines = 0  # the running cell's lines so far
        self._lock = threading.Lock()
        self._bar: Any = None
        if live if live is not None else _is_tty(out):
            self._bar = _RichBar(total, out)

    def grow(self, cells: int) -> None:
        """More cells than planned: another round where the answer is still open."""
        self.total += cells
        if self._bar is not None:
            self._bar.grow(self.total)

    def start(self, index: int, label: str) -> None:
        self._cell_started = time.perf_counter()
        self._lines = 0
        self._label = "[%d/%d] %s" % (index, self.total, label)
        if self._bar is not None:
            self._bar.describe(label)
        else:
            self._print("  running %s" % label)

    def line(self, text: str) -> None:
        """A line of the running cell's own output (its epochs), up to LINES_SHOWN."""
        self._lines += 1
        if self._lines <= LINES_SHOWN:
            cut = text if len(text) <= LINE_CHARS else text[:LINE_CHARS] + " …"
            self._print("    | %s" % cut)
        elif self._lines == LINES_SHOWN + 1:
            self._print("    | … (more than %d lines: the rest of this cell's output is in its "
                        "log)" % LINES_SHOWN)

    def done(self, outcome: str, executed: bool) -> None:
        seconds = time.perf_counter() - self._cell_started
        if executed:
            self.executed.append(seconds)
        self.done_count += 1
        self._print("%s … %s  (%s)" % (self._label, outcome, self.timing()))
        if self._bar is not None:
            self._bar.advance()

    def timing(self) -> str:
        elapsed = time.perf_counter() - self.started
        left = self.total - self.done_count
        if not left:
            return "done in %s" % _clock(elapsed)
        if not self.executed:
            return "%s so far" % _clock(elapsed)
        eta = sum(self.executed) / len(self.executed) * left
        return "%s so far, about %s left" % (_clock(elapsed), _clock(eta))

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()

    def _print(self, text: str) -> None:
        text = terminal.safe(text)  # a cell's own output and error messages included
        with self._lock:
            if self._bar is not None:
                self._bar.print(text)
            else:
                print(text, file=self.out, flush=True)


def _is_tty(out: TextIO) -> bool:
    try:
        return out.isatty()
    except (AttributeError, ValueError):
        return False


class _RichBar:
    """rich's live progress bar at the foot of the terminal, lines printed above it."""

    def __init__(self, total: int, out: TextIO):
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), TimeElapsedColumn(),
                                 TimeRemainingColumn(), console=Console(file=out),
                                 transient=True)
        self.task = self.progress.add_task("cells", total=total)
        self.progress.start()

    def describe(self, label: str) -> None:
        self.progress.update(self.task, description=label[:60])

    def print(self, text: str) -> None:
        self.progress.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def grow(self, total: int) -> None:
        self.progress.update(self.task, total=total)

    def advance(self) -> None:
        self.progress.advance(self.task)

    def stop(self) -> None:
        self.progress.stop()
