"""How far each cell is from what its hardware can do: achieved FLOP/s against the matmul
probe's measured rate (achievable) and the GPU's datasheet peak (nominal).

Achieved is the workload's train-step FLOPs per sample (forward and backward, as bench
counted them) times the cell's samples per second. The probe ran in the cell's own process,
dtype and threads, on one device: a cell that trains on several (dp, ddp ranks) can reach
that many times it.
"""
from __future__ import annotations

from dataclasses import dataclass

from envbench import stats
from envbench.report import peaks
from envbench.report.grouping import Group


@dataclass(frozen=True)
class Efficiency:
    group: Group
    flops_per_sample: int | None       # train step: forward and backward of one sample
    achieved: float | None             # FLOP/s
    achievable: float | None           # FLOP/s: the probe's best rate x devices
    probe_dtype: str | None            # fp32, tf32, fp16, bf16
    probe_n: int | None
    devices: int
    nominal: float | None              # FLOP/s: the datasheet's peak x devices
    peak: peaks.Peak | None
    note: str | None

    @property
    def of_achievable(self) -> float | None:
        return _ratio(self.achieved, self.achievable)

    @property
    def of_nominal(self) -> float | None:
        return _ratio(self.achieved, self.nominal)


def _ratio(part: float | None, whole: float | None) -> float | None:
    return part / whole if part is not None and whole else None


def achieved(flops: int | None, samples_per_s: float | None) -> float | None:
    """FLOP/s a training run reached: train-step FLOPs per sample times samples per second."""
    return None if flops is None or samples_per_s is None else flops * samples_per_s


def of(g: Group) -> Efficiency:
    first = g.first
    model = first.model
    flops = model.flops_train if model else None
    devices = first.world_size
    probes = [r.probe for r in g.measured if r.probe is not None]
    rates = [p.flops_per_s for p in probes if p.flops_per_s]
    achievable = stats.median(rates) * devices if rates else None
    dtype = peaks.dtype_of(probes[0].dtype, probes[0].tf32) if probes else None
    sizes = [p.n for p in probes if p.n]
    peak = peaks.find(first.env.get("device_name")) if g.device == "cuda" else None
    per_device = peak.tflops(dtype) if peak is not None and dtype is not None else None
    notes = [p.note for p in probes if p.note][:1]
    if flops is None and model is not None and model.flops_note:
        notes.append(model.flops_note)
    return Efficiency(g, flops, achieved(flops, g.samples_per_s), achievable, dtype,
                      sizes[0] if sizes else None, devices,
                      per_device * 1e12 * devices if per_device else None, peak,
                      "; ".join(notes) or None)


def rows(groups: list[Group]) -> list[Efficiency]:
    """One row per group that finished, in the page's order, where anything is known."""
    out = [of(g) for g in groups if g.ok]
    return [e for e in out if e.achieved is not None or e.achievable is not None]
