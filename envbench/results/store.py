"""Result files on the host: where a cell's lives, whether it is current, reading a folder of
them through the contract, and the record the host writes when bench could write none."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from bench import result
from envbench import redact
from envbench.results import contract, identity
from envbench.results.identity import Identity
from envbench.results.record import Result
from envbench.user_errors import UserError


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
    """The record on disk, with no URL's credentials in it (an error may quote a URL): the
    pages, the CSV and compare are made from these files."""
    result.write_atomic(str(path), redact.in_record(record))


# Folders a search for results never enters: the kernel's views (a walk of / would read
# /proc for minutes, and its entries vanish mid-walk), and a run's per-cell folders, which
# come and go while cells run and hold nothing the host has taken across.
NEVER_ENTERED = (Path("/proc"), Path("/sys"), Path("/dev"))
CELL_FOLDERS = ".cells"
MAX_ENTRIES = 200_000  # a reports folder of a thousand runs holds a few thousand


def result_files(paths: list[Path]) -> list[Path]:
    """The result files among ``paths``: files as given, folders searched for *.json
    without following links, skipping what vanishes mid-walk, and refused past MAX_ENTRIES
    entries (`report /` must not read the machine)."""
    files: list[Path] = []
    for path in paths:
        if not path.is_dir():
            files.append(path)
            continue
        real = path.resolve()
        if any(real == top or top in real.parents for top in NEVER_ENTERED):
            raise UserError("%s is the kernel's view of the machine, not a folder of results"
                            % path)
        found: list[Path] = []
        seen = 0
        for root, dirs, names in os.walk(path, onerror=lambda _: None, followlinks=False):
            here = Path(root)
            dirs[:] = [d for d in dirs if d != CELL_FOLDERS
                       and (here / d).resolve() not in NEVER_ENTERED]
            seen += len(dirs) + len(names)
            if seen > MAX_ENTRIES:
                raise UserError("%s holds more than %d entries: give the folder of results "
                                "(e.g. reports/results), not one above it" % (path,
                                                                              MAX_ENTRIES))
            found.extend(here / n for n in names if n.endswith(".json"))
        files.extend(sorted(found))
    return files


def load_all(paths: list[Path]) -> tuple[list[Result], list[tuple[str, str]]]:
    """Valid results from files and folders, and (file, reason) for each one left out.
    Two files of one cell identity and repeat number are one repeat (a copy under another
    name must not count twice): the later written is kept, the other left out naming it."""
    loaded: dict[tuple[Identity, int], Result] = {}
    skipped = []
    for path in result_files(paths):
        try:
            record = contract.load(path)
        except contract.InvalidResult as exc:
            skipped.append((str(path), str(exc)))
            continue
        found = Result.of(record, path)
        key = (identity.of_record(record), found.cell.repeat)
        other = loaded.get(key)
        if other is None:
            loaded[key] = found
            continue
        keep, drop = (found, other) if found.written_at > other.written_at else (other, found)
        loaded[key] = keep
        skipped.append((str(drop.path), "the same cell and repeat (%d) as %s: one repeat, "
                        "counted once" % (keep.cell.repeat,
                                          keep.path.name if keep.path else "another file")))
    return list(loaded.values()), skipped
