"""Result files on the host: where they live, whether one is current, and records for cells
that failed before bench could write its own."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench import result
from envbench.cells import Cell

# The options that decide a cell's outcome: a stored result counts only if all are the same.
CONFIG_KEYS = ("epochs", "batch_size", "pipeline", "workers", "amp", "channels_last", "compile",
               "accumulate", "threads", "seed", "deterministic", "limit", "limit_test")


def path_for(results_dir: Path, cell: Cell) -> Path:
    return results_dir / ("%s.json" % cell.id)


def read(path: Path) -> dict[str, Any] | None:
    """The record at ``path``, or None when it is absent, torn or not a result."""
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and not result.validate(record) else None


def is_current(record: dict[str, Any] | None, cell: Cell, image_id: str, synthetic: bool) -> bool:
    """True when ``record`` is an ok result of this very cell, image and configuration."""
    if record is None or record.get("status") != "ok":
        return False
    config = record.get("config", {})
    if bool(config.get("synthetic")) != synthetic:
        return False
    if any(config.get(k) != cell.settings.get(k) for k in CONFIG_KEYS):
        return False
    return (record.get("env", {}).get("image") or {}).get("id") == image_id


def host_failure(cell: Cell, device: str, synthetic: bool, error_type: str,
                 message: str) -> dict[str, Any]:
    """A failed record written by the host (the container never produced one)."""
    config = {k: cell.settings.get(k) for k in CONFIG_KEYS}
    config.update({"device": device, "synthetic": synthetic,
                   "data": None if synthetic else "/data"})
    record = result.new_record(config)
    record["error"] = {"type": error_type, "message": message}
    for key in result.REQUIRED["env"]:
        record["env"].setdefault(key, None)
    record["env"]["image"] = {"tag": None, "id": None}
    return record


def annotate(record: dict[str, Any], cell: Cell, target_label: str, price: float,
             image: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Fill the sections only the host knows, so a result file explains itself."""
    record["cell"] = {
        "environment": cell.environment, "target": cell.target, "target_label": target_label,
        "price_per_hour": price, "repeat": cell.repeat, "variant": dict(cell.variant),
        "id": cell.id, **extra,
    }
    env = record.setdefault("env", {})
    env["image"] = dict(env.get("image") or {}, **image)
    return record


def write(path: Path, record: dict[str, Any]) -> None:
    result.write_atomic(str(path), record)
