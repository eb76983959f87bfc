"""Whether a result's figures agree with each other, checked once on read, before any figure
is used: a result that contradicts itself is not a measurement.

The schema says each figure has the right type and range; it cannot say that an epoch's
samples over its wall are its samples/s, or that the summary's median is the median of the
epochs it summarises. A result edited by hand, forged on a VM, or written by a broken bench
fails here with the first contradiction, in one sentence, and is left out of the report and
of compare like an unreadable file. It reads the record through the typed ``Result`` the
report reads (the schema has already held each field to its type), so a figure checked here
is the figure the page shows. The tolerances are those of bench's own rounding (walls
to 1 µs, rates to 0.001/s) with a wide margin; each names what bench computes (bench/train.py
and bench/summary.py).
"""
from __future__ import annotations

import math
import statistics
import unicodedata
from datetime import datetime, timedelta, timezone

from bench.summary import steady
from envbench import files
from envbench.matrix.grammars import size_bytes
from envbench.results.record import Result

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


def _number(value: object) -> float | None:
    """A finite number from a section kept as a mapping (memory, resources), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _epochs(r: Result) -> str | None:
    """Each epoch on its own: numbering, samples / wall, phases against the wall."""
    cuda = r.device == "cuda"
    for index, epoch in enumerate(r.epochs):
        where = "epoch %d" % index
        if epoch.number != index:
            return "%s is numbered %s: epochs run 0, 1, 2, ... in order" % (
                where, str(epoch.number)[:20])
        wall, samples = epoch.wall_s, epoch.samples
        if not _close(samples / wall, epoch.samples_per_s, RATE_TOLERANCE):
            return ("%s: %d samples in %.6g s is %.6g samples/s, but it says %.6g"
                    % (where, samples, wall, samples / wall, epoch.samples_per_s))
        if samples != r.epochs[0].samples:
            return ("%s trained %d samples and epoch 0 %d: every epoch of a run sees the "
                    "same data" % (where, samples, r.epochs[0].samples))
        bound = wall * (1 + PHASE_SLACK) + PHASE_SLACK_S
        # On CUDA `data` is host time beside the device phases, so it is bounded alone.
        device = sum(v for k, v in epoch.phases_s.items() if not (cuda and k == "data"))
        if device > bound:
            return ("%s: its phases add up to %.6g s, more than its wall of %.6g s"
                    % (where, device, wall))
        if cuda and epoch.phase("data") > bound:
            return ("%s: its data phase of %.6g s is longer than its wall of %.6g s"
                    % (where, epoch.phase("data"), wall))
    return None


def _count(r: Result) -> str | None:
    """The number of epochs against the config, and samples against the data's limit."""
    wanted = r.config.get("epochs")
    if isinstance(wanted, int) and not isinstance(wanted, bool):
        if len(r.epochs) > wanted or (r.status == "ok" and len(r.epochs) != wanted):
            return "it holds %d epochs, but its config asked for %d" % (len(r.epochs), wanted)
    limit = _number(r.config.get("limit"))
    repeated = r.parallel.repeated_samples_per_epoch if r.parallel else 0
    data = r.cell.data.source if r.cell.data else None
    if limit is None and data == "cifar10" and not r.config.get("synthetic"):
        limit = CIFAR10_TRAIN  # the data set's size: no epoch of it holds more
    if limit is not None and r.epochs and r.epochs[0].samples > limit + repeated:
        return ("each epoch trained %.0f samples, more than its data's %.0f%s"
                % (r.epochs[0].samples, limit, " and the %.0f a distributed sampler repeats"
                   % repeated if repeated else ""))
    return None


def _agree(said: float | None, found: float | None) -> bool:
    """A final figure the summary repeats from the last epoch: the same, both absent, or
    equal to bench's rounding."""
    return said == found or (said is not None and found is not None and
                             _close(said, found, 1e-9))


