"""matrix.yaml's benchmark: what every cell trains and how (the settings a sweep may vary),
how many repeats, and the workloads, built in or the user's own with their inputs."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import Field, ValidationError, field_validator, model_validator

from bench import rules
from bench import workloads as catalog
from bench.rules import FUNCTION_NAME
from envbench.inference import verdicts
from envbench.matrix import grammars
from envbench.matrix.fields import Count, Flag, Strict, Text, shown

SWEEPABLE = ("batch_size", "amp", "pipeline", "compile", "channels_last", "accumulate", "workers",
             "workload", "parallel", "nproc", "nodes", "quantize_eval", "pin_memory",
             "non_blocking", "profile")
# The key's earlier name (a matrix written for the LeNets' sweep): read as `workload`.
RENAMED = {"model": "workload"}

WORKLOAD_NAME = rules.NAME
# An input's name: the key build() reads it under (ctx.inputs["weights"]) and a folder name.
INPUT_NAME = rules.json_schema_pattern(rules.INPUT_NAME)
SHA256 = rules.json_schema_pattern(rules.SHA256)
MAX_INPUTS = 16


class InputChoice(Strict):
    """A read-only input of a user's workload: a file or folder on this host (absolute, ~, a
    ${VAR}, or relative to the matrix's folder), and optionally the sha256 it must have."""

    path: Text
    sha256: Optional[Annotated[str, Field(strict=True, pattern=SHA256)]] = None

    @model_validator(mode="before")
    @classmethod
    def _bare_path(cls, value: Any) -> Any:
        return {"path": value} if isinstance(value, str) else value

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("an empty path")
        if "\0" in value or "\n" in value:
            raise ValueError("%r is not a path (it holds a NUL or a newline)" % value[:80])
        return value


