"""A validated result, read through names: the one view the report, compare and the cloud
fan-out read records through.

``Result.of`` is given a record that passed the contract (envbench.results.contract), so the
fields the schema requires are there and of their type; nothing here re-checks them or
defends against their absence. Sections that are bags of named values (the options in
``config``, the fingerprint in ``env``, the memory peaks) stay read-only mappings, keyed as
the schema names them; the rest are small frozen dataclasses.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import Any

from bench.summary import steady
from envbench.results import identity
from envbench.results.identity import DataIdentity, Identity

_EMPTY: Mapping[str, Any] = MappingProxyType({})


def _frozen(section: Any) -> Mapping[str, Any]:
    return MappingProxyType(dict(section)) if isinstance(section, dict) else _EMPTY


@dataclass(frozen=True)
class Epoch:
    number: int
    wall_s: float
    samples: int
    samples_per_s: float
    phases_s: Mapping[str, float]
    train_loss: float | None
    test_acc: float | None
    test_s: float | None
    test_loss: float | None = None

    def phase(self, name: str) -> float:
        """Seconds of one phase (0 where the epoch did not record it)."""
        return self.phases_s.get(name) or 0.0


@dataclass(frozen=True)
class Order:
    """Where a repeat ran in its matrix run."""

    mode: str        # "interleaved" or "grouped"
    seed: int
    round: int
    position: int
    # Set where the run's repeats were auto: the most it would take (envbench.inference.looks).
    max_repeats: int | None = None


@dataclass(frozen=True)
class Noise:
    """What the host (and the GPU) did besides the cell while it ran."""

    contended: bool
    reasons: tuple[str, ...]
    host: Mapping[str, Any] | None
    gpu: Mapping[str, Any] | None
    unavailable: str | None


@dataclass(frozen=True)
class CellInfo:
    """The host's section: which cell of which matrix this result is."""

    environment: str | None
    target: str | None
    target_label: str | None   # the matrix's alias, not a measurement
    price_per_hour: float | None
    price_source: str | None
    repeat: int
    variant: Mapping[str, Any]
    id: str | None
    quick: bool
    resources: Mapping[str, Any] | None
    data: DataIdentity | None
    target_accuracy: float | None
    order: Order | None


@dataclass(frozen=True)
class Summary:
    epoch_s_median: float | None
    first_epoch_s: float | None
    samples_per_s: float | None
    final_test_acc: float | None
    weights_sha256: str | None
    forward_dtype: str | None
    final_test_loss: float | None = None


@dataclass(frozen=True)
class Parallel:
    mode: str
    world_size: int
    backend: str | None
    per_device_batch: int
    global_batch: int
    threads_per_rank: int | None
    repeated_samples_per_epoch: int = 0   # what DistributedSampler trains twice an epoch


@dataclass(frozen=True)
class Clock:
    """What the phase clock itself costs (the record's clock; absent in older results)."""

    marks_per_epoch: int
    mark_s: float              # one mark's host time
    epoch_s_at_most: float     # marks times a mark: the most the clock added to an epoch


@dataclass(frozen=True)
class ModelInfo:
    """What the workload trained (the record's model section)."""

    name: str
    parameters: int
    flops_per_image: int | None     # forward FLOPs of one sample
    unit: str                       # images, tokens or samples
    units_per_sample: int
    quality: str                    # accuracy or loss: what the page leads with
    flops_train: int | None         # forward and backward of one sample
    flops_method: str | None
    flops_note: str | None
    source: str                     # builtin or file
    sha256: str | None
    attention: str | None

    @classmethod
    def of(cls, model: Mapping[str, Any]) -> ModelInfo:
        flops = model.get("flops") or {}
        return cls(model["name"], model["parameters"], model["flops_per_image"],
                   model["unit"], model["units_per_sample"], model["quality"],
                   flops.get("train"), flops.get("method"), flops.get("note"),
                   model.get("source") or "builtin", model.get("sha256"),
                   model.get("attention"))


@dataclass(frozen=True)
class Operator:
    """One row of a profile: an operator's self time in the window and its share."""

    name: str
    calls: int
    self_cpu_s: float
    self_device_s: float | None
    share: float | None


@dataclass(frozen=True)
class Profile:
    """The operator profile bench took after the timed epochs (the record's profile)."""

    steps: int | None
    samples: int | None
    window_s: float | None
    ranked_by: str | None        # self_cpu or self_device: which time the shares are of
    total_s: float | None
    operators: tuple[Operator, ...]
    trace: str | None            # the gzipped Chrome trace's name, beside the result
    note: str | None

    @classmethod
    def of(cls, profile: Mapping[str, Any]) -> Profile:
        return cls(profile["steps"], profile["samples"], profile["window_s"],
                   profile["ranked_by"], profile["total_s"],
                   tuple(Operator(o["name"], o["calls"], o["self_cpu_s"], o["self_device_s"],
                                  o["share"]) for o in profile["operators"]),
                   profile["trace"], profile["note"])

    def per_step(self, operator: Operator) -> float | None:
        """Seconds of the ranking time one train step spends in ``operator``."""
        if not self.steps:
            return None
        spent = operator.self_device_s if self.ranked_by == "self_device" else \
            operator.self_cpu_s
        return None if spent is None else spent / self.steps


