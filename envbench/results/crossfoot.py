"""Whether a result's figures agree with each other, checked once on read, before any figure
is used: a result that contradicts itself is not a measurement.

The schema says each figure has the right type and range; it cannot say that an epoch's
samples over its wall are its samples/s, or that the summary's median is the median of the
epochs it summarises. A result edited by hand, forged on a VM, or written by a broken bench
fails here with the first contradiction, in one sentence, and is left out of the report and
of compare like an unreadable file. The tolerances are those of bench's own rounding (walls
to 1 µs, rates to 0.001/s) with a wide margin; each names what bench computes (bench/train.py
and bench/summary.py).
"""
from __future__ import annotations

import math
import statistics
import unicodedata
from datetime import datetime, timedelta, timezone
from typing import Any

from bench.summary import steady
from envbench import files
from envbench.matrix.grammars import size_bytes

RATE_TOLERANCE = 0.01      # samples / wall against samples_per_s: bench rounds both finely
SUMMARY_TOLERANCE = 0.001  # the summary's medians against the epochs': computed from them
# Phases against the wall. On CPU they partition the epoch's wall; on CUDA the device phases
# are CUDA-event spans inside it and `data` is host time that may overlap them, so each of
# the two is bounded by the wall alone.
PHASE_SLACK = 0.02         # relative, and
PHASE_SLACK_S = 0.01       # absolute (the rounding of five phases to 1 µs, timer reads)
CIFAR10_TRAIN = 50_000     # CIFAR-10's training images
RUN_SLACK_S = 1.0          # bench's run against the host's wall around its container
FUTURE = timedelta(days=1)  # a result written later than this from now has a wrong clock


def _close(a: float, b: float, tolerance: float) -> bool:
    return abs(a - b) <= tolerance * max(abs(a), abs(b)) + 1e-9


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _epochs(record: dict[str, Any]) -> str | None:
    """Each epoch on its own: numbering, samples / wall, phases against the wall."""
    cuda = (record.get("config") or {}).get("device") == "cuda"
    epochs = record.get("epochs") or []
    samples_seen = None
    for index, epoch in enumerate(epochs):
        where = "epoch %d" % index
        if epoch.get("epoch") != index:
            return "%s is numbered %s: epochs run 0, 1, 2, ... in order" % (
                where, str(epoch.get("epoch"))[:20])
        wall, samples = _number(epoch.get("wall_s")), _number(epoch.get("samples"))
        rate = _number(epoch.get("samples_per_s"))
        if wall is None or wall <= 0:
            return "%s has no positive wall time" % where
        if samples is not None and rate is not None and \
                not _close(samples / wall, rate, RATE_TOLERANCE):
            return ("%s: %d samples in %.6g s is %.6g samples/s, but it says %.6g"
                    % (where, samples, wall, samples / wall, rate))
        if samples_seen is not None and samples != samples_seen:
            return ("%s trained %s samples and epoch 0 %s: every epoch of a run sees the "
                    "same data" % (where, _short_number(samples), _short_number(samples_seen)))
        samples_seen = samples
        phases = {k: _number(v) or 0.0 for k, v in (epoch.get("phases_s") or {}).items()}
        bound = wall * (1 + PHASE_SLACK) + PHASE_SLACK_S
        device = sum(v for k, v in phases.items() if k != "data") if cuda else \
            sum(phases.values())
        if device > bound:
            return ("%s: its phases add up to %.6g s, more than its wall of %.6g s"
                    % (where, device, wall))
        if cuda and phases.get("data", 0.0) > bound:
            return ("%s: its data phase of %.6g s is longer than its wall of %.6g s"
                    % (where, phases["data"], wall))
    return None


def _short_number(value: float | None) -> str:
    return "none" if value is None else "%.0f" % value


def _count(record: dict[str, Any]) -> str | None:
    """The number of epochs against the config, and samples against the data's limit."""
    config, epochs = record.get("config") or {}, record.get("epochs") or []
    wanted = config.get("epochs")
    if isinstance(wanted, int) and not isinstance(wanted, bool):
        if len(epochs) > wanted or (record.get("status") == "ok" and len(epochs) != wanted):
            return "it holds %d epochs, but its config asked for %d" % (len(epochs), wanted)
    limit = _number(config.get("limit"))
    repeated = _number((record.get("parallel") or {}).get("repeated_samples_per_epoch")) or 0
    data = ((record.get("cell") or {}).get("data") or {}).get("source")
    if limit is None and data == "cifar10" and not config.get("synthetic"):
        limit = CIFAR10_TRAIN  # the data set's size: no epoch of it holds more
    if limit is not None and epochs:
        samples = _number(epochs[0].get("samples"))
        if samples is not None and samples > limit + repeated:
            return ("each epoch trained %.0f samples, more than its data's %.0f%s"
                    % (samples, limit, " and the %.0f a distributed sampler repeats"
                       % repeated if repeated else ""))
    return None


