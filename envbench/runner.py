"""One cell in one container: locked down, resources from the target, GPUs where it has them."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import requests

from envbench import gpu, results
from envbench.matrix import Target
from envbench.resources import Resources, container_limits
from envbench.users import host_user, own

LOG_TAIL_LINES = 40
# DataLoader workers pass batches through /dev/shm; Docker's 64 MB default breaks them.
SHM_SIZE = "2g"


@dataclass(frozen=True)
class Mounts:
    results_dir: Path
    log_dir: Path
    data_dir: Path | None  # None: --synthetic


def container_options(args: list[str], resources: Resources, image: Any, mounts: Mounts,
                      cell_name: str) -> dict[str, Any]:
    volumes = {str(mounts.results_dir.resolve()): {"bind": "/results", "mode": "rw"}}
    if mounts.data_dir is not None:
        volumes[str(mounts.data_dir.resolve())] = {"bind": "/data", "mode": "ro"}
    options: dict[str, Any] = {
        "command": args,
        "user": host_user(),
        "network_mode": "none",
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "shm_size": SHM_SIZE,
        "volumes": volumes,
        "environment": {"HOME": "/tmp", "USER": "envbench", "ENVBENCH_IMAGE_ID": image.id,
                        "ENVBENCH_IMAGE_TAG": (image.tags or [""])[0]},
        "labels": {"envbench.cell": cell_name},
        "detach": True,
    }
    options.update(container_limits(resources))
    if resources.device == "cuda":
        options["device_requests"] = gpu.device_requests(
            -1 if resources.gpus in (None, "all") else int(resources.gpus))
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


def run_cell(client: docker.DockerClient, args: list[str], config: dict[str, Any],
             target: Target, resources: Resources, image: Any, mounts: Mounts,
             out_path: Path) -> dict[str, Any]:
    """Run one cell; return its record (bench's own, or the host's account of the failure).

    ``args`` is bench's command line, writing to ``out_path`` (under /results in the
    container); ``config`` is what bench records for it, used when bench records nothing.
    """
    if out_path.exists():
        out_path.unlink()  # a stale result must not pass for this run's
    log_path = mounts.log_dir / ("%s.log" % out_path.stem)
    lines: list[str] = []
    error: tuple[str, str] | None = None
    gpus = resources.device == "cuda"
    try:
        options = container_options(args, resources, image, mounts, out_path.stem)
        container = client.containers.create(image.id, **options)
    except docker.errors.DockerException as exc:
        message = gpu.explain(exc) if gpus else str(exc).strip()[:500]
        return _with_tail(results.host_failure(config, "ContainerError", message), lines)
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
        message = gpu.explain(exc) if gpus else str(exc).strip()[:500]
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
        record = results.host_failure(config, kind, message)
    elif error is not None and error[0] in ("Timeout", "OutOfMemory"):
        record["status"], record["error"] = "failed", {"type": error[0], "message": error[1]}
    return _with_tail(record, lines) if record["status"] != "ok" else record


def _with_tail(record: dict[str, Any], lines: list[str]) -> dict[str, Any]:
    record["log_tail"] = lines[-LOG_TAIL_LINES:]
    return record
