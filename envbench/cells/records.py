"""The records the host writes for a cell: bench's own completed with what only the host
knows, and the one kind of failed record (a build that failed, a GPU this host cannot
give, a cloud VM that never came up), written the same way wherever the failure happened."""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from envbench import users
from envbench.cells.expansion import Prepared
from envbench.matrix.models import Target
from envbench.results import store

NO_IMAGE: dict[str, Any] = {"tag": None, "id": None}


def annotate(record: dict[str, Any], p: Prepared, target: Target, image: dict[str, Any],
             target_accuracy: float | None, price: float | None = None,
             price_source: str | None = None,
             order: dict[str, Any] | None = None) -> dict[str, Any]:
    """Fill the sections only the host knows, so a result file explains itself. ``price``
    is the target's unless another (a cloud catalog's) is given with its source."""
    cell = p.cell
    record["cell"] = {
        "environment": cell.environment, "target": cell.target, "target_label": target.label,
        "price_per_hour": target.price_per_hour if price is None else price,
        "repeat": cell.repeat, "variant": dict(cell.variant), "id": p.file_stem,
        "quick": cell.quick, "resources": p.resources.as_record(),
        "data": p.identity.data.as_record(), "target_accuracy": target_accuracy,
        "order": order,
    }
    if price_source is not None:
        record["cell"]["price_source"] = price_source
    env = record.setdefault("env", {})
    env["image"] = dict(env.get("image") or {}, **image)
    record.setdefault("written_at", datetime.now(timezone.utc).isoformat(timespec="seconds"))
    return record


def save(results_dir: Path, p: Prepared, record: dict[str, Any]) -> Path:
    """Write the cell's record where its identity says, owned by the invoking user."""
    path = store.path_for(results_dir, p.identity, p.cell.variant)
    store.write(path, record)
    users.own(path)
    return path


def failed(results_dir: Path, p: Prepared, target: Target, kind: str, message: str,
           target_accuracy: float | None, image: dict[str, Any] | None = None,
           price: float | None = None, price_source: str | None = None,
           order: dict[str, Any] | None = None) -> dict[str, Any]:
    """Record the cell as failed with ``kind`` and the one sentence that says why."""
    record = store.host_failure(p.config, kind, message)
    annotate(record, p, target, image or NO_IMAGE, target_accuracy, price, price_source,
             order)
    save(results_dir, p, record)
    return record
