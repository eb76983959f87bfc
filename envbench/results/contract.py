"""Reading result files as the contract says: strict JSON, bench's JSON Schema, older versions.

Every file the host reads goes through ``load``: a file that is not a valid result raises
``InvalidResult`` with one sentence (the first problem and where it is), so callers can list
it by name and go on. Nothing in a file's content may end in a traceback.
"""
from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any, cast

import jsonschema
from jsonschema.exceptions import best_match

from bench import result
from envbench import files
from envbench.results import crossfoot
from envbench.results.record import Result

MAX_BYTES = 32 * 2**20  # a 5-epoch result is ~10 kB; a larger file is not one of ours
MAX_DEPTH = 32
MAX_INT_DIGITS = 18  # beyond int64: no count, size or seed is that large
SCHEMA_1 = "envbench.result/1"
SCHEMA_2 = "envbench.result/2"
SCHEMA_3 = "envbench.result/3"
SCHEMA_4 = "envbench.result/4"


class InvalidResult(ValueError):
    """The file is not a result this host can read; the message says why in one sentence."""


def _strict_integer(checker: Any, instance: Any) -> bool:
    # JSON Schema calls 1.0 an integer; a count of 1.0 is a typo this contract refuses.
    return isinstance(instance, int) and not isinstance(instance, bool)


_Validator = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer",
                                                                       _strict_integer))
_VALIDATOR = _Validator(result.SCHEMA_DOCUMENT)


def _reject_constant(name: str) -> Any:
    raise ValueError("%s is not a number JSON allows" % name)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("%s is out of range" % text)
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError("integer %s… is out of range" % text[:12])
    return int(text)


def parse(text: str) -> Any:
    """JSON without NaN, Infinity or numbers that overflow, nested at most MAX_DEPTH deep."""
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float,
                           parse_int=_bounded_int)
    except RecursionError:
        raise InvalidResult("not a result: nested too deeply")
    except ValueError as exc:
        raise InvalidResult("not valid JSON (%s)" % _short(str(exc)))
    _check_depth(value)
    return value


def _max_items(schema: Any) -> int:
    """The longest list the schema allows anywhere."""
    found = [0]
    stack = [schema]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if isinstance(item.get("maxItems"), int):
                found.append(item["maxItems"])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return max(found)


# No list of a result is longer: a longer one is refused by its length, before the schema
# checks each of its items (a profile of 100,000 operators took 18 s per file to refuse).
MAX_ITEMS = _max_items(result.SCHEMA_DOCUMENT)


def _check_depth(value: Any) -> None:
    """Nested at most MAX_DEPTH deep, no list past MAX_ITEMS: said with where it is."""
    stack: list[tuple[Any, int, tuple[Any, ...]]] = [(value, 1, ())]
    while stack:
        item, depth, path = stack.pop()
        if depth > MAX_DEPTH:
            raise InvalidResult("not a result: nested more than %d levels deep" % MAX_DEPTH)
        if isinstance(item, dict):
            stack.extend((v, depth + 1, path + (k,)) for k, v in item.items())
        elif isinstance(item, list):
            if len(item) > MAX_ITEMS:
                raise InvalidResult("%s: %d items, more than any list of a result holds (%d)"
                                    % (_where(path) or "the file", len(item), MAX_ITEMS))
            stack.extend((v, depth + 1, path + (i,)) for i, v in enumerate(item))


