"""matrix.yaml: environments (one image each), targets (where cells run) and the benchmark,
each in its own module (environments.py, targets.py, benchmark.py); here the whole matrix,
read and checked.

Validated with pydantic before anything runs; every problem is reported as
``key.path: reason``. See docs/matrix.md and docs/reference/matrix.md for the format.
"""
from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_core import ErrorDetails

from envbench import files
from envbench.matrix import grammars, yamlio
from envbench.matrix.benchmark import (
    RENAMED,
    SWEEPABLE,
    Benchmark,
    InputChoice,
    Settings,
    WorkloadChoice,
)
from envbench.matrix.environments import Environment
from envbench.matrix.fields import NAME, Strict, cpuset_size, shown
from envbench.matrix.grammars import size_bytes
from envbench.matrix.targets import CONTAINER_INFRA, LOCAL_POOL, RUNTIMES, Cloud, Slurm, Target
from envbench.user_errors import MatrixError

# The names the rest of the kit reads through this module.
__all__ = ["CONTAINER_INFRA", "LOCAL_POOL", "RENAMED", "RUNTIMES",
           "SWEEPABLE", "Benchmark", "Cloud", "Environment", "InputChoice", "Matrix",
           "Settings", "Slurm", "Target", "WorkloadChoice", "cpuset_size", "load", "parse",
           "size_bytes"]
MAX_CELLS = 10_000


class Matrix(Strict):
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

    @field_validator("environments")
    @classmethod
    def _image_names(cls, value: dict[str, Any]) -> dict[str, Any]:
        """Each environment names an image repository: a valid one, and its own."""
        seen: dict[str, str] = {}
        for name in value:
            repository = str(name).lower()
            problem = grammars.repository_component(repository)
            if problem is not None:
                raise ValueError("%r: %s (it becomes envbench/%s)" % (name, problem, repository))
            if repository in seen:
                raise ValueError("%r and %r would share the image envbench/%s: rename one"
                                 % (seen[repository], name, repository))
            seen[repository] = name
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

    @model_validator(mode="after")
    def _size(self) -> Matrix:
        count = self.cell_count()
        if count > MAX_CELLS:
            raise ValueError("the matrix expands to %d cells (at most %d): fewer environments, "
                             "targets, sweep values or repeats" % (count, MAX_CELLS))
        return self

    @model_validator(mode="after")
    def _parallel_fits_targets(self) -> Matrix:
        """ddp on a CPU target needs a rank count: without one every such cell would fail."""
        bench = self.benchmark
        modes = set(bench.sweep.get("parallel", (bench.parallel,)))
        counts = set(bench.sweep.get("nproc", (bench.nproc,)))
        if "ddp" not in modes or None not in counts:
            return self
        for env_name in self.environments:
            for target_name in self.targets_for(env_name):
                if self.targets[target_name].device == "cpu":
                    raise ValueError("benchmark.parallel: ddp on the CPU target %r needs "
                                     "benchmark.nproc (the number of processes to split its "
                                     "cores between)" % target_name)
        return self

    @model_validator(mode="after")
    def _nodes_fit_targets(self) -> Matrix:
        """A cell across nodes trains with ddp, on a Slurm target that allocates them; a
        Slurm allocation of N nodes has a cell that uses them."""
        bench = self.benchmark
        counts = set(bench.sweep.get("nodes", (bench.nodes,)))
        modes = set(bench.sweep.get("parallel", (bench.parallel,)))
        most = max(counts)
        if most > 1 and modes != {"ddp"}:
            raise ValueError("benchmark.nodes: %d needs benchmark.parallel: ddp in every cell "
                             "(the nodes train one model together)" % most)
        for env_name in self.environments:
            for target_name in self.targets_for(env_name):
                slurm = self.targets[target_name].slurm
                allocated = slurm.nodes if slurm is not None else 1
                if most > allocated:
                    raise ValueError(
                        "benchmark.nodes: %d, but %s" % (most, (
                            "targets.%s is not a Slurm target (a run across nodes is a "
                            "Slurm job's)" % target_name) if slurm is None else
                            "targets.%s.slurm.nodes allocates %d" % (target_name, allocated)))
                if slurm is not None and most < allocated:
                    raise ValueError(
                        "targets.%s.slurm.nodes: %d allocated, and no cell runs on more than "
                        "%d (set benchmark.nodes, or sweep: {nodes: [1, %d]})"
                        % (target_name, allocated, most, allocated))
        return self

    def cell_count(self) -> int:
        points = math.prod(len(values) for values in self.benchmark.sweep.values())
        pairs = sum(len(self.targets_for(name)) for name in self.environments)
        return pairs * points * self.benchmark.planned_repeats

    @property
    def needs_compiler(self) -> bool:
        """Whether cells use torch.compile: their images then get a C compiler."""
        bench = self.benchmark
        return bench.compile != "off" or any(v != "off" for v in bench.sweep.get("compile", ()))

    def targets_for(self, env_name: str) -> list[str]:
        """The targets an environment runs on: as listed, or every compatible one."""
        env = self.environments[env_name]
        if env.targets is not None:
            return list(env.targets)
        return [name for name, t in self.targets.items() if t.device == "cpu" or env.cuda]


def _format(error: ErrorDetails) -> str:
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
        message = "%s: %s" % (shown(error["input"]), message)
    # The sweep validator names the swept key first: fold it into the path.
    names_key = re.match(r"^[a-z_]+: ", message)
    if error["type"] == "value_error" and names_key and path.endswith("sweep"):
        key, _, message = message.partition(": ")
        path = "%s.%s" % (path, key)
    said = "%s: %s" % (path, message) if path else message
    # A validator may quote the value it refuses: a 100 kB value must not come back whole.
    return said if len(said) <= MAX_MESSAGE else "%s… (%d characters in all)" % (
        said[:MAX_MESSAGE], len(said))


MAX_MESSAGE = 300


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


MAX_MATRIX_BYTES = 1 << 20  # a matrix of every stack and GPU there is holds a few kB


def load(path: str | os.PathLike[str]) -> Matrix:
    path = Path(path)
    try:
        text = files.decode_utf8(files.read_regular(path, MAX_MATRIX_BYTES))
    except files.Unreadable as exc:
        raise MatrixError(str(path), ["cannot be read as a matrix: %s" % exc])
    return parse(text, str(path))
