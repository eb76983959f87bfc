"""matrix.yaml: environments (one image each), targets (where cells run) and the benchmark.

Validated with pydantic before anything runs; every problem is reported as
``key.path: reason``. See README.md ("The matrix") for the format.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal, Optional, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from envbench import yamlio
from envbench.errors import MatrixError

VERSION = re.compile(r"^\d+\.\d+(\.\d+)?([a-z]+\d*)?$")
CUDA_VERSION = re.compile(r"^\d+\.\d+$")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
IMAGE_REF = re.compile(r"^([a-z0-9][a-z0-9._/:@-]*|\$\{[A-Za-z_][A-Za-z0-9_]*\})$")
SWEEPABLE = ("batch_size", "amp", "pipeline", "compile", "channels_last", "accumulate", "workers")


def _version(value: Optional[str], what: str = "version") -> Optional[str]:
    if value is not None and not VERSION.match(str(value)):
        raise ValueError("%r is not a %s (expected e.g. 2.13.0)" % (value, what))
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Environment(_Strict):
    """One PyTorch/CUDA stack = one image."""

    python: str = "3.11"
    torch: Optional[str] = None
    torchvision: Optional[str] = None
    cuda: Optional[str] = None
    source: Literal["pip", "debian"] = "pip"
    base: Optional[str] = None
    dockerfile: Optional[str] = None
    index_url: Optional[str] = None
    wheelhouse: Optional[str] = None
    apt: tuple[str, ...] = ()
    targets: Optional[tuple[str, ...]] = None

    @field_validator("python", "torch", "torchvision")
    @classmethod
    def _versions(cls, value: Optional[str]) -> Optional[str]:
        return _version(value)

    @field_validator("python", "torch", "torchvision", "cuda", mode="before")
    @classmethod
    def _numbers_as_text(cls, value: Any) -> Any:
        # YAML reads `cuda: 11.6` as a float; accept it, but 11.10 would have become 11.1.
        return str(value) if isinstance(value, (int, float)) else value

    @field_validator("cuda")
    @classmethod
    def _cuda(cls, value: Optional[str]) -> Optional[str]:
        if value is not None and not CUDA_VERSION.match(value):
            raise ValueError("%r is not a CUDA version (expected MAJOR.MINOR, e.g. 12.4)" % value)
        return value

    @field_validator("base")
    @classmethod
    def _base(cls, value: Optional[str]) -> Optional[str]:
        if value is not None and not IMAGE_REF.match(value):
            raise ValueError("%r is not an image reference (name[:tag][@sha256:digest])" % value)
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Environment:
        if self.source == "pip" and self.torch is None:
            raise ValueError("torch: required for source 'pip' (the version to pin)")
        if self.source == "debian" and (self.cuda or self.index_url or self.wheelhouse):
            raise ValueError("source 'debian' installs Debian's CPU build of python3-torch: "
                             "cuda, index_url and wheelhouse do not apply")
        if self.index_url and self.wheelhouse:
            raise ValueError("give index_url or wheelhouse, not both")
        return self

    @property
    def kind(self) -> str:
        return "cuda" if self.cuda else "cpu"


class Target(_Strict):
    """Where a cell runs: a device, its resources, a label and a price."""

    device: Literal["cpu", "cuda"]
    label: str = Field(min_length=1)
    price_per_hour: float = Field(ge=0)
    gpus: Union[Literal["all"], int, None] = None
    cpus: Optional[float] = Field(default=None, gt=0)
    cpuset: Optional[str] = Field(default=None, pattern=r"^\d+(-\d+)?(,\d+(-\d+)?)*$")
    memory: Optional[str] = Field(default=None, pattern=r"^\d+[kmg]?$")
    timeout_s: int = Field(default=3600, ge=10)

    @model_validator(mode="after")
    def _gpus(self) -> Target:
        if self.device == "cpu" and self.gpus is not None:
            raise ValueError("gpus: a cpu target has no GPUs (remove gpus or use device: cuda)")
        if isinstance(self.gpus, int) and self.gpus < 1:
            raise ValueError("gpus: must be 'all' or a count >= 1")
        return self

    @property
    def gpu_count(self) -> int:
        """-1 for all GPUs (Docker's convention), 0 for none."""
        if self.device != "cuda":
            return 0
        return -1 if self.gpus in (None, "all") else int(self.gpus)


class Settings(_Strict):
    """The benchmark options of one cell (the sweepable ones can vary per cell)."""

    epochs: int = Field(default=5, ge=1)
    batch_size: int = Field(default=256, ge=1)
    pipeline: Literal["classic", "resident"] = "classic"
    workers: int = Field(default=2, ge=0)
    amp: Literal["off", "fp16", "bf16"] = "off"
    channels_last: bool = False
    compile: Literal["off", "default", "reduce-overhead", "max-autotune"] = "off"
    accumulate: int = Field(default=1, ge=1)
    threads: Optional[int] = Field(default=None, ge=1)
    seed: int = 0
    deterministic: bool = False
    limit: Optional[int] = Field(default=None, ge=1)
    limit_test: Optional[int] = Field(default=None, ge=1)

    @field_validator("amp", "compile", mode="before")
    @classmethod
    def _yaml_off(cls, value: Any) -> Any:
        return "off" if value is False else value  # YAML 1.1 reads a bare `off` as false


class Benchmark(Settings):
    repeats: int = Field(default=3, ge=1)
    data: Literal["cifar10", "synthetic"] = "cifar10"
    target_accuracy: Optional[float] = Field(default=None, gt=0, le=1)
    sweep: dict[str, tuple[Any, ...]] = Field(default_factory=dict)

    @field_validator("sweep")
    @classmethod
    def _sweep(cls, sweep: dict[str, tuple[Any, ...]]) -> dict[str, tuple[Any, ...]]:
        normalised = {}
        for key, values in sweep.items():
            if key not in SWEEPABLE:
                raise ValueError("%s: not sweepable (choose from %s)" % (key, ", ".join(SWEEPABLE)))
            if not values:
                raise ValueError("%s: empty list (give at least one value)" % key)
            if len(set(map(str, values))) != len(values):
                raise ValueError("%s: a value is repeated" % key)
            checked = []
            for value in values:
                try:
                    checked.append(getattr(Settings(**{key: value}), key))
                except ValidationError as exc:
                    raise ValueError("%s: %r: %s" % (key, value, exc.errors()[0]["msg"]))
            normalised[key] = tuple(checked)  # YAML's bare `off` (false) becomes "off"
        return normalised


class Matrix(_Strict):
    environments: dict[str, Environment] = Field(min_length=1)
    targets: dict[str, Target] = Field(min_length=1)
    benchmark: Benchmark = Field(default_factory=Benchmark)

    @field_validator("environments", "targets")
    @classmethod
    def _names(cls, value: dict[str, Any]) -> dict[str, Any]:
        for name in value:
            if not NAME.match(str(name)):
                raise ValueError("%r is not a valid name (letters, digits, '.', '_', '-'; "
                                 "it becomes an image tag and a file name)" % name)
        return value

    @model_validator(mode="after")
    def _targets_exist(self) -> Matrix:
        for env_name, env in self.environments.items():
            for i, target_name in enumerate(env.targets or ()):
                where = "environments.%s.targets[%d]" % (env_name, i)
                if target_name not in self.targets:
                    raise ValueError("%s: unknown target %r (defined: %s)"
                                     % (where, target_name, ", ".join(self.targets)))
                if self.targets[target_name].device == "cuda" and not env.cuda:
                    raise ValueError("%s: target %r needs CUDA but %s is a CPU-only stack "
                                     "(no cuda: key)" % (where, target_name, env_name))
        return self

    def targets_for(self, env_name: str) -> list[str]:
        """The targets an environment runs on: as listed, or every compatible one."""
        env = self.environments[env_name]
        if env.targets is not None:
            return list(env.targets)
        return [name for name, t in self.targets.items() if t.device == "cpu" or env.cuda]


def _format(error: dict[str, Any]) -> str:
    path = ".".join(str(p) for p in error["loc"])
    message = error["msg"]
    if message.startswith("Value error, "):
        message = message[len("Value error, "):]
    if error["type"] == "extra_forbidden":
        message = "unknown key"
    elif error["type"] == "missing":
        message = "required key is missing"
    elif "input" in error and error["type"] not in ("value_error",) and not isinstance(
            error["input"], (dict, list)):
        message = "%r: %s" % (error["input"], message)
    # The sweep validator names the swept key first: fold it into the path.
    names_key = re.match(r"^[a-z_]+: ", message)
    if error["type"] == "value_error" and names_key and path.endswith("sweep"):
        key, _, message = message.partition(": ")
        path = "%s.%s" % (path, key)
    return "%s: %s" % (path, message) if path else message


def parse(text: str, source: str = "matrix.yaml") -> Matrix:
    try:
        data = yamlio.load(text)
    except yamlio.DuplicateKeyError as exc:
        raise MatrixError(source, ["%s: %s" % (".".join(exc.path), exc)])
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = "line %d, column %d: " % (mark.line + 1, mark.column + 1) if mark else ""
        problem = getattr(exc, "problem", None) or exc
        raise MatrixError(source, ["%snot valid YAML (%s)" % (where, problem)])
    if not isinstance(data, dict):
        raise MatrixError(source, ["the file must be a mapping of environments, targets "
                                   "and benchmark"])
    try:
        return Matrix.model_validate(data)
    except ValidationError as exc:
        raise MatrixError(source, [_format(e) for e in exc.errors()])


def load(path: str | os.PathLike[str]) -> Matrix:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise MatrixError(str(path), ["cannot read the file (%s)" % exc.strerror])
    return parse(text, str(path))