def _short(text: str, limit: int = 240) -> str:
    """One line of at most ``limit`` characters, keeping its head and its tail: a schema
    message puts the value first and the reason last ("[...] is too long")."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    half = (limit - 3) // 2
    return text[:half] + " … " + text[-half:]


def _where(path: Any) -> str:
    out = ""
    for part in path:
        out += "[%d]" % part if isinstance(part, int) else (".%s" % part if out else str(part))
    return out


def problems(record: Any) -> list[str]:
    """Every way ``record`` breaks the current schema, as 'path: reason' (empty when valid)."""
    return ["%s: %s" % (_where(e.absolute_path), _short(e.message))
            for e in _VALIDATOR.iter_errors(record)]


def check(record: Any) -> dict[str, Any]:
    """The record in the current schema's shape; raises InvalidResult with the first problem."""
    if not isinstance(record, dict):
        raise InvalidResult("not a result: the file holds no JSON object")
    upgrades = {SCHEMA_1: (upgrade_1, upgrade_2, upgrade_3, upgrade_4),
                SCHEMA_2: (upgrade_2, upgrade_3, upgrade_4), SCHEMA_3: (upgrade_3, upgrade_4),
                SCHEMA_4: (upgrade_4,), result.SCHEMA: ()}
    schema = record.get("schema")
    steps = upgrades.get(schema) if isinstance(schema, str) else None
    if steps is None:
        raise InvalidResult("schema %s is not one this envbench reads (it reads %s)"
                            % (_short(repr(record.get("schema")), 60),
                               ", ".join(sorted(upgrades, reverse=True))))
    for step in steps:
        record = step(record)
    error = best_match(_VALIDATOR.iter_errors(record))
    if error is not None:
        where = _where(error.absolute_path)
        raise InvalidResult("%s%s" % (where + ": " if where else "", _short(error.message)))
    return cast("dict[str, Any]", record)


def read_capped(path: Path, cap: int = MAX_BYTES) -> bytes:
    """A result-sized regular file's bytes, read as envbench.files reads what the kit did not
    write (no link followed, no FIFO waited on, nothing past ``cap``), with a result's words
    for why not."""
    try:
        return files.read_regular(path, cap)
    except files.Unreadable as exc:
        why = {"link": "not a result: a symbolic link (results are plain files)",
               "special": "not a result: not a regular file",
               "size": "not a result: more than %d bytes (results are a few kB)" % cap}
        raise InvalidResult(why.get(exc.kind, "cannot be read (%s)" % exc))


def load(path: Path) -> dict[str, Any]:
    """Read and check one result file; raises InvalidResult (never anything else for content)."""
    try:
        text = read_capped(path).decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidResult("not valid JSON (not UTF-8 text)")
    except OSError as exc:  # a read that fails once the file is open (EIO)
        raise InvalidResult("cannot be read (%s)" % (exc.strerror or exc))
    record = check(parse(text))
    # The schema holds each figure to its type and range; this holds them to each other.
    problem = crossfoot.contradiction(Result.of(record, path))
    if problem is not None:
        raise InvalidResult("its figures contradict each other: %s" % problem)
    return record


def upgrade_1(old: dict[str, Any]) -> dict[str, Any]:
    """A schema-1 record in schema 2's shape: what schema 1 did not measure becomes null.

    Schema 1 had no thread plan, cpuset, data identity or forward dtype, and its host RSS
    was the sum of two peaks taken at different times, which is no peak: it is dropped.
    """
    record = copy.deepcopy(old)
    record["schema"] = SCHEMA_2
    record["upgraded_from"] = SCHEMA_1
    sections = [record.get(k) for k in ("cell", "config", "env", "memory", "summary")]
    if not all(isinstance(s, dict) for s in sections):
        return record  # the schema check names what is missing
    cell, config, env, memory, summary = cast("list[dict[str, Any]]", sections)
    cell.setdefault("id", None)
    cell.setdefault("quick", None)
    device = config.get("device")
    cell.setdefault("resources", {
        "device": device if device in ("cpu", "cuda") else None, "cpus": cell.get("cpus"),
        "cpuset": None, "threads": None, "threads_from": None, "memory": None, "swap": None,
        "gpus": cell.get("gpus")})
    synthetic = config.get("synthetic")
    cell.setdefault("data", {"source": "synthetic" if synthetic else "cifar10", "sha256": None}
                    if isinstance(synthetic, bool) else None)
    # Schema 1's bench wrote every option; its host-written failures lacked these three,
    # which were then always bench's defaults.
    for key, default in (("cudnn_benchmark", False), ("lr", 0.001), ("momentum", 0.9),
                         ("limit_test", None), ("threads", None), ("limit", None)):
        config.setdefault(key, default)
    env.setdefault("gpu_count", None)
    memory.pop("host_peak_rss_bytes", None)
    for key in ("process_rss_peak_bytes", "child_rss_peak_bytes", "swap_peak_method"):
        memory.setdefault(key, None)
    summary.setdefault("forward_dtype", None)
    return record


