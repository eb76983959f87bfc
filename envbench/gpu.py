"""GPU access for containers: device requests, and one probe that explains a missing runtime."""
from __future__ import annotations

from typing import Any

import docker
from docker.types import DeviceRequest

NO_RUNTIME = ("this Docker engine has no NVIDIA runtime: install nvidia-container-toolkit, "
              "run `sudo nvidia-ctk runtime configure --runtime=docker` and restart dockerd")


def device_requests(count: int) -> list[DeviceRequest]:
    """``count`` GPUs (-1: all), as `docker run --gpus` asks for them."""
    return [DeviceRequest(count=count, capabilities=[["gpu"]])]


def explain(exc: Exception) -> str:
    text = str(exc)
    if "could not select device driver" in text or "nvidia-container-cli" in text:
        return NO_RUNTIME
    return "the engine refused GPUs: %s" % text.strip()[:400]


def probe(client: docker.DockerClient, image: Any, count: int) -> str | None:
    """Start a tiny container with GPUs attached; None if it works, else why not."""
    try:
        client.containers.run(image.id, entrypoint=["true"], remove=True, network_mode="none",
                              device_requests=device_requests(count))
    except docker.errors.DockerException as exc:
        return explain(exc)
    return None
