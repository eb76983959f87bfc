"""bench's summary and its phase clock, in process: the figures every report starts from."""
from __future__ import annotations

import pytest

from bench import summary, timing
from bench.result import PHASES


def _epochs(walls, rates=None, accs=None):
    rates = rates or [100.0 / w for w in walls]
    accs = accs or [0.1 * (i + 1) for i in range(len(walls))]
    return [{"wall_s": w, "samples_per_s": r, "test_acc": a, "test_loss": 3.0 - a}
            for w, r, a in zip(walls, rates, accs)]


def test_the_epoch_time_is_the_median_after_the_warm_up_epoch():
    # Warm-up 10 s, then 4, 9, 5: the median of the three is 5 (their mean is 6, the median
    # of all four 7, the first 10): each wrong rule gives another number.
    out = summary.summarise(_epochs([10.0, 4.0, 9.0, 5.0], rates=[50.0, 30.0, 10.0, 20.0],
                                    accs=[0.2, 0.3, 0.5, 0.4]), "ab" * 32, "bfloat16")
    assert out == {"epoch_s_median": 5.0, "first_epoch_s": 10.0, "samples_per_s": 20.0,
                   "final_test_acc": 0.4, "final_test_loss": 2.6, "weights_sha256": "ab" * 32,
                   "forward_dtype": "bfloat16"}


def test_an_even_count_of_steady_epochs_takes_the_middle_two():
    out = summary.summarise(_epochs([9.0, 1.0, 2.0, 4.0, 8.0]), None, "float32")
    assert out["epoch_s_median"] == 3.0  # (2 + 4) / 2
    assert out["samples_per_s"] == pytest.approx((100 / 2 + 100 / 4) / 2)


def test_one_epoch_reports_that_epoch_and_none_reports_nothing():
    one = summary.summarise(_epochs([7.0], rates=[14.0], accs=[0.25]), None, "float32")
    assert (one["epoch_s_median"], one["first_epoch_s"], one["samples_per_s"],
            one["final_test_acc"]) == (7.0, 7.0, 14.0, 0.25)
    none = summary.summarise([], None, "float32")
    assert (none["epoch_s_median"], none["first_epoch_s"], none["samples_per_s"],
            none["final_test_acc"]) == (None, None, None, None)


class Clock:
    """perf_counter, advanced by the test."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_the_cpu_phase_clock_charges_each_span_to_the_phase_that_closes_it(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(timing, "perf_counter", clock)
    phases = timing.PhaseClock(cuda=False)  # used at once: the first epoch needs no reset
    for _ in range(2):
        for phase, seconds in (("data", 0.5), ("h2d", 0.25), ("forward", 1.0),
                               ("backward", 2.0), ("optimizer", 0.125)):
            clock.now += seconds
            phases.mark(phase)
    assert phases.resolve() == {"data": 1.0, "h2d": 0.5, "forward": 2.0, "backward": 4.0,
                                "optimizer": 0.25}
    # Time between epochs (evaluation, say) is not charged: a new epoch starts from zero.
    clock.now += 30.0
    phases.start_epoch()
    clock.now += 0.1234567
    phases.mark("forward")
    got = phases.resolve()
    assert got["forward"] == 0.123457 and set(got) == set(PHASES)
    assert sum(got.values()) == got["forward"]


class GpuClock:
    """A CUDA stream's clock, for stand-in events: what torch.cuda.Event would measure."""

    def __init__(self):
        self.ms = 0.0
        self.synchronised = 0

    def event_class(self):
        gpu = self

        class Event:
            def __init__(self, enable_timing=False):
                # A real event made without timing refuses elapsed_time().
                assert enable_timing is True, "events must be created with enable_timing=True"
                self.at = None

            def record(self):
                self.at = gpu.ms

            def elapsed_time(self, end):
                assert self.at is not None and end.at is not None, "an unrecorded event"
                return end.at - self.at

        return Event

    def synchronize(self):
        self.synchronised += 1


def test_the_cuda_phase_clock_times_device_phases_by_events_and_data_by_the_host(monkeypatch):
    """Device phases come from events (the GPU's time, whatever the host did meanwhile);
    data is the host's wait; one synchronisation per epoch, at resolve."""
    clock, gpu = Clock(), GpuClock()
    monkeypatch.setattr(timing, "perf_counter", clock)
    monkeypatch.setattr(timing.torch.cuda, "Event", gpu.event_class())
    monkeypatch.setattr(timing.torch.cuda, "synchronize", gpu.synchronize)
    phases = timing.PhaseClock(cuda=True)
    for _ in range(2):
        clock.now += 0.5      # waiting for the batch: host time
        gpu.ms += 7.0         # the GPU finishing the step before: charged to nothing
        phases.mark("data")
        for phase, ms in (("h2d", 250.0), ("forward", 1000.0), ("backward", 2000.0),
                          ("optimizer", 125.0)):
            clock.now += 0.01  # the host only queues the work
            gpu.ms += ms
            phases.mark(phase)
    assert gpu.synchronised == 0  # nothing waits on the GPU inside the step
    assert phases.resolve() == {"data": 1.0, "h2d": 0.5, "forward": 2.0, "backward": 4.0,
                                "optimizer": 0.25}
    assert gpu.synchronised == 1
    # Resolving again adds nothing (the spans were consumed); the next epoch starts clean.
    assert phases.resolve()["forward"] == 2.0
    phases.start_epoch()
    gpu.ms += 900.0
    phases.mark("h2d")  # no event yet in this epoch: nothing to measure from
    clock.now += 0.25
    phases.mark("data")
    gpu.ms += 40.0
    phases.mark("forward")
    assert phases.resolve() == {"data": 0.25, "h2d": 0.0, "forward": 0.04, "backward": 0.0,
                                "optimizer": 0.0}


def test_the_first_device_phase_of_an_epoch_needs_an_event_before_it(monkeypatch):
    """A device phase with no event before it in this epoch has no span to measure: it
    counts nothing rather than time from the previous epoch."""
    clock, gpu = Clock(), GpuClock()
    monkeypatch.setattr(timing, "perf_counter", clock)
    monkeypatch.setattr(timing.torch.cuda, "Event", gpu.event_class())
    monkeypatch.setattr(timing.torch.cuda, "synchronize", gpu.synchronize)
    phases = timing.PhaseClock(cuda=True)
    gpu.ms += 500.0
    phases.mark("forward")   # nothing before it
    gpu.ms += 30.0
    phases.mark("backward")  # measured from forward's event
    assert phases.resolve() == {"data": 0.0, "h2d": 0.0, "forward": 0.0, "backward": 0.03,
                                "optimizer": 0.0}
