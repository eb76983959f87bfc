"""A container spec (envbench.engine.spec) as the Docker SDK's keyword arguments: every
container this engine starts for the kit, cells and the GPU probe alike, goes through here.
GPUs are the caller's (gpu.device_requests: --gpus or CDI, as the probe found the engine).
"""
from __future__ import annotations

from typing import Any

from docker.types import Mount

from envbench.engine.spec import ContainerSpec


def docker_options(spec: ContainerSpec) -> dict[str, Any]:
    """The spec's container; its name stays the engine's (a cell's stem is in its labels)."""
    lock = spec.lockdown
    # Mount objects, not "host:container:mode" strings: a path holding ':' or ',' (a
    # workload file named v1:final.py) is a path, not a volume specification Docker refuses.
    mounts = [Mount(bind.target, bind.source, type="bind", read_only=bind.read_only)
              for bind in spec.binds]
    mounts += [Mount(scratch.target, None, type="tmpfs", tmpfs_size=scratch.size_bytes)
               for scratch in spec.scratch]
    options: dict[str, Any] = {
        "user": spec.user,
        "network_mode": lock.network,
        "cap_drop": [lock.cap_drop],
        "security_opt": ["no-new-privileges"] if lock.no_new_privileges else [],
        "read_only": lock.read_only_root,
        "tmpfs": {"/tmp": lock.tmp},
        "pids_limit": lock.pids_limit,
        # docker's init as PID 1: signals reach bench (PID 1 ignores SIGTERM), zombies are reaped.
        "init": lock.init,
        "shm_size": lock.shm_size,
        "environment": dict(spec.environment),
        "working_dir": spec.workdir,
        "entrypoint": list(spec.entrypoint),
        "command": list(spec.args),
        "mounts": mounts,
    }
    if spec.cpus is not None:
        options["nano_cpus"] = int(spec.cpus * 1e9)
    if spec.cpuset is not None:
        options["cpuset_cpus"] = spec.cpuset
    if spec.memory_bytes is not None:
        options["mem_limit"] = spec.memory_bytes
        # memswap is memory + swap; equal to memory, a cell that needs more is an OOM.
        options["memswap_limit"] = spec.memory_bytes + spec.swap_bytes
    return options
