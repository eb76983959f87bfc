"""The write-up's remaining techniques, measured: data-parallel scaling and the light models.

Scaling: each dp or ddp group against one device of the same stack, target, data and options
(``parallel: none``, else the same mode with world size 1), with speedup = one device's median
epoch / this group's, and efficiency = speedup / world size. ``batch_size`` is per device, so
this is weak scaling, the way the write-up quotes 1.7-1.9x on two GPUs.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from envbench.inference import stats
from envbench.report import grouping
from envbench.report.grouping import Group, Speedup
from envbench.results.identity import variant_text
from envbench.results.record import ModelInfo, Parallel

# The write-up's DDP figure: two GPUs train 1.7-1.9x as fast as one, flattening past four.
WRITE_UP_TWO_GPUS = (1.7, 1.9)
SCALING_OPTIONS = ("parallel", "nproc")


def parallel_of(g: Group) -> Parallel:
    """The group's parallel section (every record that ran has one; upgrades say 'none'), else
    what its options asked for."""
    for r in g.ok or g.records:
        if r.parallel is not None:
            return r.parallel
    config = g.config
    return Parallel(config["parallel"], config["nproc"] or 1, None, g.batch_size,
                    g.batch_size * (config["nproc"] or 1), None)


@dataclass
class ScalingRow:
    group: Group
    one_device: Group
    mode: str
    world_size: int
    speedup: Speedup

    @property
    def efficiency(self) -> float:
        return self.speedup.ratio / self.world_size

    @property
    def rest(self) -> str:
        """The group's swept options other than the parallel ones."""
        return variant_text({k: v for k, v in self.group.variant.items()
                             if k not in SCALING_OPTIONS})

    @property
    def per_device_batch(self) -> Any:
        return parallel_of(self.group).per_device_batch

    @property
    def global_batch(self) -> Any:
        return parallel_of(self.group).global_batch


def rows(groups: list[Group]) -> list[ScalingRow]:
    """Every dp/ddp group with a one-device counterpart, by environment, target, mode, size."""
    singles: dict[str, list[Group]] = {}
    for g in groups:
        if g.epoch_s is not None and parallel_of(g).world_size == 1:
            singles.setdefault(grouping.signature(g, SCALING_OPTIONS), []).append(g)
    out = []
    for g in groups:
        par = parallel_of(g)
        mode = par.mode
        if mode == "none" or g.epoch_s is None:
            continue
        candidates = [s for s in singles.get(grouping.signature(g, SCALING_OPTIONS), [])
                      if s is not g]
        if not candidates:
            continue
        # One device means the plain loop where it ran; else the same mode with one rank.
        one = min(candidates, key=lambda s: (parallel_of(s).mode != "none",
                                             parallel_of(s).mode != mode))
        speedup = grouping.speedup(g, one)
        if speedup is not None:
            out.append(ScalingRow(g, one, mode, par.world_size, speedup))
    return sorted(out, key=lambda r: (r.group.environment, r.group.target, r.rest, r.mode,
                                      r.world_size))


@dataclass
class ModelRow:
    group: Group
    model: ModelInfo
    quantized: dict[str, Any] | None


def model_rows(groups: list[Group]) -> list[ModelRow]:
    """A row per group where any cell trained a workload other than LeNet or ran a quantised
    test pass (and the LeNet rows beside them, so the others have something to be compared
    with)."""
    interesting = any(r.workload != "lenet" or r.config["quantize_eval"] != "off"
                      for g in groups for r in g.records)
    if not interesting:
        return []
    out = []
    for g in groups:
        ok = g.ok
        if not ok or ok[0].model is None:
            continue
        quantized = [r.quantized_eval for r in ok if r.quantized_eval]
        out.append(ModelRow(g, ok[0].model, _median_quantized(quantized)))
    return out


def _median_quantized(entries: list[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The repeats' quantised test passes: median of each figure."""
    if not entries:
        return None
    keys = ("float_test_acc", "float_test_s", "test_acc", "test_s", "float_weight_bytes",
            "weight_bytes")
    return {k: stats.median([e[k] for e in entries if e.get(k) is not None])
            if any(e.get(k) is not None for e in entries) else None for k in keys}