def _summary(record: dict[str, Any]) -> str | None:
    """The summary's figures against the epochs they are computed from, by bench's own rule
    for which epochs are steady (bench/summary.py)."""
    epochs = record.get("epochs") or []
    summary = record.get("summary") or {}
    if record.get("status") != "ok" or not epochs:
        return None
    walls = [_number(e.get("wall_s")) or 0.0 for e in epochs]
    rates = [_number(e.get("samples_per_s")) or 0.0 for e in epochs]
    checks = (
        ("epoch_s_median", statistics.median(steady(walls)),
         "the median of its steady epochs' walls"),
        ("first_epoch_s", walls[0], "its first epoch's wall"),
        ("samples_per_s", statistics.median(steady(rates)),
         "the median of its steady epochs' samples/s"),
    )
    for key, expected, what in checks:
        said = _number(summary.get(key))
        if said is None or not _close(said, expected, SUMMARY_TOLERANCE):
            return "its summary's %s is %s, but %s is %.6g" % (
                key, "%.6g" % said if said is not None else "missing", what, expected)
    last = epochs[-1]
    for key in ("test_acc", "test_loss"):
        said, epoch = summary.get("final_" + key), last.get(key)
        a, b = _number(said), _number(epoch)
        if said != epoch and not (a is not None and b is not None and _close(a, b, 1e-9)):
            return "its summary's final_%s is %s, but its last epoch's %s is %s" % (
                key, str(said)[:24], key, str(epoch)[:24])
    return None


def _memory(record: dict[str, Any]) -> str | None:
    """Peaks against what contains them: torch's allocated bytes lie in its reserved ones,
    and a container's peak in its memory limit."""
    memory = record.get("memory") or {}
    allocated = _number(memory.get("gpu_peak_allocated_bytes"))
    reserved = _number(memory.get("gpu_peak_reserved_bytes"))
    if allocated is not None and reserved is not None and allocated > reserved:
        return ("its GPU memory peak allocated (%.0f bytes) exceeds the peak reserved (%.0f), "
                "which holds it" % (allocated, reserved))
    limit_text = ((record.get("cell") or {}).get("resources") or {}).get("memory")
    peak = _number(memory.get("cgroup_peak_bytes"))
    if isinstance(limit_text, str) and peak is not None:
        try:
            limit = size_bytes(limit_text)
        except (ValueError, TypeError):
            return None
        if peak > limit * 1.01:
            return ("its container's memory peak (%.0f bytes) exceeds the container's limit "
                    "of %s" % (peak, limit_text[:20]))
    return None


def _clock(record: dict[str, Any]) -> str | None:
    """The clock's bound is its marks times one mark's cost, and the clock cannot have cost
    an epoch more than the epoch lasted."""
    clock = record.get("clock")
    if not isinstance(clock, dict):
        return None
    marks = _number(clock.get("marks_per_epoch"))
    mark_s = _number(clock.get("mark_s"))
    bound = _number(clock.get("epoch_s_at_most"))
    if marks is None or mark_s is None or bound is None:
        return None
    if not _close(bound, marks * mark_s, 0.01) and abs(bound - marks * mark_s) > 2e-6:
        return ("its clock's bound (%.3g s an epoch) is not its %d marks times %.3g s a mark"
                % (bound, marks, mark_s))
    walls = [w for w in (_number(e.get("wall_s")) for e in record.get("epochs") or []) if w]
    if walls and bound > max(walls):
        return ("its clock's cost (%.3g s an epoch) is more than its longest epoch (%.3g s)"
                % (bound, max(walls)))
    return None


def _times(record: dict[str, Any], now: datetime | None = None) -> str | None:
    """The run's times in order: the epochs inside bench's run, bench's run inside the host's
    wall around its container, and a written_at that is a time and not a future one."""
    epochs = record.get("epochs") or []
    inside = sum((_number(e.get("wall_s")) or 0.0) + (_number(e.get("test_s")) or 0.0)
                 for e in epochs)
    run_s, host_s = _number(record.get("run_s")), _number(record.get("host_s"))
    if run_s is not None and inside > run_s * (1 + PHASE_SLACK) + PHASE_SLACK_S:
        return ("its epochs and tests take %.6g s, more than bench's whole run of %.6g s"
                % (inside, run_s))
    if run_s is not None and host_s is not None and run_s > host_s + RUN_SLACK_S:
        return ("bench's run of %.6g s is longer than the host's wall of %.6g s around its "
                "container" % (run_s, host_s))
    written = record.get("written_at")
    if isinstance(written, str) and written:
        try:
            when = datetime.fromisoformat(written.replace("Z", "+00:00"))
        except ValueError:
            return "its written_at %r is not a time" % written[:40]
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        if when > (now or datetime.now(timezone.utc)) + FUTURE:
            return "it was written at %s, in the future" % written[:40]
    return None


def _names(record: dict[str, Any]) -> str | None:
    """Names that show what they are: no character that shows nothing or reorders the text
    (a zero-width space makes two rows that look the same), and names as NFKC writes them."""
    cell = record.get("cell") or {}
    for key in ("environment", "target", "target_label"):
        value = cell.get(key)
        if not isinstance(value, str):
            continue
        hidden = files.hidden_character(value)
        if hidden is not None:
            return "its cell's %s holds %s, which shows nothing or reorders the text" % (
                key, hidden)
        if key != "target_label" and unicodedata.normalize("NFKC", value) != value:
            return ("its cell's %s %r is not in NFKC form: it would look like another name"
                    % (key, value[:60]))
    return None


CHECKS = (_names, _epochs, _count, _summary, _memory, _clock, _times)


def contradiction(record: dict[str, Any]) -> str | None:
    """The first way ``record`` (valid by the schema) contradicts itself, or None."""
    for check in CHECKS:
        problem = check(record)
        if problem is not None:
            return problem
    return None
