"""GPUs as the kit knows them, in one place: device requests, the probe that decides whether
the engine can give GPUs to a container, the GPUs as this host's nvidia-smi (or the engine)
lists them, and the driver each CUDA stack needs."""
from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
from docker.types import DeviceRequest

from envbench.engine import connection, sandbox
from envbench.engine.connection import ENGINE_ERRORS
from envbench.engine.spec import ContainerSpec, cell_environment
from envbench.users import host_user

NVIDIA_FIX = ("install nvidia-container-toolkit, run `sudo nvidia-ctk runtime configure "
              "--runtime=docker` and restart dockerd")
NO_RUNTIME = "this Docker engine has no NVIDIA runtime: %s" % NVIDIA_FIX
NO_GPU = ("this host has no NVIDIA GPU (none on its PCI bus, no driver, no nvidia-smi): GPU "
          "targets need a GPU host; here run the CPU targets (`--kind cpu`, `./noxw -s bench-cpu`)")
# The oldest Linux driver each CUDA major runs on (NVIDIA's minor-version compatibility:
# a CUDA 12.x wheel runs on any driver from 525.60.13 on).
MIN_DRIVER = {"11": "450.80.02", "12": "525.60.13", "13": "580.65.06"}


@dataclass(frozen=True)
class GpuInfo:
    """One GPU as nvidia-smi lists it."""

    name: str
    driver: str
    memory: str
    capability: tuple[int, int] | None = None  # compute capability (9, 0) for an H100/H200
    mig: bool | None = None  # MIG mode enabled (None: not read, or a GPU without MIG)


@dataclass(frozen=True)
class GpuState:
    """What this host offers GPU cells: whether the engine gives containers GPUs (None: not
    probed, with the reason in problem), the GPUs, or why they are unknown."""

    runtime: bool | None
    gpus: tuple[GpuInfo, ...] = ()
    problem: str | None = None  # why the runtime or the GPUs could not be told
    driver_only: str | None = None  # the driver, where only /proc could be read
    mode: str = "gpus"  # how containers get GPUs: Docker's --gpus, or "cdi" devices
    on_pci: bool = False  # an NVIDIA display or 3D controller on this host's PCI bus
    local: bool = True  # the engine runs on this machine (what it reads here is the engine's)

    @property
    def driver(self) -> str | None:
        return self.gpus[0].driver if self.gpus else self.driver_only

    @property
    def absent(self) -> bool:
        """No NVIDIA GPU on this host at all: none listed, no driver, none on the PCI bus,
        and no container got one. A GPU whose driver or runtime is missing is not absent:
        that is a fault to fix, not a host without GPUs; nor is an engine on another machine
        (a remote DOCKER_HOST), whose GPUs this one cannot see."""
        return self.local and self.runtime is not True and not self.gpus \
            and self.driver is None and not self.on_pci


def requested_count(gpus: str | int | None) -> int:
    """A target's `gpus:` as Docker counts them: -1 for all (also when unset), else N."""
    return -1 if gpus in (None, "all") else int(gpus)


# How a container is given GPUs: Docker's --gpus (through nvidia-container-runtime-hook), or
# CDI devices (Docker 25+, `--device nvidia.com/gpu=all`), which a toolkit in CDI or jit-cdi
# mode needs: its hook refuses --gpus.
GPUS, CDI = "gpus", "cdi"


def device_requests(count: int, mode: str = GPUS) -> list[DeviceRequest]:
    """``count`` GPUs (-1: all), as `docker run --gpus` asks for them, or as CDI devices
    (the first ``count`` of NVIDIA's CDI spec, as `nvidia-ctk cdi generate` names them)."""
    if mode == CDI:
        ids = ["nvidia.com/gpu=all"] if count < 0 else \
            ["nvidia.com/gpu=%d" % index for index in range(count)]
        return [DeviceRequest(driver="cdi", device_ids=ids)]
    return [DeviceRequest(count=count, capabilities=[["gpu"]])]


# Docker's --gpus refused by a toolkit in CDI or jit-cdi mode (nvidia-container-runtime's
# mode = "cdi"): its hook refuses --gpus, which goes through the legacy hook.
CDI_MODE = ("NVIDIA's container toolkit is in CDI mode, whose hook refuses Docker's --gpus: "
            "generate the CDI spec (`sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`"
            ") on Docker 25 or later, which the kit then uses, or set mode = \"legacy\" (or "
            "\"auto\") under [nvidia-container-runtime] in /etc/nvidia-container-runtime/"
            "config.toml and restart dockerd")
# --gpus needs nvidia-container-runtime-hook on dockerd's PATH (a toolkit installed without
# it, or a dockerd started with a PATH that lacks /usr/bin).
HOOK_MISSING = ("dockerd cannot find nvidia-container-runtime-hook on its PATH: install "
                "nvidia-container-toolkit (it provides the hook) and restart dockerd with "
                "/usr/bin on its PATH")

