"""What a cell may use: CPU quota, cores, threads, memory, swap and GPUs, decided in one place.

A CPU figure is only fair when torch runs as many threads as the cell has CPUs: with fewer it
leaves cores idle, with more it is throttled by the quota. So the thread count is derived
from the target (``cpus``, else the cpuset's size, else the host's cores), the quota and the
cpuset are made to match it, and all of it is recorded in every result. An explicit
``threads:`` in the matrix still wins, and says so.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from envbench.matrix import Target, cpuset_size

UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30}


@dataclass(frozen=True)
class Resources:
    device: str
    cpus: int | None           # the CFS quota (docker --cpus); None: no quota
    cpuset: str | None         # the cores (docker --cpuset-cpus); None: any
    threads: int               # torch intra-op threads (bench --threads)
    threads_from: str          # "matrix", "cpus", "cpuset" or "host"
    host_cpus: int             # the engine host's CPU count the plan was made for
    memory: str | None
    swap: str | None
    gpus: str | int | None

    def as_record(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        """One line for people: '2 threads (quota 2 CPUs, cores 0-1)'."""
        parts = []
        if self.cpus is not None:
            parts.append("quota %d CPU%s" % (self.cpus, "s" if self.cpus != 1 else ""))
        if self.cpuset is not None:
            parts.append("cores %s" % self.cpuset)
        if self.memory is not None:
            parts.append("memory %s%s" % (self.memory, " + swap %s" % self.swap
                                          if self.swap else ", no swap"))
        source = {"matrix": "as the matrix says", "cpus": "= cpus", "cpuset": "= cpuset size",
                  "host": "= host cores"}[self.threads_from]
        return "%d thread%s (%s)%s" % (self.threads, "s" if self.threads != 1 else "", source,
                                       "; " + ", ".join(parts) if parts else "")


def plan(target: Target, host_cpus: int, threads: int | None = None) -> Resources:
    """The resources of a cell on ``target`` on a host with ``host_cpus`` CPUs.

    ``threads`` is the matrix's explicit setting (None: derive it). A quota above what the
    host has is capped to the host (the engine refuses more), and the cpuset then names the
    first cores, so that quota and cores agree.
    """
    host_cpus = max(1, int(host_cpus))
    cpus, cpuset = target.cpus, target.cpuset
    if cpus is not None:
        cpus = min(cpus, host_cpus)
        cpuset = cpuset or _first_cores(cpus)
        effective, source = cpus, "cpus"
    elif cpuset is not None:
        effective = cpuset_size(cpuset)
        cpus, source = effective, "cpuset"
    else:
        effective, source = host_cpus, "host"
    if threads is not None:
        effective, source = threads, "matrix"
    return Resources(device=target.device, cpus=cpus, cpuset=cpuset, threads=effective,
                     threads_from=source, host_cpus=host_cpus, memory=target.memory,
                     swap=target.swap, gpus=target.gpus if target.device == "cuda" else None)


def _first_cores(count: int) -> str:
    return "0" if count == 1 else "0-%d" % (count - 1)


def size_bytes(size: str) -> int:
    """Docker's size grammar as the matrix accepts it ('16g', '512m', '1024')."""
    match = re.fullmatch(r"(\d+)([kmg]?)", size)
    if match is None:
        raise ValueError("%r is not a size such as 512m or 16g" % size)
    return int(match.group(1)) * UNITS[match.group(2)]


def container_limits(resources: Resources) -> dict[str, Any]:
    """The Docker SDK's keyword arguments for these resources (GPUs aside)."""
    options: dict[str, Any] = {}
    if resources.cpus is not None:
        options["nano_cpus"] = int(resources.cpus * 1e9)
    if resources.cpuset is not None:
        options["cpuset_cpus"] = resources.cpuset
    if resources.memory is not None:
        memory = size_bytes(resources.memory)
        options["mem_limit"] = memory
        # memswap is memory + swap; equal to memory, a cell that needs more is an OOM.
        swap = size_bytes(resources.swap) if resources.swap else 0
        options["memswap_limit"] = memory + swap
    return options
