"""One container of the kit, described once: what it runs, what it sees, what it may use and
how it is locked down. The engine (sandbox.docker_options) and a Slurm node's runtimes
(envbench.slurm.runtimes: Podman, Apptainer, Pyxis) render the same description; the image's
Dockerfile takes its workdir, entrypoint, HOME and USER from the constants here.

The lock-down: no network, the invoking user, no capabilities, no privilege gain, a
read-only root file system with a private /tmp, a cap on processes and an init as PID 1.
bench writes only /results (a bind mount) and /tmp; /dev/shm is a tmpfs sized for
DataLoader workers.
"""
from __future__ import annotations

from dataclasses import dataclass, field

# The image's layout (images/_stack.Dockerfile.j2 renders these).
WORKDIR = "/opt/envbench"
ENTRY = ("python3", "-m", "bench")
# HOME and USER keep torch's caches and getpass working for a uid with no passwd entry.
HOME, USER = "/tmp", "envbench"

# DataLoader workers pass batches through /dev/shm; Docker's 64 MB default breaks them.
SHM_SIZE = "2g"
# Threads count as tasks: torch's pools and the workers' stay far below this, a fork bomb not.
PIDS_LIMIT = 4096
# exec: torch.compile (inductor) builds and loads shared objects under /tmp. Memory used here
# counts against the container's limit.
TMP_TMPFS = "rw,exec,nosuid,nodev,size=4g,mode=1777"


@dataclass(frozen=True)
class Lockdown:
    """What every container of the kit is denied. One value (LOCKDOWN); a field, so a
    renderer reads each property from the spec it renders and a test can list them."""

    network: str = "none"
    cap_drop: str = "ALL"
    no_new_privileges: bool = True
    read_only_root: bool = True
    tmp: str = TMP_TMPFS              # /tmp: a private tmpfs with these options
    pids_limit: int = PIDS_LIMIT
    shm_size: str = SHM_SIZE
    init: bool = True                 # an init as PID 1 where the runtime has one


LOCKDOWN = Lockdown()


@dataclass(frozen=True)
class Bind:
    source: str                       # a path on the machine that runs the container
    target: str
    read_only: bool = True


@dataclass(frozen=True)
class Scratch:
    """An empty tmpfs over a path (a user's __pycache__: the cell compiles the source its
    hash covers, and writes nothing beside it)."""

    target: str
    size_bytes: int


@dataclass(frozen=True)
class ContainerSpec:
    name: str                         # names the container (a cell's file stem)
    image: str                        # what the runtime starts: an image ID, a SIF, a squashfs
    args: tuple[str, ...]             # bench's arguments
    environment: dict[str, str] = field(default_factory=dict)
    user: str | None = None           # uid:gid; None: the runtime's (Apptainer: the caller)
    binds: tuple[Bind, ...] = ()
    scratch: tuple[Scratch, ...] = ()
    cpus: float | None = None
    cpuset: str | None = None
    memory_bytes: int | None = None
    swap_bytes: int = 0
    gpus: int = 0                     # 0: none; -1: all the runtime has; else how many
    lockdown: Lockdown = LOCKDOWN
    workdir: str = WORKDIR
    entrypoint: tuple[str, ...] = ENTRY


def cell_environment(image_id: str, image_tag: str, device: str) -> dict[str, str]:
    """The variables of every container of the kit, whatever runs it (this engine, Podman,
    Apptainer or Pyxis on a Slurm node)."""
    environment = {"HOME": HOME, "USER": USER,
                   "ENVBENCH_IMAGE_ID": image_id, "ENVBENCH_IMAGE_TAG": image_tag}
    if device != "cuda":
        # A CUDA image carries NVIDIA_VISIBLE_DEVICES=all (its base's); on a host whose
        # default runtime is nvidia that alone would hand a "CPU" cell every GPU. "void"
        # makes the runtime treat the container as one without GPUs.
        environment["NVIDIA_VISIBLE_DEVICES"] = "void"
    return environment
