"""The Docker engine connection: one place that turns 'no engine' into a sentence."""
from __future__ import annotations

import docker
from docker.errors import DockerException

from envbench.errors import UserError


def connect() -> docker.DockerClient:
    try:
        client = docker.from_env(timeout=600)
        client.ping()
    except DockerException as exc:
        raise UserError("no Docker engine answers (%s). Start dockerd (e.g. `sudo systemctl start "
                        "docker`), or point DOCKER_HOST at a running engine." % _reason(exc))
    return client


def _reason(exc: Exception) -> str:
    text = str(exc)
    return text.split("(", 1)[0].strip() if "Connection aborted" in text else text[:300]


def image_or_none(client: docker.DockerClient, ref: str):
    try:
        return client.images.get(ref)
    except docker.errors.ImageNotFound:
        return None
