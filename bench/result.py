"""The result JSON: the one contract between bench (in containers) and the host.

The contract itself is ``result.schema.json`` beside this file (JSON Schema 2020-12): types,
ranges, enums and nullability of every field. This module writes records in that shape and
stays torch-free, dependency-free and Python 3.8 compatible, because it runs inside every
image. Validation needs a JSON Schema validator, which images do not carry: the host
(``envbench.contract``) and bench's tests validate with ``jsonschema``.
"""
from __future__ import annotations

import json
import math
import os
import tempfile
from typing import Any, Dict, Union

SCHEMA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "result.schema.json")
with open(SCHEMA_PATH, encoding="utf-8") as _f:
    SCHEMA_DOCUMENT = json.load(_f)
SCHEMA = SCHEMA_DOCUMENT["properties"]["schema"]["const"]

_DEFS = SCHEMA_DOCUMENT["$defs"]
# Required keys per section, read from the schema so that there is one list, not two.
REQUIRED = {section: tuple(_DEFS[section]["required"])
            for section in ("cell", "config", "env", "memory", "summary")}
PHASES = tuple(_DEFS["phases"]["required"])


def empty_cell() -> Dict[str, Any]:
    """The cell section as bench leaves it; the host runner fills it in."""
    cell = dict.fromkeys(REQUIRED["cell"])
    cell["variant"] = {}
    return cell


def new_record(config: Dict[str, Any]) -> Dict[str, Any]:
    """A record as it starts: failed until the run proves otherwise."""
    return {
        "schema": SCHEMA, "status": "failed", "error": None, "cell": empty_cell(),
        "config": config, "env": {}, "epochs": [],
        "memory": dict.fromkeys(REQUIRED["memory"]),
        "summary": dict.fromkeys(REQUIRED["summary"]),
        "model": None, "parallel": None, "profile": None, "probe": None,
    }


def finite_or_none(value: Any) -> Any:
    """NaN and infinities are not JSON: a diverged loss is recorded as null (not measurable)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_text_atomic(path: "Union[str, os.PathLike[str]]", text: str) -> None:
    """Write a file so that a reader sees the old one or the whole new one, never a torn one."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_atomic(path: "Union[str, os.PathLike[str]]", record: Dict[str, Any]) -> None:
    # allow_nan=False: a non-finite number is a bug to see here, not a file no reader accepts.
    write_text_atomic(path, json.dumps(record, indent=1, sort_keys=True, allow_nan=False) + "\n")
