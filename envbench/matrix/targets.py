"""matrix.yaml's targets: where cells run (this engine, a cloud VM, a Slurm cluster) and
what each may use."""
from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import Field, ValidationInfo, field_validator, model_validator

from envbench import files
from envbench.matrix.fields import (
    CPUSET,
    MIN_MEMORY,
    SIZE,
    WEEK_S,
    Count,
    Flag,
    Price,
    Strict,
    cpuset_ranges,
    cpuset_size,
    shown,
)
from envbench.matrix.grammars import size_bytes

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


class Cloud(Strict):
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


class Slurm(Strict):
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
    # The job's allocation: a cell runs on as many of these nodes as its benchmark.nodes.
    nodes: Annotated[int, Field(strict=True, ge=1, le=1024)] = 1
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


class Target(Strict):
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