# What nvidia-container-cli (or Docker's CDI) says when the runtime is there but the driver
# or its set-up is not right.
DRIVER_ERRORS = (
    ("driver/library version mismatch", "the NVIDIA kernel driver and its user-space library "
     "differ (a driver upgraded without a reboot): reboot the host"),
    ("driver not loaded", "the NVIDIA kernel driver is not loaded: install the driver, or "
     "load it (`sudo modprobe nvidia`; `nvidia-smi` says why)"),
    ("no cuda-capable device", "the NVIDIA runtime found no GPU on this host"),
    ("invoking the nvidia container runtime hook directly", CDI_MODE),
    ('"nvidia-container-runtime-hook": executable file not found', HOOK_MISSING),
    # Docker 25+ asked for CDI devices that no spec in /etc/cdi or /var/run/cdi names.
    ("unresolvable cdi devices", "Docker's CDI knows no NVIDIA GPU: generate the spec (`sudo "
     "nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`)"),
    ("cdi is not enabled", "this Docker engine has CDI turned off: add \"features\": "
     "{\"cdi\": true} to /etc/docker/daemon.json and restart dockerd"),
)


def explain(exc: BaseException) -> str:
    text = str(exc)
    for symptom, sentence in DRIVER_ERRORS:  # first: Docker's CDI refusals share the prefix
        if symptom in text.lower():
            return sentence
    if "could not select device driver" in text:
        return NO_RUNTIME
    if "nvidia-container-cli" in text:
        return "the NVIDIA container runtime refused the GPUs: %s" % connection.explain(exc)[:300]
    if not isinstance(exc, docker.errors.APIError):
        return connection.explain(exc)  # not a refusal of the GPUs: the engine's own failure
    return "the engine refused GPUs: %s" % connection.explain(exc)[:400]


def probe_options(image: Any, count: int, mode: str = GPUS) -> dict[str, Any]:
    """The probe container: locked down like a cell, with ``count`` GPUs (0: none)."""
    spec = ContainerSpec(name="gpu-probe", image=image.id, args=(),
                         environment=cell_environment(image.id, (image.tags or [""])[0],
                                                      "cuda"),
                         # "/": the probe runs in images without the kit's layout too
                         user=host_user(), workdir="/", entrypoint=("true",))
    options = dict(sandbox.docker_options(spec), labels={"envbench.cell": "gpu-probe"})
    if count:
        options["device_requests"] = device_requests(count, mode)
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


def probe(client: docker.DockerClient, image: Any, count: int,
          mode: str = GPUS) -> str | None:
    """Start a tiny container with GPUs attached; None if it works, else why not."""
    try:
        code, _ = _run_once(client, image, probe_options(image, count, mode))
    except ENGINE_ERRORS as exc:
        return explain(exc)
    return None if code == 0 else "the GPU probe container exited with code %d" % code


# The --gpus failures that CDI devices may get round: the toolkit in CDI mode, the hook not
# on dockerd's PATH, or no --gpus driver registered at all (a toolkit set up for CDI only).
CDI_MAY_HELP = (CDI_MODE, HOOK_MISSING, NO_RUNTIME)


def attach(client: docker.DockerClient, image: Any, count: int) -> tuple[str, str | None]:
    """How this engine gives a container ``count`` GPUs: (GPUS, None) when --gpus works;
    else, where the way it failed is one CDI devices avoid, (CDI, None) when they work;
    else (GPUS, why), with what CDI said beside the --gpus reason."""
    problem = probe(client, image, count, GPUS)
    if problem is None or problem not in CDI_MAY_HELP:
        return GPUS, problem
    cdi_problem = probe(client, image, count, CDI)
    if cdi_problem is None:
        return CDI, None
    if cdi_problem == NO_RUNTIME:  # an engine without CDI (before Docker 25): nothing to add
        return GPUS, problem
    return GPUS, "%s (CDI devices, nvidia.com/gpu=..., were tried too: %s)" % (
        problem, cdi_problem)


QUERY = ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"]


def query(client: docker.DockerClient, image: Any, count: int,
          mode: str = GPUS) -> tuple[list[GpuInfo], str | None]:
    """The GPUs as nvidia-smi lists them from inside a container (locked down like a cell)
    with ``count`` GPUs attached: ([GpuInfo], None) or ([], why not)."""
    try:
        code, text = _run_once(client, image, dict(probe_options(image, count, mode),
                                                   entrypoint=QUERY))
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


HOST_QUERY = ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,compute_cap,"
              "mig.mode.current", "--format=csv,noheader"]