@dataclass(frozen=True)
class Probe:
    """The probes: the best rate this device reached in the cell's dtype, of a matmul and a
    convolution (older results: the matmul alone), and each one's own."""

    dtype: str
    flops_per_s: float | None
    n: int | None
    tf32: bool | None
    note: str | None
    kind: str | None = None              # which probe gave flops_per_s
    matmul_flops_per_s: float | None = None
    conv_flops_per_s: float | None = None

    @classmethod
    def of(cls, probe: Mapping[str, Any]) -> Probe:
        matmul = probe.get("matmul_flops_per_s", probe["flops_per_s"])  # older: matmul alone
        kind = probe.get("kind", "matmul" if probe["flops_per_s"] else None)
        return cls(probe["dtype"], probe["flops_per_s"], probe["n"], probe.get("tf32"),
                   probe["note"], kind, matmul, probe.get("conv_flops_per_s"))


@dataclass(frozen=True)
class Failure:
    type: str
    message: str


@dataclass(frozen=True, eq=False)
class Result:
    raw: Mapping[str, Any]     # the validated record as read (what the CSV and writers use)
    path: Path | None
    status: str
    error: Failure | None
    cell: CellInfo
    config: Mapping[str, Any]  # every bench option, as bench recorded it
    env: Mapping[str, Any]     # the stack's fingerprint, as bench measured it
    image: Mapping[str, Any]   # env.image: tag, id, base, base digest, lock
    epochs: tuple[Epoch, ...]
    memory: Mapping[str, Any]
    summary: Summary
    model: ModelInfo | None
    parallel: Parallel | None
    quantized_eval: Mapping[str, Any] | None
    written_at: str
    log_tail: tuple[str, ...]
    noise: Noise | None
    profile: Profile | None = None
    probe: Probe | None = None
    clock: Clock | None = None
    run_s: float | None = None    # bench's whole run, as bench timed it
    host_s: float | None = None   # the host's wall around the cell's container

    @classmethod
    def of(cls, record: dict[str, Any], path: Path | None = None) -> Result:
        """The view of a record that passed ``contract.check``."""
        cell, summary = record["cell"], record["summary"]
        data, order, noise = cell.get("data"), cell.get("order"), record.get("noise")
        clock = record.get("clock")
        error = record.get("error")
        parallel, model, quantized = (record.get(k) for k in ("parallel", "model",
                                                              "quantized_eval"))
        return cls(
            raw=MappingProxyType(record), path=path, status=record["status"],
            error=Failure(error["type"], error["message"]) if error else None,
            cell=CellInfo(cell["environment"], cell["target"], cell["target_label"],
                          cell["price_per_hour"], cell.get("price_source"),
                          cell["repeat"] or 0, _frozen(cell["variant"]), cell["id"],
                          bool(cell["quick"]),
                          _frozen(cell["resources"]) if cell["resources"] else None,
                          DataIdentity(data["source"], data["sha256"]) if data else None,
                          cell.get("target_accuracy"),
                          Order(order["mode"], order["seed"], order["round"], order["position"],
                                order.get("max_repeats"))
                          if order else None),
            config=_frozen(record["config"]), env=_frozen(record["env"]),
            image=_frozen(record["env"]["image"]),
            epochs=tuple(Epoch(e["epoch"], e["wall_s"], e["samples"], e["samples_per_s"],
                               _frozen(e["phases_s"]), e["train_loss"], e["test_acc"],
                               e["test_s"], e.get("test_loss")) for e in record["epochs"]),
            memory=_frozen(record["memory"]),
            summary=Summary(summary["epoch_s_median"], summary["first_epoch_s"],
                            summary["samples_per_s"], summary["final_test_acc"],
                            summary["weights_sha256"], summary["forward_dtype"],
                            summary.get("final_test_loss")),
            model=ModelInfo.of(model) if model else None,
            parallel=Parallel(parallel["mode"], parallel["world_size"], parallel["backend"],
                              parallel["per_device_batch"], parallel["global_batch"],
                              parallel["threads_per_rank"],
                              parallel.get("repeated_samples_per_epoch") or 0)
            if parallel else None,
            quantized_eval=_frozen(quantized) if quantized else None,
            written_at=str(record.get("written_at") or ""),
            log_tail=tuple(record.get("log_tail") or ()),
            noise=Noise(noise["contended"], tuple(noise["reasons"]),
                        _frozen(noise["host"]) if noise["host"] else None,
                        _frozen(noise["gpu"]) if noise["gpu"] else None,
                        noise["unavailable"]) if noise else None,
            profile=Profile.of(record["profile"]) if record.get("profile") else None,
            probe=Probe.of(record["probe"]) if record.get("probe") else None,
            clock=Clock(clock["marks_per_epoch"], clock["mark_s"], clock["epoch_s_at_most"])
            if clock else None,
            run_s=record.get("run_s"), host_s=record.get("host_s"))

    @property
    def ok(self) -> bool:
        """Finished, with at least one epoch to measure."""
        return self.status == "ok" and bool(self.epochs)

    @property
    def contended(self) -> bool:
        """Sensed to have shared its cores (or GPU) with something else while it ran."""
        return self.noise is not None and self.noise.contended

    @property
    def device(self) -> str:
        return str(self.config["device"])

    @property
    def workload(self) -> str:
        """What the cell trained (schema 3's `model`, upgraded on read)."""
        return str(self.config["workload"])

    @property
    def unit(self) -> str:
        """What a sample is counted in: images (older results, the LeNets), tokens..."""
        return self.model.unit if self.model else "images"

    @property
    def units_per_s(self) -> float | None:
        rate = self.summary.samples_per_s
        return None if rate is None else rate * (self.model.units_per_sample
                                                 if self.model else 1)

    @property
    def world_size(self) -> int:
        return self.parallel.world_size if self.parallel else 1

    @property
    def steady_epochs(self) -> tuple[Epoch, ...]:
        """The epochs after the warm-up one (the only one, if that is all there is)."""
        return tuple(steady(self.epochs))

    @cached_property
    def identity(self) -> Identity:
        return identity.of_record(dict(self.raw))
