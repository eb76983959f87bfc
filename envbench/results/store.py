"""Result files on the host: where a cell's lives, whether it is current, reading a folder of
them through the contract, and the record the host writes when bench could write none."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import result
from envbench.results import contract, identity
from envbench.results.identity import Identity
from envbench.results.record import Result


def path_for(results_dir: Path, ident: Identity, variant: dict[str, Any]) -> Path:
    """Where a cell's result lives: its file stem, in the results folder."""
    return results_dir / ("%s.json" % ident.file_stem(variant))


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


def write(path: Path, record: dict[str, Any]) -> None:
    result.write_atomic(str(path), record)


def result_files(paths: list[Path]) -> list[Path]:
    """The result files among ``paths``: files as given, folders searched for *.json."""
    files: list[Path] = []
    for path in paths:
        files.extend(sorted(path.rglob("*.json")) if path.is_dir() else [path])
    return files


def load_all(paths: list[Path]) -> tuple[list[Result], list[tuple[str, str]]]:
    """Valid results from files and folders, and (file, reason) for each one left out."""
    loaded, skipped = [], []
    for path in result_files(paths):
        try:
            loaded.append(Result.of(contract.load(path), path))
        except contract.InvalidResult as exc:
            skipped.append((str(path), str(exc)))
    return loaded, skipped
