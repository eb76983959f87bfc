"""Taking in a finished cell, whatever ran it (this engine, a Slurm step, a cloud VM's run):
its log kept, the tail a failed result carries, the sentence for a run that left no result,
the executor's account of a failure over bench's own, the noise, the trace, the sections only
the host knows, and the saved file. Written once, so the executors cannot drift apart on any
of them: an executor says how a cell ended (an Ending), and take_in makes its record.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.rules import FailureKind
from envbench import users
from envbench.cells import records, traces
from envbench.cells.expansion import Prepared
from envbench.matrix.models import Target
from envbench.results import store

# The lines of its log a failed result carries (the page and the summary show them).
LOG_TAIL_LINES = 40
# What the host keeps of one cell's log: its end, where the error is. The engine keeps no
# more than this either (containerrun's json-file max-size).
LOG_CAP = 16 * 2**20
NO_RESULT = "bench exited without writing a valid result"


def keep_log(data: bytes, log_path: Path) -> list[str]:
    """The end of a cell's output (at most LOG_CAP bytes) saved as its log, atomically (a
    link planted at the log's name is replaced, never written through) and owned by the
    invoking user; returns its lines."""
    text = data[-LOG_CAP:].decode("utf-8", errors="replace")
    encoded = text.encode("utf-8")
    if len(encoded) > LOG_CAP:  # a replaced byte takes three: the saved log stays capped
        text = encoded[-LOG_CAP:].decode("utf-8", errors="ignore")
    users.write_text(log_path, text)
    return text.splitlines()


def with_tail(record: dict[str, Any], lines: list[str]) -> dict[str, Any]:
    """A failed result with the last lines of its log, which say why."""
    record["log_tail"] = lines[-LOG_TAIL_LINES:]
    return record


@dataclass
class Ending:
    """How a cell ended, as the executor that ran it saw it."""

    record: dict[str, Any] | None  # bench's own, read through the result contract; None: none
    log: list[str]  # the lines of its log the host kept (keep_log)
    # The executor's account, (kind, sentence), of a failure on its side. It stands for a
    # cell that left no record, and over bench's own where ``overrules``: the cell was
    # stopped (a timeout, the memory limit, its Slurm job ended).
    failure: tuple[str, str] | None = None
    overrules: bool = False
    noise: dict[str, Any] | None = None  # the sensors' readings; None: none were taken
    host_s: float | None = None  # the executor's wall time for the cell
    folder: Path | None = None  # where the cell wrote its result: a profile's trace is there
    sections: dict[str, Any] = field(default_factory=dict)  # the executor's own ("slurm")


@dataclass(frozen=True)
class Placed:
    """What the host adds to a cell's record: where it ran, from which image, in which
    place of the run's order."""

    p: Prepared
    target: Target
    image: dict[str, Any]
    target_accuracy: float | None
    order: dict[str, Any] | None = None


def record_of(ending: Ending, placed: Placed, results_dir: Path,
              overheads: list[float] | None = None) -> dict[str, Any]:
    """The cell's record, complete but not saved: bench's own (or the executor's account of
    the failure), its log's tail when it failed, its noise, its trace taken beside the
    results, the executor's and the host's sections. The executor's time beyond bench's own
    is added to ``overheads``."""
    record = ending.record
    if record is None:
        kind, message = ending.failure or (FailureKind.NO_RESULT, NO_RESULT)
        record = store.host_failure(placed.p.config, kind, message)
    elif ending.failure is not None and ending.overrules:
        # bench's own record of what it did before it was stopped, with the cause
        kind, message = ending.failure
        record["status"], record["error"] = "failed", {"type": kind, "message": message}
    if ending.noise is not None:
        record["noise"] = ending.noise
    if ending.folder is not None:
        traces.take(record, ending.folder, results_dir, placed.p.file_stem)
    if record.get("status") != "ok":
        with_tail(record, ending.log)
    record.update(ending.sections)
    if ending.host_s is not None:
        record["host_s"] = ending.host_s
        if record.get("run_s") is not None and overheads is not None:
            overheads.append(ending.host_s - record["run_s"])
    return records.annotate(record, placed.p, placed.target, placed.image,
                            placed.target_accuracy, order=placed.order)


def take_in(ending: Ending, placed: Placed, results_dir: Path,
            overheads: list[float] | None = None) -> dict[str, Any]:
    """The cell's record (record_of), saved where its identity says, and returned."""
    record = record_of(ending, placed, results_dir, overheads)
    records.save(results_dir, placed.p, record)
    return record
