"""Result files on the host: where a cell's lives, whether it is current, and the records the
host writes itself (failures before bench could write one)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import result
from envbench.cells.expansion import Cell
from envbench.cells.resources import Resources
from envbench.results import contract, identity
from envbench.results.identity import Identity


def path_for(results_dir: Path, ident: Identity, cell: Cell) -> Path:
    return results_dir / ("%s.json" % ident.file_stem(cell.variant))


def read(path: Path) -> dict[str, Any] | None:
    """The record at ``path``, or None when it is absent, torn or not a valid result."""
    if not path.exists():
        return None
    try:
        return contract.load(path)
    except contract.InvalidResult:
        return None


def is_current(record: dict[str, Any] | None, ident: Identity) -> bool:
    """True when ``record`` is an ok result of this very measurement (see envbench.identity)."""
    return record is not None and record["status"] == "ok" and identity.of_record(record) == ident


def host_failure(config: dict[str, Any], error_type: str, message: str) -> dict[str, Any]:
    """A failed record written by the host (the container never produced one)."""
    record = result.new_record(dict(config))
    record["error"] = {"type": error_type, "message": message}
    for key in result.REQUIRED["env"]:
        record["env"].setdefault(key, None)
    record["env"]["image"] = {"tag": None, "id": None}
    return record


def annotate(record: dict[str, Any], cell: Cell, ident: Identity, label: str | None,
             price: float | None, resources: Resources, image: dict[str, Any],
             target_accuracy: float | None) -> dict[str, Any]:
    """Fill the sections only the host knows, so a result file explains itself."""
    record["cell"] = {
        "environment": cell.environment, "target": cell.target, "target_label": label,
        "price_per_hour": price, "repeat": cell.repeat, "variant": dict(cell.variant),
        "id": ident.file_stem(cell.variant), "quick": cell.quick,
        "resources": resources.as_record(), "data": dict(ident.data),
        "target_accuracy": target_accuracy,
    }
    env = record.setdefault("env", {})
    env["image"] = dict(env.get("image") or {}, **image)
    return record


def write(path: Path, record: dict[str, Any]) -> None:
    result.write_atomic(str(path), record)
