"""Whether a CUDA stack's cells can run on this host, said before anything is fetched or
built: its kernels against the GPU's compute capability, the engine's GPU runtime, and the
driver against the stack's CUDA. `bench` records the cells of a stack that cannot run with
the sentence, without building its image; `doctor` prints the same verdicts."""
from __future__ import annotations

from dataclasses import dataclass

import docker

from bench.rules import FailureKind
from envbench.engine import gpu
from envbench.engine.connection import ENGINE_ERRORS
from envbench.engine.gpu import GpuState
from envbench.images import archs
from envbench.images.archs import Archs
from envbench.matrix.models import Environment


@dataclass(frozen=True)
class GpuBlock:
    """Why this host cannot run an environment's GPU cells: the error type its cells are
    recorded with, and the sentence."""

    kind: str
    sentence: str


def stack_archs(client: docker.DockerClient, env: Environment, tag: str | None
                ) -> Archs | None:
    """The stack's compiled architectures: the label of the image that will run (``tag``,
    the plan's), where the engine has it; else the published list of a default stack; else
    None (unknown: not checked). Never another image of the same environment name: one built
    from other pins may have other kernels."""
    image = None
    if tag is not None:
        try:
            image = client.images.get(tag)
        except docker.errors.ImageNotFound:
            image = None
        except ENGINE_ERRORS:
            image = None
    label = ((image.labels or {}).get(archs.LABEL) if image is not None else None)
    if label:
        return Archs.parse(label, "the image %s" % tag)
    return archs.known(env.torch, env.cuda)


def block(name: str, env: Environment, found: GpuState, compiled: Archs | None
          ) -> GpuBlock | None:
    """The first reason the stack's GPU cells cannot run here, or None."""
    first = found.gpus[0] if found.gpus else None
    if found.absent:
        return GpuBlock(FailureKind.NO_GPU, gpu.NO_GPU)
    if first is not None and first.mig:
        # A MIG instance is a slice of the GPU, with its own SMs and memory: figures from it
        # are not the GPU's, and --gpus hands a container whole GPUs, not instances.
        return GpuBlock(FailureKind.GPU_UNAVAILABLE,
                        "GPU 0 (%s) is in MIG mode: the kit measures whole GPUs; disable MIG "
                        "(`sudo nvidia-smi -i 0 -mig 0`, then reset the GPU or reboot) or run on "
                        "a GPU without it" % first.name)
    if first is not None and first.capability is not None and compiled is not None:
        problem = archs.misfit(name, env.torch, env.cuda, compiled, first.name, first.capability)
        if problem:
            return GpuBlock(FailureKind.NO_KERNELS, problem)
    if found.runtime is False:
        return GpuBlock(FailureKind.GPU_UNAVAILABLE, found.problem or gpu.NO_RUNTIME)
    issue = gpu.driver_problem(name, env.cuda or "", found.driver)
    if issue:
        return GpuBlock(FailureKind.DRIVER_TOO_OLD, issue)
    return None


def fit_line(name: str, env: Environment, found: GpuState, compiled: Archs | None) -> str:
    """What the doctor says of a stack that can run here (or cannot be judged)."""
    first = found.gpus[0] if found.gpus else None
    parts = []
    if first is not None and first.capability is not None and compiled is not None:
        parts.append("kernels for sm_%d%d (this %s)" % (*first.capability, first.name))
    elif compiled is None:
        parts.append("its architectures are unknown until its image is built")
    needed = gpu.min_driver(env.cuda or "")
    parts.append("CUDA %s needs driver >= %s; this host has %s"
                 % (env.cuda, needed or "?", found.driver or "an unknown driver"))
    return "%s: %s" % (name, "; ".join(parts))


def blocks(client: docker.DockerClient, environments: dict[str, Environment],
           found: GpuState, tags: dict[str, str | None]) -> dict[str, GpuBlock]:
    out = {}
    for name, env in environments.items():
        reason = block(name, env, found, stack_archs(client, env, tags.get(name)))
        if reason is not None:
            out[name] = reason
    return out
