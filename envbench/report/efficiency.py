"""How far each cell is from what its hardware can do: achieved FLOP/s against the probes'
measured rate (achievable: the better of a matmul and a convolution) and the GPU's datasheet
peak (nominal).

Achieved is the workload's train-step FLOPs per sample (forward and backward, as bench
counted them) times the cell's samples per second. The probes ran in the cell's own process,
dtype and threads, on one device: a cell that trains on several (dp, ddp ranks) can reach
that many times it.

A share above 100% is never printed as if it were one: a ceiling the cell beat is not its
ceiling, and the page says so in words (why_above). Where two stacks' probes differ by more
than 2x on the same hardware, that is a finding about the stacks' libraries (probe_gaps).
"""
from __future__ import annotations

from dataclasses import dataclass

from envbench.inference import stats
from envbench.report import mathlibs, peaks
from envbench.report.formats import flop_rate
from envbench.report.grouping import Group

# Two stacks' probes further apart than this, on the same hardware and dtype, are a finding.
GAP = 2.0
KINDS = {"matmul": "matmul", "conv": "3×3 convolution"}


@dataclass(frozen=True)
class Efficiency:
    group: Group
    flops_per_sample: int | None       # train step: forward and backward of one sample
    achieved: float | None             # FLOP/s
    achievable: float | None           # FLOP/s: the probes' best rate x devices
    probe_dtype: str | None            # fp32, tf32, fp16, bf16
    probe_n: int | None
    devices: int
    nominal: float | None              # FLOP/s: the datasheet's peak x devices
    peak: peaks.Peak | None
    note: str | None
    probe_kind: str | None = None      # which probe gave the achievable rate
    matmul: float | None = None        # FLOP/s of each probe, one device (medians)
    conv: float | None = None

    @property
    def of_achievable(self) -> float | None:
        """achieved / achievable, where it is a share (at most 100%)."""
        return _share(self.achieved, self.achievable)

    @property
    def of_nominal(self) -> float | None:
        return _share(self.achieved, self.nominal)

    @property
    def above_achievable(self) -> str | None:
        """Why no share is given where the cell outran its probes, in words."""
        ratio = _ratio(self.achieved, self.achievable)
        if ratio is None or ratio <= 1.0:
            return None
        probes = ", ".join("%s %s" % (KINDS[kind], flop_rate(rate)) for kind, rate in
                           (("matmul", self.matmul), ("conv", self.conv)) if rate)
        return ("above the probes (%s): this workload's kernels ran %.1f× faster than the "
                "best probe here, so the probes are not its ceiling on this stack (a "
                "convolution algorithm doing fewer multiplies than counted, e.g. Winograd, "
                "or TF32 on a GPU, does this); no share is given"
                % (probes or "no rate", ratio))

    @property
    def above_nominal(self) -> str | None:
        ratio = _ratio(self.achieved, self.nominal)
        if ratio is None or ratio <= 1.0:
            return None
        return ("above the datasheet's %s peak (%.1f×): the counted FLOPs are more than the "
                "kernels did, or they ran in a faster dtype than counted; no share is given"
                % (self.probe_dtype, ratio))


def _ratio(part: float | None, whole: float | None) -> float | None:
    return part / whole if part is not None and whole else None


def _share(part: float | None, whole: float | None) -> float | None:
    ratio = _ratio(part, whole)
    return ratio if ratio is not None and ratio <= 1.0 else None


def achieved(flops: int | None, samples_per_s: float | None) -> float | None:
    """FLOP/s a training run reached: train-step FLOPs per sample times samples per second."""
    return None if flops is None or samples_per_s is None else flops * samples_per_s


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v]
    return stats.median(known) if known else None


def of(g: Group) -> Efficiency:
    first = g.first
    model = first.model
    flops = model.flops_train if model else None
    devices = first.world_size
    probes = [r.probe for r in g.measured if r.probe is not None]
    best = _median([p.flops_per_s for p in probes])
    achievable = best * devices if best else None
    dtype = peaks.dtype_of(probes[0].dtype, probes[0].tf32) if probes else None
    sizes = [p.n for p in probes if p.n]
    kinds = [p.kind for p in probes if p.kind]
    peak = peaks.find(first.env.get("device_name")) if g.device == "cuda" else None
    per_device = peak.tflops(dtype) if peak is not None and dtype is not None else None
    notes = [p.note for p in probes if p.note][:1]
    if flops is None and model is not None and model.flops_note:
        notes.append(model.flops_note)
    return Efficiency(g, flops, achieved(flops, g.samples_per_s), achievable, dtype,
                      sizes[0] if sizes else None, devices,
                      per_device * 1e12 * devices if per_device else None, peak,
                      "; ".join(notes) or None,
                      max(set(kinds), key=kinds.count) if kinds else None,
                      _median([p.matmul_flops_per_s for p in probes]),
                      _median([p.conv_flops_per_s for p in probes]))


def rows(groups: list[Group]) -> list[Efficiency]:
    """One row per group that finished, in the page's order, where anything is known."""
    out = [of(g) for g in groups if g.ok]
    return [e for e in out if e.achieved is not None or e.achievable is not None]


def _stack(e: Efficiency) -> str:
    """'debian-torch1.13 (torch 1.13.1, BLAS generic)'."""
    env = e.group.first.env
    words = ["torch %s" % env["torch"]] if env.get("torch") else []
    blas = mathlibs.blas(env.get("math"))
    if blas:
        words.append("BLAS %s" % blas)
    return "%s (%s)" % (e.group.environment, ", ".join(words)) if words else \
        e.group.environment


def probe_gaps(found: list[Efficiency]) -> list[str]:
    """Findings, one sentence each: where two stacks' probes of one kind differ by more than
    GAP on the same hardware and dtype, the slowest against the fastest."""
    by_hardware: dict[tuple[str, str | None], dict[str, list[Efficiency]]] = {}
    for e in found:
        if e.group.hardware is None:
            continue  # not measured: no grounds to say the hardware was the same
        by_hardware.setdefault((e.group.hardware, e.probe_dtype), {}).setdefault(
            e.group.environment, []).append(e)
    out = []
    for (hardware, dtype), stacks in by_hardware.items():
        if len(stacks) < 2:
            continue
        for kind, label in KINDS.items():
            rates = {env: _median([getattr(e, kind) for e in rows_]) for env, rows_ in
                     stacks.items()}
            known = sorted((rate, env) for env, rate in rates.items() if rate)
            if len(known) < 2 or known[-1][0] < GAP * known[0][0]:
                continue
            (slow, slow_env), (fast, fast_env) = known[0], known[-1]
            out.append("%s: %s %s %s against %s for %s on this %s (%.0f× apart): the "
                       "stacks' libraries differ, not the hardware"
                       % (dtype or "?", _stack(stacks[slow_env][0]), label, flop_rate(slow),
                          flop_rate(fast), _stack(stacks[fast_env][0]), hardware,
                          fast / slow))
    return out