class WorkloadChoice(Strict):
    """What a cell trains: a built-in workload by name, or the user's own (a file or folder
    beside the matrix and the function in it that builds it), with the settings that are
    its own (a batch size, limits); a matrix may write a built-in one as its bare name."""

    name: Optional[Text] = None
    file: Optional[Text] = None
    # A Python name (pydantic's regex engine ends a string at $, Python's at \Z).
    function: Optional[Annotated[str, Field(
        strict=True, pattern=rules.json_schema_pattern(FUNCTION_NAME))]] = None
    batch_size: Optional[Count] = None
    limit: Optional[Count] = None
    limit_test: Optional[Count] = None
    # Read-only files or folders of any size the workload reads (pretrained weights, a data
    # set of one's own), by the name build() finds them under: ctx.inputs["weights"].
    inputs: Optional[dict[Annotated[str, Field(strict=True, pattern=INPUT_NAME)],
                          InputChoice]] = None

    @model_validator(mode="before")
    @classmethod
    def _bare_name(cls, value: Any) -> Any:
        return {"name": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _known(self) -> WorkloadChoice:
        if self.file is None:
            if self.name is None:
                raise ValueError("name a built-in workload (%s) or give file: for your own"
                                 % ", ".join(catalog.NAMES))
            if catalog.info(self.name) is None:
                raise ValueError("unknown workload %r (built in: %s; your own: {file: PATH, "
                                 "function: build})" % (self.name, ", ".join(catalog.NAMES)))
            if self.function is not None:
                raise ValueError("function: needs file: (a built-in workload has none)")
            if self.inputs is not None:
                raise ValueError("inputs: needs file: (a built-in workload reads none; your "
                                 "own build(ctx) reads them at ctx.inputs[NAME])")
            return self
        if self.inputs is not None and len(self.inputs) > MAX_INPUTS:
            raise ValueError("inputs: %d of them; at most %d (a folder may hold many files)"
                             % (len(self.inputs), MAX_INPUTS))
        if grammars.VARIABLE.search(self.file) or self.file.startswith(("/", "~")):
            raise ValueError("file: %r: a path relative to the matrix's folder (no ${VAR}, "
                             "no absolute path)" % self.file)
        if self.name is not None and not WORKLOAD_NAME.match(self.name):
            raise ValueError("name: %r is not a valid name (letters, digits, '.', '_', '-'; "
                             "it becomes part of file names)" % self.name)
        if catalog.info(self.label) is not None:
            raise ValueError("name: %r is a built-in workload's name: give yours another "
                             "(name: ...)" % self.label)
        return self

    @property
    def label(self) -> str:
        """The name cells and the page show: as given, else the file's or folder's name."""
        if self.name is not None:
            return self.name
        stem = Path(str(self.file).rstrip("/")).name.removesuffix(".py")
        return re.sub(r"[^A-Za-z0-9._-]", "-", stem).lstrip("._-")[:63] or "workload"

    @property
    def builtin(self) -> bool:
        return self.file is None


DEFAULT_WORKLOAD = WorkloadChoice(name=catalog.DEFAULT)


class Settings(Strict):
    """The benchmark options of one cell (the sweepable ones can vary per cell)."""

    epochs: Annotated[int, Field(strict=True, ge=1, le=rules.MAX_EPOCHS)] = 5
    # None: each workload's own default (256 for the LeNets, the write-up's).
    batch_size: Optional[Count] = None
    pipeline: Literal["classic", "resident"] = "classic"
    workers: Annotated[int, Field(strict=True, ge=0, le=256)] = 2
    amp: Literal["off", "fp16", "bf16"] = "off"
    channels_last: Flag = False
    compile: Literal["off", "default", "reduce-overhead", "max-autotune"] = "off"
    accumulate: Count = 1
    threads: Optional[Count] = None
    seed: Annotated[int, Field(strict=True, ge=0, le=2**63 - 1)] = 0
    deterministic: Flag = False
    limit: Optional[Count] = None
    limit_test: Optional[Count] = None
    workload: WorkloadChoice = DEFAULT_WORKLOAD
    # --batch-size is per device: dp and ddp train nproc x batch_size images per step.
    parallel: Literal["none", "dp", "ddp"] = "none"
    nproc: Optional[Count] = None
    # ddp across this many nodes of a Slurm target's allocation (its slurm.nodes), nproc
    # ranks on each: sweep it ([1, 2, 4]) for the page's scaling by nodes.
    nodes: Annotated[int, Field(strict=True, ge=1, le=1024)] = 1
    quantize_eval: Literal["off", "dynamic"] = "off"
    # None: bench's default, on for cuda and off for cpu (a CPU run makes no device copies).
    pin_memory: Optional[Literal["on", "off"]] = None
    non_blocking: Optional[Literal["on", "off"]] = None
    # After the timed epochs: an operator profile (top operators, a Chrome trace; part of the
    # cell's identity), and the matmul probe behind "achieved / achievable" (on by default).
    profile: Flag = False
    probe: Flag = True

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, value: Any) -> Any:
        """`model:` is what a matrix said before workloads: read it as `workload:`."""
        if not isinstance(value, dict):
            return value
        for old, new in RENAMED.items():
            if old in value:
                if new in value:
                    raise ValueError("%s: and %s: both given: %s is %s's earlier name, give "
                                     "one" % (old, new, old, new))
                value = {(new if k == old else k): v for k, v in value.items()}
        return value

    @field_validator("amp", "compile", "quantize_eval", mode="before")
    @classmethod
    def _yaml_off(cls, value: Any) -> Any:
        return "off" if value is False else value  # YAML 1.1 reads a bare `off` as false

    @field_validator("pin_memory", "non_blocking", mode="before")
    @classmethod
    def _yaml_on_off(cls, value: Any) -> Any:
        # YAML 1.1 reads bare `on`/`off` as true/false; the file meant the words.
        return {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value


class Benchmark(Settings):
    # auto: at least 3 rounds, then more only where a comparison is still open, up to
    # max_repeats; an open comparison is one whose interval (at its look's share of the
    # level, envbench.inference.looks) straddles 1 and is wider than precision (a fraction: 0.03 is
    # 3%).
    repeats: Union[Annotated[int, Field(strict=True, ge=1, le=100)], Literal["auto"]] = 3
    max_repeats: Annotated[int, Field(strict=True, ge=verdicts.MIN_REPEATS, le=100)] = 10
    precision: Annotated[float, Field(strict=True, gt=0, lt=1)] = 0.03
    data: Literal["cifar10", "synthetic"] = "cifar10"
    target_accuracy: Optional[Annotated[float, Field(strict=True, gt=0, le=1)]] = None
    sweep: dict[str, tuple[Any, ...]] = Field(default_factory=dict)

    @field_validator("repeats", mode="before")
    @classmethod
    def _repeats(cls, value: Any) -> Any:
        if value == "auto" or (isinstance(value, int) and not isinstance(value, bool)
                               and 1 <= value <= 100):
            return value
        raise ValueError("%s: expected a number of repeats from 1 to 100, or auto"
                         % shown(value))

    @property
    def planned_repeats(self) -> int:
        """The repeats every cell gets before any is added (auto starts with 3)."""
        return verdicts.MIN_REPEATS if self.repeats == "auto" else self.repeats

    @field_validator("sweep", mode="before")
    @classmethod
    def _sweep_renamed(cls, sweep: Any) -> Any:
        if not isinstance(sweep, dict):
            return sweep
        for old, new in RENAMED.items():
            if old in sweep and new in sweep:
                raise ValueError("%s: and %s: both swept: %s is %s's earlier name, sweep one"
                                 % (old, new, old, new))
        return {RENAMED.get(k, k): v for k, v in sweep.items()}

    @field_validator("sweep")
    @classmethod
    def _sweep(cls, sweep: dict[str, tuple[Any, ...]]) -> dict[str, tuple[Any, ...]]:
        normalised = {}
        for key, values in sweep.items():
            if key not in SWEEPABLE:
                raise ValueError("%s: not sweepable (choose from %s)" % (key, ", ".join(SWEEPABLE)))
            if not values:
                raise ValueError("%s: empty list (give at least one value)" % key)
            checked = []
            for value in values:
                if value is None:
                    # A result's variant holds values, not "bench's default" (which differs
                    # by device): the cell would be written and then refused by the report.
                    raise ValueError("%s: null is not a value to sweep (name the values; "
                                     "leave the key out for bench's default)" % key)
                try:
                    checked.append(getattr(Settings(**{key: value}), key))
                except ValidationError as exc:
                    why = exc.errors()[0]["msg"].removeprefix("Value error, ")
                    raise ValueError("%s: %s: %s" % (key, shown(value), why))
            if len(set(map(repr, checked))) != len(checked):
                raise ValueError("%s: a value is repeated" % key)
            if key == "workload":
                labels = [w.label for w in checked]
                twice = sorted({label for label in labels if labels.count(label) > 1})
                if twice:
                    raise ValueError("workload: two workloads are named %s (give one a name:)"
                                     % ", ".join(twice))
            normalised[key] = tuple(checked)  # YAML's bare `off` (false) becomes "off"
        return normalised

    @model_validator(mode="after")
    def _one_batch_size_per_cell(self) -> Benchmark:
        swept = self.sweep.get("workload", (self.workload,))
        own = [w.label for w in swept if w.batch_size is not None]
        if own and "batch_size" in self.sweep:
            raise ValueError("sweep.batch_size and a batch_size of workload %s: give one (the "
                             "sweep sets every cell's batch size)" % ", ".join(own))
        return self

    @property
    def workloads(self) -> tuple[WorkloadChoice, ...]:
        """Every workload the cells train: the swept ones, else the one."""
        return tuple(self.sweep.get("workload", (self.workload,)))
