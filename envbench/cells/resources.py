"""What a cell may use: CPU quota, cores, threads, memory, swap and GPUs, decided in one place.

A CPU figure is only fair when torch runs as many threads as the cell has CPUs: with fewer it
leaves cores idle, with more it is throttled by the quota. So the thread count is derived
from the target (``cpus``, else the cpuset's size, else the host's cores), the quota and the
cpuset are made to match it, and all of it is recorded in every result. An explicit
``threads:`` in the matrix still wins, and says so.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from envbench.engine.host import Host
from envbench.matrix.models import Target, cpuset_size


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
    memory_from: str | None = None      # "matrix", or "host" for the default CPU-cell limit
    host_memory_bytes: int | None = None

    def as_record(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        """One line for people: '2 threads (quota 2 CPUs, cores 0-1)'."""
        parts = []
        if self.cpus is not None:
            parts.append("quota %d CPU%s" % (self.cpus, "s" if self.cpus != 1 else ""))
        if self.cpuset is not None:
            parts.append("cores %s" % self.cpuset)
        if self.gpus is not None:
            parts.append("GPUs %s" % self.gpus)
        if self.memory is not None:
            parts.append("memory %s%s%s" % (self.memory, " (host less a reserve)"
                                             if self.memory_from == "host" else "",
                                             " + swap %s" % self.swap if self.swap
                                             else ", no swap"))
        source = {"matrix": "as the matrix says", "cpus": "= cpus", "cpuset": "= cpuset size",
                  "host": "= host cores"}[self.threads_from]
        return "%d thread%s (%s)%s" % (self.threads, "s" if self.threads != 1 else "", source,
                                       "; " + ", ".join(parts) if parts else "")


def default_memory(host_memory: int) -> str:
    """A CPU cell with no memory: in the matrix may use the host's memory less a reserve for
    the host itself (10%, at least 1 GiB), so a runaway cell is killed, not the machine."""
    reserve = max(2**30, host_memory // 10)
    return "%dm" % max(64, (host_memory - reserve) // 2**20)


def plan(target: Target, host: Host | int, threads: int | None = None,
         parallel: str = "none", pin_cores: bool = True) -> Resources:
    """The resources of a cell on ``target`` on ``host`` (a Host, or just its CPU count).

    ``threads`` is the matrix's explicit setting (None: derive it). A quota above what the
    host has is capped to the host (the engine refuses more), and the cpuset then names the
    first cores, so that quota and cores agree. A cell that trains on one device
    (``parallel: none``) gets one GPU of a target with ``gpus: all`` or ``gpus: 2``: it
    trains on cuda:0 alone, and its row must not read "8 × H200".
    """
    if not isinstance(host, Host):
        host = Host(host)
    host_cpus, host_memory = max(1, int(host.cpus)), host.memory
    cpus, cpuset = target.cpus, target.cpuset
    if cpus is not None:
        cpus = min(cpus, host_cpus)
        # pin_cores False: a scheduler (Slurm) binds the cell to the cores it gave the job.
        cpuset = cpuset or (_first_cores(cpus) if pin_cores else None)
        effective, source = cpus, "cpus"
    elif cpuset is not None:
        effective = cpuset_size(cpuset)
        cpus, source = effective, "cpuset"
    else:
        effective, source = host_cpus, "host"
    if threads is not None:
        effective, source = threads, "matrix"
    memory, memory_from = target.memory, "matrix" if target.memory else None
    if memory is None and target.device == "cpu" and host_memory:
        memory, memory_from = default_memory(host_memory), "host"
    return Resources(device=target.device, cpus=cpus, cpuset=cpuset, threads=effective,
                     threads_from=source, host_cpus=host_cpus, memory=memory,
                     swap=target.swap, gpus=_gpus(target, parallel),
                     memory_from=memory_from, host_memory_bytes=host_memory)


def _gpus(target: Target, parallel: str) -> str | int | None:
    if target.device != "cuda":
        return None
    if parallel == "none":
        return 1  # one device trains: `gpus: 2` would attach a GPU that sits idle
    return target.gpus


def _first_cores(count: int) -> str:
    return "0" if count == 1 else "0-%d" % (count - 1)
