"""What a run's records add up to: each record ok, refused by design or failed, and the one
exit code every command that runs cells returns (docs/running.md, "Exit codes").

Refused by design: a GPU cell of a stack with no kernels for this GPU (the write-up's CUDA
11.6 stack on an H100), or any GPU cell on a host with no NVIDIA GPU at all. Both were
asked for by a matrix that lists more than this host has; the run says so and goes on. A
missing runtime, a driver too old or a cell that crashed are faults: someone must act.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bench.rules import FailureKind

# The error types of the refusals (envbench.cells.gpufit records them).
REFUSED_BY_DESIGN = frozenset({FailureKind.NO_KERNELS, FailureKind.NO_GPU})


def of(record: Any) -> str:
    """"ok", "refused" or "failed", of a record as written (a dict) or as read (a Result)."""
    if isinstance(record, dict):
        status, kind = record.get("status"), (record.get("error") or {}).get("type")
    else:
        status, kind = record.status, getattr(record.error, "type", None)
    if status == "ok":
        return "ok"
    return "refused" if kind in REFUSED_BY_DESIGN else "failed"


@dataclass(frozen=True)
class Tally:
    """How many records of a run ran, were refused by design, failed."""

    ok: int
    refused: int
    failed: int

    @classmethod
    def of(cls, records: Iterable[dict[str, Any]]) -> Tally:
        kinds = [of(r) for r in records]
        return cls(kinds.count("ok"), kinds.count("refused"), kinds.count("failed"))

    @property
    def exit_code(self) -> int:
        """0: every asked cell ran or was refused by design; 1: a cell failed, or nothing
        was measured at all (every cell refused: a script must not read that as a run)."""
        return 1 if self.failed or not self.ok else 0

    def sentence(self) -> str:
        parts = ["%d ran" % self.ok]
        if self.refused:
            parts.append("%d refused by design (this host cannot run them, as said above)"
                         % self.refused)
        if self.failed:
            parts.append("%d failed" % self.failed)
        if not self.ok and not self.failed:
            parts.append("nothing was measured")
        return ", ".join(parts)
