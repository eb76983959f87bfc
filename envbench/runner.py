"""One cell in one container: locked down, resources from the target, GPUs where it has them."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import requests

from envbench import gpu, results
from envbench.cells import Cell, bench_args
from envbench.matrix import Target
from envbench.users import host_user, own

LOG_TAIL_LINES = 40
# DataLoader workers pass batches through /dev/shm; Docker's 64 MB default breaks them.
SHM_SIZE = "2g"


@dataclass(frozen=True)
class Mounts:
    results_dir: Path
    log_dir: Path
    data_dir: Path | None  # None: --synthetic


def effective_cpus(target: Target) -> float | None:
    """The target's CPU count, capped at what this host has (the engine refuses more)."""
    if target.cpus is None:
        return None
    return min(target.cpus, float(os.cpu_count() or 1))


def container_options(cell: Cell, target: Target, image: Any, mounts: Mounts) -> dict[str, Any]:
    volumes = {str(mounts.results_dir.resolve()): {"bind": "/results", "mode": "rw"}}
    if mounts.data_dir is not None:
        volumes[str(mounts.data_dir.resolve())] = {"bind": "/data", "mode": "ro"}
    options: dict[str, Any] = {
        "command": bench_args(cell, target.device, mounts.data_dir is None),
        "user": host_user(),
        "network_mode": "none",
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "shm_size": SHM_SIZE,
        "volumes": volumes,
        "environment": {"HOME": "/tmp", "USER": "envbench", "ENVBENCH_IMAGE_ID": image.id,
                        "ENVBENCH_IMAGE_TAG": (image.tags or [""])[0]},
        "labels": {"envbench.cell": cell.id},
        "detach": True,
    }
    cpus = effective_cpus(target)
    if cpus is not None:
        options["nano_cpus"] = int(cpus * 1e9)
    if target.cpuset:
        options["cpuset_cpus"] = target.cpuset
    if target.memory:
        options["mem_limit"] = target.memory
        options["memswap_limit"] = target.memory  # no swap: a cell that needs it is an OOM
    if target.gpu_count:
        options["device_requests"] = gpu.device_requests(target.gpu_count)
    return options


def _save_logs(container: Any, log_path: Path) -> list[str]:
    """The container's whole output, read once it has stopped (a stream that sat silent
    through a long epoch could time out and lose the end, which is what matters)."""
    try:
        raw = container.logs(stdout=True, stderr=True)
    except docker.errors.DockerException as exc:
        raw = ("(logs unavailable: %s)\n" % exc).encode()
    log_path.write_bytes(raw)
    own(log_path)
    return raw.decode(errors="replace").splitlines()


def run_cell(client: docker.DockerClient, cell: Cell, target: Target, image: Any,
             mounts: Mounts) -> dict[str, Any]:
    """Run the cell; return its record (bench's own, or the host's account of the failure)."""
    device, synthetic = target.device, mounts.data_dir is None
    out_path = results.path_for(mounts.results_dir, cell)
    if out_path.exists():
        out_path.unlink()  # a stale result must not pass for this run's
    log_path = mounts.log_dir / ("%s.log" % cell.id)
    lines: list[str] = []
    error: tuple[str, str] | None = None
    try:
        options = container_options(cell, target, image, mounts)
        container = client.containers.create(image.id, **options)
    except docker.errors.DockerException as exc:
        message = gpu.explain(exc) if target.gpu_count else str(exc).strip()[:500]
        return _with_tail(results.host_failure(cell, device, synthetic, "ContainerError",
                                               message), lines)
    try:
        container.start()
        try:
            exit_code = container.wait(timeout=target.timeout_s)["StatusCode"]
        except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
            container.kill()
            exit_code = None
            error = ("Timeout", "the cell ran past the target's timeout_s=%d" % target.timeout_s)
        if exit_code is not None and exit_code != 0:
            container.reload()
            if container.attrs.get("State", {}).get("OOMKilled"):
                error = ("OutOfMemory", "the container was killed at the target's memory limit "
                                        "(%s)" % target.memory)
            else:
                error = ("ContainerExited", "bench exited with code %d" % exit_code)
    except docker.errors.DockerException as exc:
        message = gpu.explain(exc) if target.gpu_count else str(exc).strip()[:500]
        error = ("ContainerError", message)
    finally:
        lines = _save_logs(container, log_path)
        try:
            container.remove(force=True)
        except docker.errors.DockerException:
            pass
    record = results.read(out_path)
    if record is None:
        kind, message = error or ("NoResult", "bench exited without writing a valid result")
        record = results.host_failure(cell, device, synthetic, kind, message)
    elif error is not None and error[0] in ("Timeout", "OutOfMemory"):
        record["status"], record["error"] = "failed", {"type": error[0], "message": error[1]}
    return _with_tail(record, lines) if record["status"] != "ok" else record


def _with_tail(record: dict[str, Any], lines: list[str]) -> dict[str, Any]:
    record["log_tail"] = lines[-LOG_TAIL_LINES:]
    return record
