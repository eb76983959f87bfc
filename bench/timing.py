"""Per-phase timing of the train step that adds no synchronisation inside the step.

On CPU every phase is a perf_counter difference. On CUDA the device phases (h2d, forward,
backward, optimizer) are CUDA events recorded in the stream and read once at epoch end,
after the epoch's wall is taken (reading 5 events a step is no part of the epoch); ``data``
is host time spent waiting for the next batch, so it stays a perf_counter figure.

The clock is not free: each mark is a perf_counter read, and on CUDA an event created and
recorded as well (5 a step: at batch 32, about 7,800 an epoch of CIFAR-10). ``cost()``
measures what one mark costs the host in this very process, after the epochs, so that every
result carries the bound of what its clock added to its epochs: the marks times that cost.
On a GPU the host usually runs ahead of the device, where this cost hides under device work
entirely; it is a bound, not an estimate.
"""
from __future__ import annotations

from time import perf_counter

import torch

from bench.result import PHASES


class PhaseClock:
    def __init__(self, cuda):
        self.cuda = cuda
        self.totals = dict.fromkeys(PHASES, 0.0)
        self._spans = []
        self._last = perf_counter()
        self._last_event = None
        self.marks = 0  # in the current epoch

    def start_epoch(self):
        self.totals = dict.fromkeys(PHASES, 0.0)
        self._spans = []
        self._last_event = None
        self._last = perf_counter()
        self.marks = 0

    def mark(self, phase):
        """Close the phase that ran since the previous mark."""
        now = perf_counter()
        self.marks += 1
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            if phase != "data" and self._last_event is not None:
                self._spans.append((phase, self._last_event, event))
            self._last_event = event
        if phase == "data" or not self.cuda:
            self.totals[phase] += now - self._last
        self._last = now

    def synchronize(self):
        """Wait for the device's work of the epoch: the epoch's wall ends after this, and
        before resolve(), whose thousands of event reads are no part of the epoch."""
        if self.cuda:
            torch.cuda.synchronize()

    def resolve(self):
        """Seconds per phase for the epoch (on CUDA after synchronize(): the events are
        complete, and this only reads them)."""
        if self.cuda:
            torch.cuda.synchronize()
            for phase, start, end in self._spans:
                self.totals[phase] += start.elapsed_time(end) / 1000.0
            self._spans = []
        return {phase: round(seconds, 6) for phase, seconds in self.totals.items()}


CALIBRATION_MARKS = 5000
_CYCLE = ("data", "h2d", "forward", "backward", "optimizer")  # one step's marks, in order


def cost(cuda, marks=CALIBRATION_MARKS):
    """Host seconds one mark costs here: a throwaway clock makes ``marks`` marks in a step's
    order (on CUDA, events created and recorded on the current stream, as in the epochs) and
    the time is divided by them. Reading the events afterwards is no part of it, as it is no
    part of an epoch."""
    clock = PhaseClock(cuda)
    if cuda:
        torch.cuda.synchronize()
    clock.start_epoch()
    start = perf_counter()
    for i in range(marks):
        clock.mark(_CYCLE[i % len(_CYCLE)])
    took = perf_counter() - start
    clock.synchronize()
    clock.resolve()
    return took / marks


def section(marks_per_epoch, mark_s):
    """The result's ``clock`` section: the last epoch's marks, one mark's cost, and their
    product, the most the clock can have added to an epoch's wall."""
    mark_s = round(mark_s, 9)  # the product is of the figure written, as a reader checks it
    return {"marks_per_epoch": int(marks_per_epoch), "mark_s": mark_s,
            "epoch_s_at_most": round(marks_per_epoch * mark_s, 6)}


class NoClock:
    """The clock of steps that are not timed (the profile window): marks nothing."""

    def mark(self, phase):
        pass
