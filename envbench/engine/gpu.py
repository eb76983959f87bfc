"""GPU access for containers: device requests, and one probe that explains a missing runtime."""
from __future__ import annotations

from typing import Any

import docker
from docker.types import DeviceRequest

from envbench.engine import connection
from envbench.engine.connection import ENGINE_ERRORS
from envbench.engine.sandbox import locked_down

NO_RUNTIME = ("this Docker engine has no NVIDIA runtime: install nvidia-container-toolkit, "
              "run `sudo nvidia-ctk runtime configure --runtime=docker` and restart dockerd")


def device_requests(count: int) -> list[DeviceRequest]:
    """``count`` GPUs (-1: all), as `docker run --gpus` asks for them."""
    return [DeviceRequest(count=count, capabilities=[["gpu"]])]


def explain(exc: BaseException) -> str:
    text = str(exc)
    if "could not select device driver" in text or "nvidia-container-cli" in text:
        return NO_RUNTIME
    if not isinstance(exc, docker.errors.APIError):
        return connection.explain(exc)  # not a refusal of the GPUs: the engine's own failure
    return "the engine refused GPUs: %s" % connection.explain(exc)[:400]


def probe_options(image: Any, count: int) -> dict[str, Any]:
    """The probe container: locked down like a cell, with ``count`` GPUs (0: none)."""
    options = dict(locked_down(image), entrypoint=["true"],
                   labels={"envbench.cell": "gpu-probe"})
    if count:
        options["device_requests"] = device_requests(count)
    return options


def _run_once(client: docker.DockerClient, image: Any, options: dict[str, Any]
              ) -> tuple[int, str]:
    """Create, start, wait, read and always remove: a refused start (no NVIDIA runtime)
    leaves a container that `run(remove=True)` would not remove."""
    container = client.containers.create(image.id, **options)
    try:
        container.start()
        code = container.wait(timeout=120)["StatusCode"]
        return code, container.logs().decode(errors="replace")
    finally:
        try:
            container.remove(force=True)
        except ENGINE_ERRORS:
            pass


def probe(client: docker.DockerClient, image: Any, count: int) -> str | None:
    """Start a tiny container with GPUs attached; None if it works, else why not."""
    try:
        code, _ = _run_once(client, image, probe_options(image, count))
    except ENGINE_ERRORS as exc:
        return explain(exc)
    return None if code == 0 else "the GPU probe container exited with code %d" % code


QUERY = ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"]


def query(client: docker.DockerClient, image: Any,
          count: int) -> tuple[list[dict[str, str]], str | None]:
    """The GPUs as nvidia-smi lists them from inside a container (locked down like a cell)
    with ``count`` GPUs attached: ([{name, driver, memory}], None) or ([], why not)."""
    try:
        code, text = _run_once(client, image, dict(probe_options(image, count), entrypoint=QUERY))
    except ENGINE_ERRORS as exc:
        return [], explain(exc)
    if code != 0:
        return [], "nvidia-smi exited with code %d: %s" % (code, text.strip()[:200])
    gpus = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and parts[1][:1].isdigit():
            gpus.append({"name": parts[0], "driver": parts[1], "memory": parts[2]})
    return gpus, (None if gpus else "nvidia-smi printed no GPU: %s" % text.strip()[:200])
