"""Which stored results a report takes: the current matrix's cells (`./noxw -s report` without
folders), or what folders given by path hold, narrowed by the selection options.

A results folder collects everything ever run into it: older images, quick runs, other
matrices, cells since removed. The report of "the current matrix" takes, for each of its
cells (with the run's --quick, --synthetic and selection options), the latest result whose
identity is that cell's on the host that ran it, and names every other file with the reason.
"""
from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from envbench.cells import dataset, estimate
from envbench.cells import expansion as cellmod
from envbench.cells.expansion import QUICK
from envbench.command_options import Options
from envbench.engine.host import Host
from envbench.matrix import models
from envbench.matrix.models import Matrix
from envbench.results import outcome, store
from envbench.results.identity import DataIdentity, variant_text
from envbench.results.record import Result


def _slot(environment: Any, target: Any, variant: dict[str, Any], quick: bool,
          repeat: Any) -> tuple[Any, ...]:
    return (environment, target, variant_text(variant), bool(quick), repeat)


def expected_data(synthetic: bool, data_dir: Path | None) -> DataIdentity:
    """The data the current run uses; sha256 None when the data set is not here to digest."""
    if synthetic:
        return dataset.identity_of(None)
    root = data_dir or dataset.default_cache()
    return dataset.identity_of(root) if dataset.is_ready(root) else DataIdentity("cifar10")


def current_results(opts: Options) -> tuple[list[Result], list[tuple[str, str]], str]:
    """The results of the current matrix's cells in REPORTS/results, the files left out with
    their reasons, and a phrase saying where they came from."""
    m = models.load(opts.matrix_path)
    chosen = cellmod.expand(m, list(opts.envs), list(opts.targets), opts.kind, opts.quick,
                            opts.matrix_dir, opts.profile)
    folder = opts.results_dir
    loaded, skipped = store.load_all([folder])
    synthetic = opts.synthetic or m.benchmark.data == "synthetic"
    loaded, left_out = current(loaded, m, chosen, synthetic, opts.data_dir, opts.matrix_dir,
                               opts.quick, opts.locks_dir)
    return loaded, sorted(skipped + left_out), "%s for the cells of %s" % (folder,
                                                                             opts.matrix_path)


def matching(loaded: list[Result], opts: Options) -> list[Result]:
    """Results from folders given by path, narrowed by --env, --target, --kind, --quick and
    --synthetic."""
    def keep(r: Result) -> bool:
        return ((not opts.envs or r.cell.environment in opts.envs)
                and (not opts.targets or r.cell.target in opts.targets)
                and (opts.kind is None or r.device == opts.kind)
                and (not opts.quick or r.cell.quick)
                and (not opts.synthetic or bool(r.config["synthetic"])))
    return [r for r in loaded if keep(r)]


def current(loaded: list[Result], m: Matrix, cells: list[cellmod.Cell], synthetic: bool,
            data_dir: Path | None, matrix_dir: Path, quick: bool,
            locks_dir: Path) -> tuple[list[Result], list[tuple[str, str]]]:
    """(results of the current matrix's cells, [(file, why it was left out)])."""
    # A run may add repeats beyond the matrix's: re-runs of contended repeats, and with
    # `repeats: auto` rounds up to max_repeats (and their re-runs).
    limit = 2 * (QUICK["repeats"] if quick else (m.benchmark.max_repeats
                                                 if m.benchmark.repeats == "auto"
                                                 else m.benchmark.planned_repeats))
    by_slot = {_slot(c.environment, c.target, c.variant, c.quick, repeat):
               replace(c, repeat=repeat) for c in cells if c.repeat == 0
               for repeat in range(limit)}
    environments = {c.environment for c in cells}
    targets = {c.target for c in cells}
    tags = estimate.tags_either_base(m, sorted(environments), matrix_dir, locks_dir)
    data = expected_data(synthetic, data_dir)
    chosen: dict[tuple[Any, ...], Result] = {}
    left_out: list[tuple[str, str]] = []
    for item in loaded:
        reason, slot = _judge(item, by_slot, environments, targets, tags, data, m, synthetic,
                              quick)
        if reason is not None:
            left_out.append((str(item.path), reason))
            continue
        previous = chosen.get(slot)
        if previous is None or _rank(item) > _rank(previous):
            if previous is not None:
                left_out.append((str(previous.path), _superseded(item, previous)))
            chosen[slot] = item
        else:
            left_out.append((str(item.path), _superseded(previous, item)))
    return list(chosen.values()), sorted(left_out)


