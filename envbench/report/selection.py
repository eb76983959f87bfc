"""Which stored results belong to the current matrix: `nox -s report` without folders.

A results folder collects everything ever run into it: older images, quick runs, other
matrices, cells since removed. The report of "the current matrix" takes, for each of its
cells (with the run's --quick, --synthetic and selection options), the latest result whose
identity is that cell's on the host that ran it, and names every other file with the reason.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from envbench.cells import dataset
from envbench.cells import expansion as cellmod
from envbench.engine.host import Host
from envbench.errors import UserError
from envbench.images import dockerfile
from envbench.images import lock as lockmod
from envbench.matrix.models import Matrix
from envbench.report.grouping import Loaded, variant_text
from envbench.results import identity


def _slot(environment: Any, target: Any, variant: dict[str, Any], quick: bool,
          repeat: Any) -> tuple[Any, ...]:
    return (environment, target, variant_text(variant), bool(quick), repeat)


def _planned_tags(m: Matrix, names: set[str], matrix_dir: Path,
                  locks_dir: Path) -> dict[str, str | None]:
    """The image tag each environment builds today (None where it cannot be planned here,
    e.g. an unset ${VAR} or no current lock: then any image of it is accepted)."""
    tags: dict[str, str | None] = {}
    for name in names:
        env = m.environments[name]
        try:
            current = None
            if env.source == "pip":
                state, current = lockmod.status(name, env, matrix_dir, locks_dir)
                if state != "current":
                    tags[name] = None
                    continue
            tags[name] = dockerfile.plan(name, env, matrix_dir, current).tag
        except UserError:
            tags[name] = None
    return tags


def expected_data(synthetic: bool, data_dir: Path | None) -> dict[str, Any] | None:
    """The data the current run uses; sha256 None when the data set is not here to digest."""
    if synthetic:
        return {"source": "synthetic", "sha256": None}
    root = data_dir or dataset.default_cache()
    return {"source": "cifar10", "sha256": dataset.digest(root) if dataset.is_ready(root)
            else None}


def current(loaded: list[Loaded], m: Matrix, cells: list[cellmod.Cell], synthetic: bool,
            data_dir: Path | None, matrix_dir: Path, quick: bool,
            locks_dir: Path) -> tuple[list[Loaded], list[tuple[str, str]]]:
    """(results of the current matrix's cells, [(file, why it was left out)])."""
    by_slot = {_slot(c.environment, c.target, c.variant, c.quick, c.repeat): c for c in cells}
    environments = {c.environment for c in cells}
    targets = {c.target for c in cells}
    tags = _planned_tags(m, environments, matrix_dir, locks_dir)
    data = expected_data(synthetic, data_dir)
    chosen: dict[tuple[Any, ...], Loaded] = {}
    left_out: list[tuple[str, str]] = []
    for item in loaded:
        reason, slot = _judge(item.record, by_slot, environments, targets, tags, data, m,
                              synthetic, quick)
        if reason is not None:
            left_out.append((str(item.path), reason))
            continue
        previous = chosen.get(slot)
        if previous is None or _written(item) > _written(previous):
            if previous is not None:
                left_out.append((str(previous.path), _superseded(item)))
            chosen[slot] = item
        else:
            left_out.append((str(item.path), _superseded(previous)))
    return list(chosen.values()), sorted(left_out)


def _written(item: Loaded) -> tuple[str, str]:
    return (str(item.record.get("written_at") or ""), item.path.name)


def _superseded(by: Loaded) -> str:
    return "superseded by %s, a later result of the same cell" % by.path.name


def _judge(record: dict[str, Any], by_slot: dict[tuple[Any, ...], cellmod.Cell],
           environments: set[str], targets: set[str], tags: dict[str, str | None],
           data: dict[str, Any] | None, m: Matrix, synthetic: bool,
           quick: bool) -> tuple[str | None, tuple[Any, ...]]:
    cell = record["cell"]
    env_name, target_name = cell.get("environment"), cell.get("target")
    slot = _slot(env_name, target_name, cell.get("variant") or {}, bool(cell.get("quick")),
                 cell.get("repeat"))
    if env_name not in environments:
        return "environment %s is not among the current matrix's selected cells" \
            % (env_name or "(none)"), slot
    if target_name not in targets:
        return "target %s is not among the current matrix's selected cells" \
            % (target_name or "(none)"), slot
    if bool(cell.get("quick")) != quick:
        return ("a --quick run (report it with --quick)" if not quick
                else "a full run (this report is of --quick runs)"), slot
    measured = identity.of_record(record)
    source = dict(measured.data).get("source")
    if (source == "synthetic") != synthetic:
        return ("synthetic data (report it with --synthetic)" if not synthetic
                else "real data (this report is of --synthetic runs)"), slot
    wanted = by_slot.get(slot)
    if wanted is None:
        return "not a cell of the current matrix (variant %s, repeat %s)" % (
            variant_text(cell.get("variant") or {}), cell.get("repeat")), slot
    tag = (record["env"].get("image") or {}).get("tag")
    if tags.get(env_name) is not None and tag != tags[env_name]:
        return "another image of %s (%s; the matrix now builds %s)" % (
            env_name, tag or "not built", tags[env_name]), slot
    recorded = cell.get("resources") or {}
    host = Host(recorded.get("host_cpus") or os.cpu_count() or 1,
                recorded.get("host_memory_bytes"))
    expected_data_now = dict(data or {}, sha256=(data or {}).get("sha256")
                             or dict(measured.data).get("sha256"))
    expected = cellmod.prepare(wanted, m.targets[target_name], host, expected_data_now,
                               measured.image_id).identity
    if expected != measured:
        return "measured otherwise than the matrix now says: %s" % "; ".join(
            expected.differences(measured)[:3]), slot
    return None, slot
