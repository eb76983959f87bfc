"""matrix.yaml: environments (one image each), targets (where cells run) and the benchmark.

Validated with pydantic before anything runs; every problem is reported as
``key.path: reason``. See docs/matrix.md and docs/reference/matrix.md for the format.
"""
from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails

from bench import rules
from bench import workloads as catalog
from bench.rules import FUNCTION_NAME
from envbench import files, verdicts
from envbench.matrix import grammars, yamlio
from envbench.matrix.grammars import size_bytes
from envbench.user_errors import MatrixError

VERSION = re.compile(r"^\d+\.\d+(\.\d+)?([a-z]+\d*)?\Z")
CUDA_VERSION = re.compile(r"^\d+\.\d+\Z")
NAME = rules.NAME
CPUSET = r"^\d+(-\d+)?(,\d+(-\d+)?)*$"
SIZE = r"^\d+[kmg]?$"  # Docker's --memory grammar, lower-case units
SWEEPABLE = ("batch_size", "amp", "pipeline", "compile", "channels_last", "accumulate", "workers",
             "workload", "parallel", "nproc", "quantize_eval", "pin_memory", "non_blocking",
             "profile")
# The key's earlier name (a matrix written for the LeNets' sweep): read as `workload`.
RENAMED = {"model": "workload"}
MAX_CELLS = 10_000
WEEK_S = 7 * 24 * 3600

# Strict scalars: YAML's `true` is no count, `2.0` no batch size and `"0.35"` no price.
Count = Annotated[int, Field(strict=True, ge=1)]
Price = Annotated[float, Field(strict=True, ge=0, allow_inf_nan=False)]
Text = Annotated[str, Field(strict=True)]
Flag = Annotated[bool, Field(strict=True)]


def _version(value: Optional[str], what: str = "version") -> Optional[str]:
    if value is not None and not VERSION.match(str(value)):
        raise ValueError("%r is not a %s (expected e.g. 2.13.0)" % (value, what))
    return value


def _not_a_number(value: Any, info: ValidationInfo) -> Any:
    """Versions are text: YAML reads `python: 3.10` as the number 3.1 and `cuda: 12.10` as 12.1."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        written = getattr(value, "source", repr(value))
        raise ValueError('%s was read as a number, which can lose digits (YAML reads 3.10 as '
                         '3.1): quote it: `%s: "%s"`' % (written, info.field_name, written))
    return value


def _refuse(problem: Optional[str]) -> None:
    if problem is not None:
        raise ValueError(problem)


def shown(value: Any) -> str:
    """A value as the YAML file spelt it: `true`, `3.10`, `'0.35'`."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    text = getattr(value, "source", None) or repr(value)
    return text if len(text) <= SHOWN else text[:SHOWN] + "… (%d characters)" % len(text)


SHOWN = 80  # an error message quotes at most this much of a value


MIN_MEMORY = 64 * 2**20  # below this no torch starts; Docker's own floor is 6m


MAX_CPU = 8191  # Linux's largest CPU number (NR_CPUS is at most 8192)


def cpuset_ranges(cpuset: str) -> list[tuple[int, int]]:
    """The (first, last) CPU of each part of a cpuset such as '0-3,8', bounded: a CPU past
    MAX_CPU or a range that runs backwards is a ValueError naming it (a set of every number
    up to 10^20 is never built)."""
    ranges = []
    for part in cpuset.split(","):
        low_text, _, high_text = part.partition("-")
        if len(low_text) > 5 or len(high_text) > 5:
            raise ValueError("CPU %s is past the largest Linux numbers (%d)"
                             % (shown(part), MAX_CPU))
        low, high = int(low_text), int(high_text or low_text)
        if high > MAX_CPU:
            raise ValueError("CPU %d is past the largest Linux numbers (%d)" % (high, MAX_CPU))
        if high < low:
            raise ValueError("%s runs backwards" % shown(part))
        ranges.append((low, high))
    return ranges


