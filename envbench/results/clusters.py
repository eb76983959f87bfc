"""What each cloud cluster of a fan-out did and cost: REPORTS/cloud/runs.json, written by
`./noxw -s cloud` and read by the report's cloud table."""
from __future__ import annotations

import enum
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from envbench import users
from envbench.results import contract


class ClusterState(enum.Enum):
    PENDING = "pending"
    LAUNCHING = "launching"
    RUNNING = "running"
    FETCHING = "fetching"
    DONE = "done"
    FAILED = "failed"
    INTERRUPTED = "interrupted"

    @property
    def ended(self) -> bool:
        return self in (ClusterState.DONE, ClusterState.FAILED)


@dataclass
class ClusterRun:
    """One target's cluster: filled in as the fan-out goes, then written down."""

    target: str
    cluster: str
    accelerators: str
    infra: str
    price_per_hour: float | None
    price_source: str
    state: ClusterState = ClusterState.PENDING
    exit_code: int | None = None
    results: list[str] = field(default_factory=list)
    fetched_by: str | None = None  # "rsync over ssh" or "the job's log"
    message: str | None = None
    wall_s: float | None = None
    cost: float | None = None  # the provider's own figure, where it gives one
    cost_source: str | None = None
    provisioned: bool = False

    @property
    def estimated_cost(self) -> float | None:
        if self.price_per_hour is None or self.wall_s is None or not self.provisioned:
            return None
        return self.price_per_hour * self.wall_s / 3600.0

    def as_record(self) -> dict[str, Any]:
        return dict(asdict(self), state=self.state.value, estimated_cost=self.estimated_cost)


def path_of(reports: Path) -> Path:
    return reports / "cloud" / "runs.json"


def write(reports: Path, launcher: str, runs: list[ClusterRun]) -> Path:
    path = path_of(reports)
    users.write_text(path, json.dumps(
        {"launcher": launcher, "runs": [run.as_record() for run in runs]}, indent=2) + "\n")
    return path


_TYPES: dict[str, tuple[type, ...]] = {
    "target": (str,), "cluster": (str,), "accelerators": (str,), "infra": (str,),
    "price_per_hour": (int, float, type(None)), "price_source": (str,),
    "exit_code": (int, type(None)), "fetched_by": (str, type(None)),
    "message": (str, type(None)), "wall_s": (int, float, type(None)),
    "cost": (int, float, type(None)), "cost_source": (str, type(None)),
    "provisioned": (bool,),
}


def _run(entry: Any) -> ClusterRun | None:
    """One entry as a ClusterRun; None when it is not one this kit wrote."""
    if not isinstance(entry, dict):
        return None
    known = {f.name for f in fields(ClusterRun)}
    values = {k: v for k, v in entry.items() if k in known}
    if any(not isinstance(values.get(k), kinds) for k, kinds in _TYPES.items()):
        return None
    results = values.get("results", [])
    if not isinstance(results, list) or not all(isinstance(r, str) for r in results):
        return None
    try:
        values["state"] = ClusterState(values.get("state"))
    except ValueError:
        return None
    return ClusterRun(**values)


def read(reports: Path) -> list[ClusterRun]:
    """The last fan-out's clusters; entries that are not well-formed are left out, and a
    missing or unreadable file is no clusters (a report without a cloud table)."""
    try:
        # Not through a link, not a FIFO, not more than the cap: see contract.read_capped.
        document = contract.parse(contract.read_capped(path_of(reports)).decode("utf-8"))
    except (OSError, UnicodeDecodeError, contract.InvalidResult):
        return []
    runs = document.get("runs") if isinstance(document, dict) else None
    return [run for run in map(_run, runs if isinstance(runs, list) else [])
            if run is not None]
