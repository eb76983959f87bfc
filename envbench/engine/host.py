"""The machine the engine runs cells on: its CPUs and memory, which the cells' resources are
planned against (the engine may run elsewhere than the kit)."""
from __future__ import annotations

import os
from dataclasses import dataclass

import docker

from envbench.engine.connection import ENGINE_ERRORS


@dataclass(frozen=True)
class Host:
    """The machine the engine runs cells on: its CPUs and memory (None: unknown)."""

    cpus: int
    memory: int | None = None

    @classmethod
    def local(cls) -> Host:
        try:
            memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            memory = None
        return cls(os.cpu_count() or 1, memory)

    @classmethod
    def of_engine(cls, client: docker.DockerClient) -> Host:
        """The engine host's CPUs and memory, as the engine reports them; this machine's
        where it does not say."""
        local = cls.local()
        try:
            info = client.info()
            return cls(int(info.get("NCPU") or local.cpus),
                       int(info.get("MemTotal") or 0) or local.memory)
        except (*ENGINE_ERRORS, ValueError, TypeError):
            return local