def _written(item: Result) -> tuple[str, str]:
    return (item.written_at, item.path.name if item.path else "")


def _rank(item: Result) -> tuple[bool, tuple[str, str]]:
    """Which of two results of one cell the report keeps: the later, except that a cell
    refused on this host never replaces one measured elsewhere (a GPU VM's results brought
    home, then `bench` on a laptop without the GPU)."""
    return (outcome.of(item) != "refused", _written(item))


def _superseded(by: Result, item: Result) -> str:
    name = by.path.name if by.path else "another result"
    if outcome.of(item) == "refused" and outcome.of(by) != "refused":
        return "refused where it ran; %s is a result of the same cell from where it could run" \
            % name
    return "superseded by %s, a later result of the same cell" % name


def _judge(record: Result, by_slot: dict[tuple[Any, ...], cellmod.Cell],
           environments: set[str], targets: set[str], tags: dict[str, tuple[str, ...]],
           data: DataIdentity, m: Matrix, synthetic: bool,
           quick: bool) -> tuple[str | None, tuple[Any, ...]]:
    cell = record.cell
    env_name, target_name = cell.environment, cell.target
    slot = _slot(env_name, target_name, dict(cell.variant), cell.quick, cell.repeat)
    if env_name not in environments:
        return "environment %s is not among the current matrix's selected cells" \
            % (env_name or "(none)"), slot
    if target_name not in targets:
        return "target %s is not among the current matrix's selected cells" \
            % (target_name or "(none)"), slot
    if cell.quick != quick:
        return ("a --quick run (report it with --quick)" if not quick
                else "a full run (this report is of --quick runs)"), slot
    measured = record.identity
    wanted = by_slot.get(slot)
    # A workload with no data set to give it (resnet50, the GPTs) is synthetic in every run.
    always = wanted is not None and wanted.workload.data == "synthetic"
    if measured.data.synthetic != (synthetic or always):
        return ("synthetic data (report it with --synthetic)" if not synthetic
                else "real data (this report is of --synthetic runs)"), slot
    if wanted is None:
        return "not a cell of the current matrix (variant %s, repeat %s)" % (
            variant_text(dict(cell.variant)), cell.repeat), slot
    tag = record.image.get("tag")
    builds = tags.get(env_name or "") or ()
    # A cell refused before any build (this GPU, no GPU) names no image: it is still this
    # matrix's cell, and the page says why it did not run.
    unbuilt = tag is None and outcome.of(record) == "refused"
    if builds and tag not in builds and not unbuilt:
        return "another image of %s (%s; the matrix now builds %s)" % (
            env_name, tag or "not built", " or ".join(builds)), slot
    recorded = cell.resources or {}
    host = Host(recorded.get("host_cpus") or os.cpu_count() or 1,
                recorded.get("host_memory_bytes"))
    # Where the data set is not here to digest, the recorded digest is taken at its word.
    data_now = DataIdentity(data.source, data.sha256 or measured.data.sha256)
    assert target_name is not None
    expected = cellmod.prepare(wanted, m.targets[target_name], host, data_now,
                               measured.image_id).identity
    if expected != measured:
        return "measured otherwise than the matrix now says: %s" % "; ".join(
            expected.differences(measured)[:3]), slot
    return None, slot