# What every schema-2 bench ran: the tutorial's LeNet on one device (2 x its multiply-adds).
LENET = {"name": "lenet", "parameters": 62006, "flops_per_image": 1303440}


def upgrade_2(old: dict[str, Any]) -> dict[str, Any]:
    """A schema-2 record in schema 3's shape: the options schema 2 did not have were fixed.

    Schema-2 bench always trained the tutorial's LeNet on one device, tested in float, and
    pinned memory and copied asynchronously exactly when the device was cuda.
    """
    record = copy.deepcopy(old)
    record["schema"] = SCHEMA_3
    record.setdefault("upgraded_from", SCHEMA_2)
    config = record.get("config")
    if not isinstance(config, dict):
        return record  # the schema check names what is missing
    cuda = "on" if config.get("device") == "cuda" else "off"
    for key, default in (("model", "lenet"), ("parallel", "none"), ("nproc", None),
                         ("quantize_eval", "off"), ("pin_memory", cuda),
                         ("non_blocking", cuda)):
        config.setdefault(key, default)
    batch = config.get("batch_size")
    ran = record.get("status") == "ok" or bool(record.get("epochs"))
    record.setdefault("model", dict(LENET) if ran else None)
    record.setdefault("parallel", {
        "mode": "none", "world_size": 1, "backend": None, "per_device_batch": batch,
        "global_batch": batch, "threads_per_rank": (record.get("env") or {}).get("threads"),
    } if ran else None)
    return record


def upgrade_3(old: dict[str, Any]) -> dict[str, Any]:
    """A schema-3 record in schema 4's shape: the option `model` is the workload now.

    Schema-3 bench trained one of the LeNets, built in, on images (CIFAR-10 or its seeded
    stand-in), led with accuracy, and counted forward FLOPs with hooks; a swept `model` is a
    swept `workload`, so old and new results of one LeNet are one measurement.
    """
    record = copy.deepcopy(old)
    record["schema"] = SCHEMA_4
    record.setdefault("upgraded_from", SCHEMA_3)
    config, cell, model = (record.get(k) for k in ("config", "cell", "model"))
    if isinstance(config, dict):
        if "model" in config and "workload" not in config:
            config["workload"] = config.pop("model")
        for key in ("workload_file", "workload_function", "workload_sha256"):
            config.setdefault(key, None)
    if isinstance(cell, dict) and isinstance(cell.get("variant"), dict):
        variant = cell["variant"]
        if "model" in variant and "workload" not in variant:
            variant["workload"] = variant.pop("model")
    if isinstance(model, dict):
        model.setdefault("unit", "images")
        model.setdefault("units_per_sample", 1)
        model.setdefault("quality", "accuracy")
        model.setdefault("source", "builtin")
        model.setdefault("sha256", None)
        model.setdefault("attention", None)
        forward = model.get("flops_per_image")
        model.setdefault("flops", {"forward": forward, "train": None,
                                   "method": "hooks" if forward is not None else None,
                                   "note": None})
    return record


def upgrade_4(old: dict[str, Any]) -> dict[str, Any]:
    """A schema-4 record in schema 5's shape: schema-4 bench had no operator profile and no
    matmul probe, so its cells were unprofiled and unprobed (and one measurement with a new
    unprofiled cell of the same options)."""
    record = copy.deepcopy(old)
    record["schema"] = result.SCHEMA
    record.setdefault("upgraded_from", SCHEMA_4)
    config = record.get("config")
    if isinstance(config, dict):
        config.setdefault("profile", False)
        config.setdefault("probe", "off")
    record.setdefault("profile", None)
    record.setdefault("probe", None)
    return record
