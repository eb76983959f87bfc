"""A cell's container spec, made once from the cell: what it mounts (its results folder, the
data, the user's workload and inputs), its environment and its limits. The engine renders it
for Docker (containerrun), a Slurm job for Podman, Apptainer or Pyxis (slurm/jobcells.py); each
only says where its copies of the files are.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from envbench.cells.resources import Resources
from envbench.engine import gpu
from envbench.engine.spec import Bind, ContainerSpec, Scratch, cell_environment
from envbench.matrix.grammars import size_bytes
from envbench.matrix.workloads import WorkloadPlan
from envbench.users import host_user

BYTECODE_TMPFS = 16 * 2**20  # what Python may write in a hidden __pycache__ (nothing, here)


@dataclass(frozen=True)
class CellFiles:
    """Where the runtime's machine has a cell's files: ``workload`` and each of ``inputs``
    (in the plan's order) the user's own or a copy of it."""

    results: str                       # the cell's own empty folder, its only writable mount
    data: str | None = None            # the CIFAR-10 root; None: synthetic data
    workload: str | None = None
    inputs: tuple[str, ...] = ()
    # Hide the workload's __pycache__ folders (a copy made without them has none to hide).
    hide_bytecode: bool = True


def binds(files: CellFiles, plan: WorkloadPlan | None) -> tuple[tuple[Bind, ...],
                                                                  tuple[Scratch, ...]]:
    """The mounts: results writable, everything else read-only (the cell can neither change
    the user's code, data and weights nor leave files in them)."""
    mounts = [Bind(files.results, "/results", read_only=False)]
    if files.data is not None:
        mounts.append(Bind(files.data, "/data"))
    scratch: list[Scratch] = []
    if plan is not None and files.workload is not None and plan.mount_point is not None:
        mounts.append(Bind(files.workload, plan.mount_point))
        if files.hide_bytecode:
            scratch = [Scratch("%s/%s" % (plan.mount_point, cache), BYTECODE_TMPFS)
                       for cache in plan.bytecode_caches]
        if len(files.inputs) != len(plan.inputs):
            raise ValueError("%d input copies for %d inputs" % (len(files.inputs),
                                                                len(plan.inputs)))
        mounts += [Bind(source, given.mount_point)
                   for given, source in zip(plan.inputs, files.inputs)]
    return tuple(mounts), tuple(scratch)


def gpu_count(resources: Resources) -> int:
    """The GPUs a cell asks its runtime for: 0 for a CPU cell, -1 for all."""
    return gpu.requested_count(resources.gpus) if resources.device == "cuda" else 0


def cell_spec(name: str, image: str, image_id: str, image_tag: str, args: Sequence[str],
              resources: Resources, files: CellFiles, plan: WorkloadPlan | None,
              pin_cpuset: bool = True, gpus: int | None = None) -> ContainerSpec:
    """``image`` is what the runtime starts (an ID, a SIF, a squashfs); ``image_id`` and
    ``image_tag`` the built image's, which the cell records. ``pin_cpuset`` False: Slurm
    binds a step to the CPUs it gave the job, and a cpuset of the kit's own could name
    cores the step was not given; the quota and the thread count stay."""
    mounts, scratch = binds(files, plan)
    return ContainerSpec(
        name=name, image=image, args=tuple(args),
        environment=cell_environment(image_id, image_tag, resources.device),
        user=host_user(), binds=mounts, scratch=scratch,
        cpus=resources.cpus, cpuset=resources.cpuset if pin_cpuset else None,
        memory_bytes=size_bytes(resources.memory) if resources.memory else None,
        swap_bytes=size_bytes(resources.swap) if resources.swap else 0,
        gpus=gpu_count(resources) if gpus is None else gpus)