def _summary(r: Result) -> str | None:
    """The summary's figures against the epochs they are computed from, by bench's own rule
    for which epochs are steady (bench/summary.py)."""
    if r.status != "ok" or not r.epochs:
        return None
    walls = [e.wall_s for e in r.epochs]
    rates = [e.samples_per_s for e in r.epochs]
    checks = (
        ("epoch_s_median", r.summary.epoch_s_median, statistics.median(steady(walls)),
         "the median of its steady epochs' walls"),
        ("first_epoch_s", r.summary.first_epoch_s, walls[0], "its first epoch's wall"),
        ("samples_per_s", r.summary.samples_per_s, statistics.median(steady(rates)),
         "the median of its steady epochs' samples/s"),
    )
    for key, said, expected, what in checks:
        if said is None or not _close(said, expected, SUMMARY_TOLERANCE):
            return "its summary's %s is %s, but %s is %.6g" % (
                key, "%.6g" % said if said is not None else "missing", what, expected)
    last = r.epochs[-1]
    for key, said, found in (("test_acc", r.summary.final_test_acc, last.test_acc),
                             ("test_loss", r.summary.final_test_loss, last.test_loss)):
        if not _agree(said, found):
            return "its summary's final_%s is %s, but its last epoch's %s is %s" % (
                key, str(said)[:24], key, str(found)[:24])
    return None


def _memory(r: Result) -> str | None:
    """Peaks against what contains them: torch's allocated bytes lie in its reserved ones,
    and a container's peak in its memory limit."""
    allocated = _number(r.memory.get("gpu_peak_allocated_bytes"))
    reserved = _number(r.memory.get("gpu_peak_reserved_bytes"))
    if allocated is not None and reserved is not None and allocated > reserved:
        return ("its GPU memory peak allocated (%.0f bytes) exceeds the peak reserved (%.0f), "
                "which holds it" % (allocated, reserved))
    limit_text = (r.cell.resources or {}).get("memory")
    peak = _number(r.memory.get("cgroup_peak_bytes"))
    if isinstance(limit_text, str) and peak is not None:
        try:
            limit = size_bytes(limit_text)
        except (ValueError, TypeError):
            return None
        if peak > limit * 1.01:
            return ("its container's memory peak (%.0f bytes) exceeds the container's limit "
                    "of %s" % (peak, limit_text[:20]))
    return None


def _clock(r: Result) -> str | None:
    """The clock's bound is its marks times one mark's cost, and the clock cannot have cost
    an epoch more than the epoch lasted."""
    if r.clock is None:
        return None
    marks, mark_s, bound = r.clock.marks_per_epoch, r.clock.mark_s, r.clock.epoch_s_at_most
    if not _close(bound, marks * mark_s, 0.01) and abs(bound - marks * mark_s) > 2e-6:
        return ("its clock's bound (%.3g s an epoch) is not its %d marks times %.3g s a mark"
                % (bound, marks, mark_s))
    longest = max((e.wall_s for e in r.epochs), default=None)
    if longest is not None and bound > longest:
        return ("its clock's cost (%.3g s an epoch) is more than its longest epoch (%.3g s)"
                % (bound, longest))
    return None


def _times(r: Result, now: datetime | None = None) -> str | None:
    """The run's times in order: the epochs inside bench's run, bench's run inside the host's
    wall around its container, and a written_at that is a time and not a future one."""
    inside = sum(e.wall_s + (e.test_s or 0.0) for e in r.epochs)
    if r.run_s is not None and inside > r.run_s * (1 + PHASE_SLACK) + PHASE_SLACK_S:
        return ("its epochs and tests take %.6g s, more than bench's whole run of %.6g s"
                % (inside, r.run_s))
    if r.run_s is not None and r.host_s is not None and r.run_s > r.host_s + RUN_SLACK_S:
        return ("bench's run of %.6g s is longer than the host's wall of %.6g s around its "
                "container" % (r.run_s, r.host_s))
    if r.written_at:
        try:
            when = datetime.fromisoformat(r.written_at.replace("Z", "+00:00"))
        except ValueError:
            return "its written_at %r is not a time" % r.written_at[:40]
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        if when > (now or datetime.now(timezone.utc)) + FUTURE:
            return "it was written at %s, in the future" % r.written_at[:40]
    return None


def _names(r: Result) -> str | None:
    """Names that show what they are: no character that shows nothing or reorders the text
    (a zero-width space makes two rows that look the same), and names as NFKC writes them."""
    for key, value in (("environment", r.cell.environment), ("target", r.cell.target),
                       ("target_label", r.cell.target_label)):
        if value is None:
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


def contradiction(result: Result) -> str | None:
    """The first way ``result`` (a record valid by the schema, read) contradicts itself, or
    None."""
    for check in CHECKS:
        problem = check(result)
        if problem is not None:
            return problem
    return None
