"""How every container the kit starts is locked down: cells and the GPU probe alike.

No network, the invoking user, no capabilities, no privilege gain, a read-only root file
system with a private /tmp, and a cap on processes. bench writes only /results (a bind
mount) and /tmp; /dev/shm stays the engine's tmpfs, sized for DataLoader workers.
"""
from __future__ import annotations

from typing import Any

from envbench.users import host_user

# DataLoader workers pass batches through /dev/shm; Docker's 64 MB default breaks them.
SHM_SIZE = "2g"
# Threads count as tasks: torch's pools and the workers' stay far below this, a fork bomb not.
PIDS_LIMIT = 4096
# exec: torch.compile (inductor) builds and loads shared objects under /tmp. Memory used here
# counts against the container's limit.
TMP_TMPFS = "rw,exec,nosuid,nodev,size=4g,mode=1777"


def cell_environment(image_id: str, image_tag: str, device: str) -> dict[str, str]:
    """The variables of every container of the kit, whatever runs it (this engine, Podman,
    Apptainer or Pyxis on a Slurm node)."""
    environment = {
        # HOME and USER keep torch's caches and getpass working for a uid with no passwd entry.
        "HOME": "/tmp", "USER": "envbench",
        "ENVBENCH_IMAGE_ID": image_id, "ENVBENCH_IMAGE_TAG": image_tag}
    if device != "cuda":
        # A CUDA image carries NVIDIA_VISIBLE_DEVICES=all (its base's); on a host whose
        # default runtime is nvidia that alone would hand a "CPU" cell every GPU. "void"
        # makes the runtime treat the container as one without GPUs.
        environment["NVIDIA_VISIBLE_DEVICES"] = "void"
    return environment


def locked_down(image: Any, device: str) -> dict[str, Any]:
    """Docker SDK keyword arguments shared by every container of the kit; ``device`` the
    cell's ("cuda" for the GPU probe)."""
    return {
        "user": host_user(),
        "network_mode": "none",
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "read_only": True,
        "tmpfs": {"/tmp": TMP_TMPFS},
        "pids_limit": PIDS_LIMIT,
        # docker's init as PID 1: signals reach bench (PID 1 ignores SIGTERM), zombies are reaped.
        "init": True,
        "shm_size": SHM_SIZE,
        "environment": cell_environment(image.id, (image.tags or [""])[0], device),
    }
