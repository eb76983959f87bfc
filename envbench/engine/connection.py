"""The Docker engine connection: one place that turns the engine's failures into sentences.

Anything the engine can answer with (an API error, a refused reference, a connection that
drops because dockerd stopped) is an expected failure of one image or one cell: callers catch
``ENGINE_ERRORS`` and record ``explain(exc)``; the matrix goes on.
"""
from __future__ import annotations

import os
import socket
from typing import Any

import docker
import requests
from docker.errors import DockerException
from docker.models.images import Image
from docker.tls import TLSConfig

from envbench.engine import reach
from envbench.user_errors import UserError

# What a call to the engine may raise besides a bug: the SDK's errors, and the transport's
# when the engine goes away mid-call (requests' errors are not DockerExceptions).
ENGINE_ERRORS = (DockerException, requests.exceptions.RequestException, ConnectionError)


def is_local(client: Any) -> bool:
    """Whether the engine answers on this machine's socket (unix socket or named pipe), not
    on a remote DOCKER_HOST (tcp://, ssh://), whose GPUs this machine cannot see."""
    return str(getattr(client.api, "base_url", "")).startswith("http+docker://")


def client_host() -> str:
    """The machine that starts cells: their containers carry it (label envbench.host)."""
    return socket.gethostname()


# A ping that waits this long: an engine that accepts connections but never answers (hung)
# is told as such in seconds, not after the long timeout that builds and cells get.
PING_TIMEOUT_S = 30
CALL_TIMEOUT_S = 600


def client(timeout: int) -> docker.DockerClient:
    """A client of the engine the `docker` CLI would use (envbench.engine.reach.engine_host):
    DOCKER_HOST (with DOCKER_TLS_VERIFY and DOCKER_CERT_PATH), else the current context's
    endpoint and TLS material, else this machine's socket. The SDK's own context lookup is
    not used: it misses a context whose config folder has no config.json."""
    host, _ = reach.engine_host()
    if os.environ.get("DOCKER_HOST") or not host:
        return docker.from_env(timeout=timeout, use_context=False)
    context = reach.current_context()
    found = reach.context_tls(context) if context else None
    tls: TLSConfig | None = None
    if found is not None:
        cert = (str(found["cert"]), str(found["key"])) if "cert" in found and "key" in found \
            else None
        tls = TLSConfig(client_cert=cert, ca_cert=str(found["ca"]) if "ca" in found else None,
                        verify=bool(found["verify"]))
    return docker.DockerClient(base_url=host, timeout=timeout, tls=tls or False)


def connect() -> docker.DockerClient:
    try:
        client_ = client(PING_TIMEOUT_S)
        client_.ping()
    except ENGINE_ERRORS:
        raise UserError(unreachable())
    client_.api.timeout = CALL_TIMEOUT_S
    return client_


def unreachable() -> str:
    """Why no engine answers, told apart: this user may not open the socket, an engine is
    there but silent, this is a container, or there is none (see envbench.engine.reach)."""
    found = reach.diagnose()
    if found.kind == "absent":
        return ("%s. Install Docker and start it (on Debian or Ubuntu `./noxw -s demo` does, as "
                "root or with passwordless sudo), or point DOCKER_HOST at a running engine"
                % found.sentence)
    return found.message()


def explain(exc: BaseException) -> str:
    """One sentence for an engine failure: its own explanation, or that it stopped answering."""
    text = str(exc)
    if isinstance(exc, (requests.exceptions.ConnectionError, ConnectionError)) or \
            "Connection aborted" in text or "Connection refused" in text:
        how = ("connection refused" if "refused" in text.lower() or "No such file" in text
               else "connection lost")
        return "the Docker engine stopped answering (%s)" % how
    explanation = getattr(exc, "explanation", None)
    text = explanation if isinstance(explanation, str) and explanation else str(exc)
    return " ".join(text.split())[:500]


def image_or_none(client: docker.DockerClient, ref: str) -> Image | None:
    """The engine's image for ``ref``, None if it has none; a refusal is a clear error."""
    try:
        return client.images.get(ref)
    except docker.errors.ImageNotFound:
        return None
    except ENGINE_ERRORS as exc:
        raise UserError("the engine could not look up image %s: %s" % (ref, explain(exc)))
