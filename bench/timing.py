"""Per-phase timing of the train step that adds no synchronisation inside the step.

On CPU every phase is a perf_counter difference. On CUDA the device phases (h2d, forward,
backward, optimizer) are CUDA events recorded in the stream and read once at epoch end,
after the epoch's wall is taken (reading 5 events a step is no part of the epoch); ``data``
is host time spent waiting for the next batch, so it stays a perf_counter figure.
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

    def start_epoch(self):
        self.totals = dict.fromkeys(PHASES, 0.0)
        self._spans = []
        self._last_event = None
        self._last = perf_counter()

    def mark(self, phase):
        """Close the phase that ran since the previous mark."""
        now = perf_counter()
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


class NoClock:
    """The clock of steps that are not timed (the profile window): marks nothing."""

    def mark(self, phase):
        pass