# A driver too old to know MIG refuses the field: then the GPUs without it.
HOST_QUERY_NO_MIG = ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,compute_cap",
                     "--format=csv,noheader"]


def _capability(text: str) -> tuple[int, int] | None:
    major, _, minor = text.strip().partition(".")
    return (int(major), int(minor)) if major.isdigit() and minor.isdigit() else None


def host_gpus() -> list[GpuInfo] | None:
    """The GPUs as this machine's own nvidia-smi lists them, with their compute capability;
    None where there is no nvidia-smi here or it cannot answer."""
    if shutil.which("nvidia-smi") is None:
        return None
    for command in (HOST_QUERY, HOST_QUERY_NO_MIG):
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if proc.returncode == 0:
            break
    else:
        return None
    gpus = []
    for line in proc.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) in (4, 5) and parts[1][:1].isdigit():
            mig = parts[4].lower() if len(parts) == 5 else ""
            gpus.append(GpuInfo(parts[0], parts[1], parts[2], _capability(parts[3]),
                                {"enabled": True, "disabled": False}.get(mig)))
    return gpus or None


NVIDIA_VENDOR = "0x10de"
# PCI class codes of a GPU: a VGA controller (0x0300xx) or a 3D controller (0x0302xx, the
# data-centre GPUs). NVIDIA's audio and USB functions share the vendor, not the class.
GPU_CLASSES = ("0x0300", "0x0302")


def nvidia_on_pci(devices: Path = Path("/sys/bus/pci/devices")) -> bool:
    """Whether this host's PCI bus has an NVIDIA GPU, driver or not (sysfs: no tool needed)."""
    try:
        entries = list(devices.iterdir())
    except OSError:
        return False
    for entry in entries:
        try:
            vendor = (entry / "vendor").read_text().strip().lower()
            klass = (entry / "class").read_text().strip().lower()
        except OSError:
            continue
        if vendor == NVIDIA_VENDOR and klass.startswith(GPU_CLASSES):
            return True
    return False


def proc_driver() -> str | None:
    """The loaded NVIDIA kernel driver's version, from /proc (no nvidia-smi needed)."""
    try:
        first = Path("/proc/driver/nvidia/version").read_text().splitlines()[0]
    except (OSError, IndexError):
        return None
    for word in first.split():
        if word[:1].isdigit() and word.count(".") >= 1:
            return word
    return None


def probe_image(client: docker.DockerClient) -> Any | None:
    """An image to probe GPUs with: one the kit built, which has `true` and runs on this
    machine. Never another image: `hello-world`, a distroless image or one of another
    architecture cannot start the probe, and the engine would read as refusing GPUs. None
    until the kit has built one (the first cell then probes with its own image)."""
    for filters in ({"label": "envbench.environment"}, {"reference": "envbench/*"}):
        try:
            found = client.images.list(filters=filters)
        except ENGINE_ERRORS:
            return None
        if found:
            return found[0]
    return None


def runtime_works(client: docker.DockerClient, image: Any | None
                  ) -> tuple[bool | None, str | None, str]:
    """Whether the engine gives a container GPUs, by a real `--gpus all` probe (Docker
    registers the GPU driver from nvidia-container-runtime-hook on PATH, with or without a
    "nvidia" runtime entry, so the engine's runtime list proves nothing), then CDI devices
    where --gpus failed their way; and how (GPUS or CDI). (None, why, GPUS) where there is
    no image to probe with yet: then the engine's runtime list is all there is."""
    image = image or probe_image(client)
    if image is None:
        try:
            runtimes = client.info().get("Runtimes") or {}
        except ENGINE_ERRORS as exc:
            return False, connection.explain(exc), GPUS
        return (True if "nvidia" in runtimes else None,
                "not probed (no image in the engine yet); the engine lists %s runtime"
                % ("an NVIDIA" if "nvidia" in runtimes else "no NVIDIA"), GPUS)
    mode, problem = attach(client, image, -1)
    return problem is None, problem, mode


def state(client: docker.DockerClient, image: Any | None) -> GpuState:
    """The runtime (a real probe) and the GPUs: this host's nvidia-smi where it has one,
    else nvidia-smi inside a container with the GPUs attached, else the driver from /proc."""
    runtime, problem, mode = runtime_works(client, image)
    gpus = host_gpus()
    if gpus:
        return GpuState(runtime, tuple(gpus), problem, mode=mode)
    image = image or probe_image(client)
    if runtime and image is not None:
        found, why = query(client, image, -1, mode)
        if found:
            return GpuState(runtime, tuple(found), problem, mode=mode)
        problem = problem or why
    return GpuState(runtime, (), problem, driver_only=proc_driver(), mode=mode,
                    on_pci=nvidia_on_pci(), local=connection.is_local(client))


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
