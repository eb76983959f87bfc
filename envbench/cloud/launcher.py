"""The seam between the fan-out and whatever provides the VMs.

Two implementations: SkyPilot's (``envbench.cloud.sky.SkyLauncher``: real clouds) and local
sshd containers (``envbench.cloud.local.LocalLauncher``: the same task, run script and env on
"VMs" reached over ssh on 127.0.0.1, which is how the fan-out is tested without a cloud).
Either way a cluster is reached afterwards over ssh with a per-cluster config alias, which is
how results come home (rsync).
"""
from __future__ import annotations

import io
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

LineSink = Callable[[str], None]


class ProvisionFailed(Exception):
    """The cluster could not be brought up (no capacity, no credentials, quota): the reason
    is the provider's own, and the target's cells are recorded as failed with it."""


@dataclass(frozen=True)
class Remote:
    """How to reach a launched cluster: ``ssh`` + ``alias`` (rsync -e uses the same)."""

    alias: str
    ssh: list[str] = field(default_factory=lambda: ["ssh"])
    workdir: str = "~/sky_workdir"


class Launcher(Protocol):
    """One cluster per cloud target. Every call may run concurrently for different clusters."""

    name: str

    def launch(self, cluster: str, task: dict[str, Any], out: LineSink) -> Remote:
        """Provision, sync the workdir and file mounts, run setup, start the run script.
        Raises ProvisionFailed with the provider's reason."""

    def wait(self, cluster: str, out: LineSink) -> int:
        """Stream the run script's output until it ends; its exit code."""

    def down(self, cluster: str) -> None:
        """Tear the cluster down (idempotent: a cluster never brought up is fine)."""

    def clusters(self) -> list[str]:
        """The names of every cluster this user has with the provider (to find leftovers)."""

    def costs(self, clusters: list[str]) -> dict[str, float]:
        """What each cluster cost, from the provider's own accounting (empty: unknown)."""


class LineStream(io.TextIOBase):
    """A text stream (for SDKs that write to one) that hands complete lines to a sink."""

    def __init__(self, sink: LineSink) -> None:
        super().__init__()
        self._sink = sink
        self._pending = ""
        self._lock = threading.Lock()

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        with self._lock:
            self._pending += text.replace("\r\n", "\n").replace("\r", "\n")
            *lines, self._pending = self._pending.split("\n")
        for line in lines:
            self._sink(line)
        return len(text)

    def flush(self) -> None:
        with self._lock:
            rest, self._pending = self._pending, ""
        if rest:
            self._sink(rest)
