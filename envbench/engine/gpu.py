"""GPUs as the kit knows them, in one place: device requests, the probe that explains a
missing runtime, nvidia-smi read through the engine, and the driver each CUDA stack needs."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import docker
from docker.types import DeviceRequest

from envbench.engine import connection
from envbench.engine.connection import ENGINE_ERRORS
from envbench.engine.sandbox import locked_down

NVIDIA_FIX = ("install nvidia-container-toolkit, run `sudo nvidia-ctk runtime configure "
              "--runtime=docker` and restart dockerd")
NO_RUNTIME = "this Docker engine has no NVIDIA runtime: %s" % NVIDIA_FIX
# The oldest Linux driver each CUDA major runs on (NVIDIA's minor-version compatibility:
# a CUDA 12.x wheel runs on any driver from 525.60.13 on).
MIN_DRIVER = {"11": "450.80.02", "12": "525.60.13", "13": "580.65.06"}


@dataclass(frozen=True)
class GpuInfo:
    """One GPU as nvidia-smi lists it."""

    name: str
    driver: str
    memory: str


@dataclass(frozen=True)
class GpuState:
    """What this engine offers GPU cells: the runtime, the GPUs, or why they are unknown."""

    runtime: bool
    gpus: tuple[GpuInfo, ...] = ()
    problem: str | None = None  # why the GPUs could not be read

    @property
    def driver(self) -> str | None:
        return self.gpus[0].driver if self.gpus else None


def requested_count(gpus: str | int | None) -> int:
    """A target's `gpus:` as Docker counts them: -1 for all (also when unset), else N."""
    return -1 if gpus in (None, "all") else int(gpus)


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
          count: int) -> tuple[list[GpuInfo], str | None]:
    """The GPUs as nvidia-smi lists them from inside a container (locked down like a cell)
    with ``count`` GPUs attached: ([GpuInfo], None) or ([], why not)."""
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
            gpus.append(GpuInfo(parts[0], parts[1], parts[2]))
    return gpus, (None if gpus else "nvidia-smi printed no GPU: %s" % text.strip()[:200])


def state(client: docker.DockerClient, image: Any | None) -> GpuState:
    """The runtime (from the engine's info) and, where an image is there to run nvidia-smi
    in, the GPUs and their driver."""
    try:
        runtimes = client.info().get("Runtimes") or {}
    except ENGINE_ERRORS as exc:
        return GpuState(False, problem=connection.explain(exc))
    if "nvidia" not in runtimes:
        return GpuState(False)
    if image is None:
        return GpuState(True, problem="no image to run nvidia-smi in yet")
    gpus, problem = query(client, image, -1)
    return GpuState(True, tuple(gpus), problem)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part.isdigit())


def min_driver(cuda: str) -> str | None:
    return MIN_DRIVER.get(cuda.split(".")[0])


def driver_problem(environment: str, cuda: str, driver: str | None) -> str | None:
    """One sentence when this host's driver is too old for a CUDA stack; None when it will
    do or cannot be known (no driver: the runtime check says so)."""
    needed = min_driver(cuda)
    if needed is None or driver is None:
        return None
    if _version(driver) >= _version(needed):
        return None
    return ("%s is built for CUDA %s, which needs NVIDIA driver >= %s; this host has %s: "
            "upgrade the driver or use an older CUDA stack" % (environment, cuda, needed,
                                                              driver))