def cpuset_size(cpuset: str) -> int:
    """How many CPUs a cpuset such as '0-3,8' names."""
    cpus: set[int] = set()
    for low, high in cpuset_ranges(cpuset):
        cpus.update(range(low, high + 1))
    return len(cpus)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Environment(_Strict):
    """One PyTorch/CUDA stack = one image."""

    python: Text = "3.11"
    torch: Optional[Text] = None
    torchvision: Optional[Text] = None
    cuda: Optional[Text] = None
    source: Literal["pip", "debian"] = "pip"
    base: Optional[Text] = None
    dockerfile: Optional[Text] = None
    index_url: Optional[Text] = None
    wheelhouse: Optional[Text] = None
    apt: tuple[Text, ...] = ()
    # What a user's workload imports beyond torch: locked with hashes with the rest.
    packages: tuple[Text, ...] = ()
    # numpy beside torch in a pip stack: torch warns in every cell's log without it, and the
    # tutorial uses it. Debian's python3-torch depends on it anyway.
    numpy: Flag = True
    targets: Optional[tuple[Text, ...]] = None
    # The wheel platform the lock resolves for; default: this machine's, with the glibc of
    # Debian bookworm (python:*-slim and the local Debian base).
    platform: Optional[Annotated[str, Field(strict=True,
                                            pattern=r"^(x86_64|aarch64)-manylinux_2_\d+$")]] = None

    @field_validator("python", "torch", "torchvision")
    @classmethod
    def _versions(cls, value: Optional[str]) -> Optional[str]:
        return _version(value)

    _numbers = field_validator("python", "torch", "torchvision", "cuda",
                               mode="before")(_not_a_number)

    @field_validator("cuda")
    @classmethod
    def _cuda(cls, value: Optional[str]) -> Optional[str]:
        if value is not None and not CUDA_VERSION.match(value):
            raise ValueError("%r is not a CUDA version (expected MAJOR.MINOR, e.g. 12.4)" % value)
        return value

    @field_validator("base")
    @classmethod
    def _base(cls, value: Optional[str]) -> Optional[str]:
        # With ${VAR}s the expanded value is checked when the image is planned.
        if value is not None and not grammars.VARIABLE.search(value):
            _refuse(grammars.image_reference(value))
        return value

    @field_validator("index_url")
    @classmethod
    def _index_url(cls, value: Optional[str]) -> Optional[str]:
        if value is not None and not grammars.VARIABLE.search(value):
            _refuse(grammars.index_url(value))
        if value is not None:
            _refuse(grammars.url_variables(value))
        return value

    @field_validator("apt")
    @classmethod
    def _apt(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            _refuse(grammars.debian_package(name))
        return value

    @field_validator("packages")
    @classmethod
    def _packages(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for requirement in value:
            _refuse(grammars.pip_requirement(requirement))
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Environment:
        if self.source == "pip" and self.torch is None:
            raise ValueError("torch: required for source 'pip' (the version to pin)")
        if self.source == "debian" and (self.cuda or self.index_url or self.wheelhouse):
            raise ValueError("source 'debian' installs Debian's CPU build of python3-torch: "
                             "cuda, index_url and wheelhouse do not apply")
        if self.source == "debian" and self.packages:
            raise ValueError("packages: a Debian stack installs Debian's packages: name them "
                             "in apt (e.g. python3-einops)")
        if self.index_url and self.wheelhouse:
            raise ValueError("give index_url or wheelhouse, not both")
        return self

    @property
    def kind(self) -> str:
        return "cuda" if self.cuda else "cpu"


ACCELERATORS = r"^[A-Za-z][A-Za-z0-9_-]{0,40}(:[1-9][0-9]?)?$"
INFRA = r"^[a-z0-9]+(/[A-Za-z0-9_.-]+){0,2}$"
INSTANCE = r"^[A-Za-z0-9_.:-]{1,80}$"


# SkyPilot infra whose machines are containers (no Docker engine inside), and why.
CONTAINER_INFRA = {
    "k8s": "Kubernetes pods are containers",
    "kubernetes": "Kubernetes pods are containers",
    "ssh": "SkyPilot's SSH node pools run their jobs in Kubernetes pods, which are containers",
    "runpod": "RunPod's machines are containers",
    "vast": "Vast.ai's machines are containers",
}
LOCAL_POOL = "local"  # ssh/local: the local launcher's pool of sshd "VMs"


class Cloud(_Strict):
    """A target that lives in a cloud: SkyPilot provisions a VM for it (./noxw -s cloud).

    A cuda target names its accelerators; a cpu target has none (the CPU baseline on a cloud
    VM: instance_type, or SkyPilot's default CPU VM)."""

    accelerators: Optional[Annotated[str, Field(strict=True, pattern=ACCELERATORS)]] = None
    # aws, gcp/us-central1, lambda: SkyPilot's infra grammar (cloud[/region[/zone]]); VM
    # clouds only (see _a_vm).
    infra: Optional[Annotated[str, Field(strict=True, pattern=INFRA)]] = None
    instance_type: Optional[Annotated[str, Field(strict=True, pattern=INSTANCE)]] = None
    use_spot: Flag = False
    # SkyPilot's own default: a CUDA stack takes about 18 GB while it builds (images/footprint).
    disk_size: Annotated[int, Field(strict=True, ge=20, le=65536)] = 256  # GB
    autostop_minutes: Annotated[int, Field(strict=True, ge=1, le=10080)] = 30

    @field_validator("infra")
    @classmethod
    def _a_vm(cls, value: Optional[str]) -> Optional[str]:
        """Infra whose "machines" are containers has no Docker engine to build and run the
        images in: every cell would fail after the machine is paid for."""
        kind = (value or "").split("/")[0]
        if value == "ssh/%s" % LOCAL_POOL:
            return value  # the local launcher's sshd VMs (--launcher local)
        if kind in CONTAINER_INFRA:
            raise ValueError("%s: %s; the kit needs a VM with a Docker engine (aws, gcp, "
                             "azure, lambda, ...)" % (value, CONTAINER_INFRA[kind]))
        return value

    @property
    def accelerator(self) -> tuple[str, int]:
        name, _, count = (self.accelerators or "").partition(":")
        return name, int(count or 1)

    @property
    def cloud_name(self) -> str | None:
        return self.infra.split("/")[0] if self.infra else None

    @property
    def region(self) -> str | None:
        parts = (self.infra or "").split("/")
        return parts[1] if len(parts) > 1 and parts[0] not in ("k8s", "ssh") else None


# Slurm's own grammars: a partition, account or QOS name; a GRES such as gpu:h100:2; a time
# limit as sbatch takes it (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS); a node list
# such as gpu[01-04],gpu07; a feature expression such as "a100&ib".
SLURM_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
GRES = r"^[a-z][a-z0-9_-]{0,31}(:[A-Za-z0-9_.-]{1,40})?(:[1-9][0-9]{0,2})?$"
SLURM_TIME = r"^(\d+|\d+:\d{2}|\d+:\d{2}:\d{2}|\d+-\d{1,2}(:\d{2}){0,2})$"
NODELIST = r"^[A-Za-z0-9_.,\[\]-]{1,200}$"
CONSTRAINT = r"^[A-Za-z0-9_.&|!*\[\]():-]{1,200}$"
RUNTIMES = ("podman", "apptainer", "pyxis")
_NAME_WORDS = "a Slurm name (letters, digits, '_', '.', '-'; 64 at most)"
SLURM_GRAMMARS = {
    "partition": (SLURM_NAME, _NAME_WORDS), "account": (SLURM_NAME, _NAME_WORDS),
    "qos": (SLURM_NAME, _NAME_WORDS),
    "time": (SLURM_TIME, "a time limit as sbatch reads it: minutes, MM:SS, HH:MM:SS, D-HH, "
                         "D-HH:MM or D-HH:MM:SS (e.g. \"04:00:00\")"),
    "gres": (GRES, "a GRES as gpu[:type][:count] (e.g. \"gpu:h100:2\")"),
    "constraint": (CONSTRAINT, "a feature expression (e.g. \"a100&ib\")"),
    "nodelist": (NODELIST, "a node list (e.g. \"gpu[01-04],gpu07\")"),
}


class Slurm(_Strict):
    """A target on a Slurm cluster (./noxw -s slurm): one batch job per target, its cells as job
    steps in a container runtime the nodes have, images and results in ``shared_dir``."""

    partition: Annotated[str, Field(strict=True, pattern=SLURM_NAME)]
    # A GPU count (sbatch --gpus) or a GRES string (--gres), not both.
    gpus: Optional[Annotated[int, Field(strict=True, ge=1, le=64)]] = None
    gres: Optional[Annotated[str, Field(strict=True, pattern=GRES)]] = None
    time: Annotated[str, Field(strict=True, pattern=SLURM_TIME)]
    account: Optional[Annotated[str, Field(strict=True, pattern=SLURM_NAME)]] = None
    qos: Optional[Annotated[str, Field(strict=True, pattern=SLURM_NAME)]] = None
    constraint: Optional[Annotated[str, Field(strict=True, pattern=CONSTRAINT)]] = None
    nodelist: Optional[Annotated[str, Field(strict=True, pattern=NODELIST)]] = None
    # A verdict taken on a node shared with other jobs is their noise: the node is the job's
    # unless the user says otherwise.
    exclusive: Flag = True
    runtime: Literal["podman", "apptainer", "pyxis"] = "podman"
    # A folder every node sees at the same path: images, data, the user's code and results.
    shared_dir: Annotated[str, Field(strict=True, min_length=2, max_length=400)]

    @field_validator("partition", "account", "qos", "time", "gres", "constraint", "nodelist",
                     mode="before")
    @classmethod
    def _slurms_grammar(cls, value: Any, info: ValidationInfo) -> Any:
        """Each value as sbatch reads it, refused in words before the pattern (which the
        reference shows) would be quoted at the user as a regular expression."""
        grammar, words = SLURM_GRAMMARS[info.field_name or ""]
        if isinstance(value, str) and not re.match(grammar, value):
            raise ValueError("%s is not %s" % (shown(value), words))
        return value

    @field_validator("shared_dir")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError("%s: shared_dir must be an absolute path (the login node and "
                             "every compute node see it at the same place)" % shown(value))
        if any(ch in value for ch in "\n\r\t:,\x00"):
            raise ValueError("%s: shared_dir holds a character a container mount cannot take "
                             "(newline, tab, ':' or ',')" % shown(value))
        return value

    @field_validator("gres")
    @classmethod
    def _a_gpu_gres(cls, value: Optional[str]) -> Optional[str]:
        if value is not None and not value.startswith("gpu"):
            raise ValueError("%s: gres names the GPUs a cell gets (gpu[:type]:count); other "
                             "resources are the partition's business" % shown(value))
        return value

    @model_validator(mode="after")
    def _gpus_once(self) -> Slurm:
        if self.gpus is not None and self.gres is not None:
            raise ValueError("gpus and gres both ask for GPUs: give one of them")
        return self

    @property
    def gpu_count(self) -> int:
        """How many GPUs the job asks for (0: none)."""
        if self.gpus is not None:
            return self.gpus
        if self.gres is None:
            return 0
        last = self.gres.rsplit(":", 1)[-1]
        return int(last) if last.isdigit() else 1


class Target(_Strict):
    """Where a cell runs: a device and its resources. The report names the hardware by what
    bench measured; ``label`` is an optional alias shown beside it."""

    device: Literal["cpu", "cuda"]
    label: Optional[Annotated[str, Field(strict=True, min_length=1, max_length=80)]] = None
    price_per_hour: Optional[Price] = None
    gpus: Union[Literal["all"], int, None] = None
    cpus: Optional[Count] = None
    cpuset: Optional[Annotated[str, Field(strict=True, pattern=CPUSET)]] = None
    memory: Optional[Annotated[str, Field(strict=True, pattern=SIZE)]] = None
    swap: Optional[Annotated[str, Field(strict=True, pattern=SIZE)]] = None
    timeout_s: Annotated[int, Field(strict=True, ge=10, le=WEEK_S)] = 3600
    cloud: Optional[Cloud] = None
    slurm: Optional[Slurm] = None

    @field_validator("gpus", mode="before")
    @classmethod
    def _gpu_count(cls, value: Any) -> Any:
        if value is None or value == "all" or (isinstance(value, int)
                                               and not isinstance(value, bool) and value >= 1):
            return value
        raise ValueError("%s: expected 'all' or a number of GPUs >= 1" % shown(value))

    @field_validator("cpuset")
    @classmethod
    def _cpuset_bounds(cls, value: Optional[str]) -> Optional[str]:
        if value is not None:
            cpuset_ranges(value)
        return value

    @field_validator("label")
    @classmethod
    def _label_shows_what_it_says(cls, value: Optional[str]) -> Optional[str]:
        hidden = files.hidden_character(value) if value is not None else None
        if hidden is not None:
            raise ValueError("%s holds %s, which shows nothing or reorders the text: a label "
                             "must read as what it is" % (shown(value), hidden))
        return value

    @model_validator(mode="after")
    def _resources(self) -> Target:
        if self.device == "cpu" and self.gpus is not None:
            raise ValueError("gpus: a cpu target has no GPUs (remove gpus or use device: cuda)")
        if self.cpus is not None and self.cpuset is not None \
                and cpuset_size(self.cpuset) != self.cpus:
            raise ValueError("cpus: %d, but cpuset %r names %d CPUs: give one of them, or make "
                             "them agree (the quota and the cores must match for a fair "
                             "thread count)" % (self.cpus, self.cpuset, cpuset_size(self.cpuset)))
        if self.swap is not None and self.memory is None:
            raise ValueError("swap: needs memory (swap is what a cell may use beyond memory)")
        if self.memory is not None and size_bytes(self.memory) < MIN_MEMORY:
            raise ValueError("memory: %s is below 64m, too little for any torch to start"
                             % self.memory)
        if self.cloud is not None and self.device == "cuda" and not self.cloud.accelerators:
            raise ValueError("cloud: a cuda target in a cloud needs accelerators "
                             "(e.g. accelerators: \"H100:1\")")
        if self.cloud is not None and self.device == "cpu" and self.cloud.accelerators:
            raise ValueError("cloud: accelerators on a cpu target would be paid for and "
                             "never used: use device: cuda, or remove accelerators")
        if self.slurm is not None:
            if self.cloud is not None:
                raise ValueError("slurm and cloud: a target is on a Slurm cluster or in a "
                                 "cloud, not both")
            if self.device == "cuda" and not self.slurm.gpu_count:
                raise ValueError("slurm: a cuda target on a cluster needs gpus or gres (e.g. "
                                 "gres: \"gpu:h100:1\"), or the job gets no GPU")
            if self.cpuset is not None:
                raise ValueError("cpuset: a Slurm target's cells run on the cores Slurm gives "
                                 "the job; give cpus (the quota and the thread count)")
            if self.device == "cpu" and self.slurm.gpu_count:
                raise ValueError("slurm: gpus or gres on a cpu target hold GPUs that no cell "
                                 "uses: use device: cuda, or remove them")
        return self


WORKLOAD_NAME = rules.NAME
# An input's name: the key build() reads it under (ctx.inputs["weights"]) and a folder name.
INPUT_NAME = rules.json_schema_pattern(rules.INPUT_NAME)
SHA256 = rules.json_schema_pattern(rules.SHA256)
MAX_INPUTS = 16


class InputChoice(_Strict):
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


class WorkloadChoice(_Strict):
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


class Settings(_Strict):
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


MIN_AUTO_REPEATS = verdicts.MIN_REPEATS


class Benchmark(Settings):
    # auto: at least 3 rounds, then more only where a comparison is still open, up to
    # max_repeats; an open comparison is one whose interval (at its look's share of the
    # level, envbench.looks) straddles 1 and is wider than precision (a fraction: 0.03 is
    # 3%).
    repeats: Union[Annotated[int, Field(strict=True, ge=1, le=100)], Literal["auto"]] = 3
    max_repeats: Annotated[int, Field(strict=True, ge=MIN_AUTO_REPEATS, le=100)] = 10
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
        return MIN_AUTO_REPEATS if self.repeats == "auto" else self.repeats

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
