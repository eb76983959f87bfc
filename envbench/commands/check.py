"""`envbench check`: every check a run would make before its first build, without building.

Every asked cell, whether it runs in this engine, on a Slurm target or on a cloud VM. The
matrix's schema, then per environment what planning its image needs (${VAR}s set and
well-formed after expansion, the template and the wheelhouse present, a valid image name),
and, where an engine answers, base images under --offline. Warnings, since the check may run
elsewhere than the benchmark (a laptop for a GPU VM): a missing data set, and GPU targets on
an engine without the NVIDIA runtime. Problems exit 2 with their key paths, as a bad matrix
does.
"""
from __future__ import annotations

import sys
from typing import Any, TextIO

import docker

from envbench.cells import dataset, matrixrun
from envbench.cells.expansion import Cell
from envbench.command_options import Options
from envbench.engine import connection
from envbench.engine.host import Host
from envbench.images import bases, dockerfile
from envbench.images import lock as lockmod
from envbench.matrix import models
from envbench.user_errors import UserError


def _engine() -> docker.DockerClient | None:
    try:
        return connection.connect()
    except UserError:
        return None


def run(opts: Options, out: TextIO = sys.stdout, err: TextIO | None = None) -> int:
    err = err or sys.stderr
    selected = matrixrun.select_cells(opts)
    m, cells = selected.matrix, selected.every
    _print_cells(selected, out)
    matrixrun.print_resources(m, selected.here, Host.local(), out)
    problems: list[str] = []
    warnings: list[str] = []
    plans = _plans(opts, m, cells, problems, warnings)
    reads_data = any(c.workload.data == "cifar10" for c in cells)
    if reads_data and not (opts.synthetic or m.benchmark.data == "synthetic"):
        root = opts.data_dir or dataset.default_cache()
        if not dataset.is_ready(root):
            warnings.append("data: no CIFAR-10 in %s (expected %s/): before `bench`, run "
                            "`./noxw -s data`, give --data DIR, or use --synthetic"
                            % (root, dataset.FOLDER))
    client = _engine()
    # This engine runs the cells here and builds the Slurm targets' images (the login node's
    # engine); a cloud target's VM builds its own.
    built_here = {c.environment for c in selected.here + selected.slurm}
    gpu_targets = sorted({c.target for c in selected.here
                          if m.targets[c.target].device == "cuda"})
    if client is None and built_here:
        warnings.append("no Docker engine answers here: base images and GPU support were "
                        "not checked")
    elif client is not None:
        _engine_checks(client, {n: p for n, p in plans.items() if n in built_here},
                       gpu_targets, opts.allow_pull, problems, warnings)
    for warning in warnings:
        print("warning: %s" % warning, file=err)
    if problems:
        print("error: %s cannot run:\n  %s" % (opts.matrix_path, "\n  ".join(problems)),
              file=err)
        return 2
    parts = [(len(selected.here), "in this engine"), (len(selected.slurm), "on Slurm"),
             (len(selected.cloud), "on cloud VMs")]
    split = ", ".join("%d %s" % part for part in parts if part[0])
    print("%s: valid, %d cells%s" % (opts.matrix_path, len(cells),
                                     " (%s)" % split if selected.slurm or selected.cloud
                                     else ""), file=out)
    return 0


def _print_cells(selected: matrixrun.Selection, out: TextIO) -> None:
    """Each asked cell, where it would run, and each workload's inputs with their digests."""
    m, cells = selected.matrix, selected.every
    for cell in selected.here:
        print(cell.label, file=out)
    for cell in selected.slurm:
        block = m.targets[cell.target].slurm
        assert block is not None
        print("%s: a step of %s's batch job (partition %s, %s; ./noxw -s slurm)"
              % (cell.label, cell.target, block.partition, block.runtime), file=out)
    for cell in selected.cloud:
        print("%s: on %s's own VM (./noxw -s cloud)" % (cell.label, cell.target), file=out)
    for name in dict.fromkeys(c.target for c in cells):
        c = m.targets[name].cloud
        if c is not None:
            print("cloud target %s: %s on %s%s, autostop %d min; ./noxw -s cloud -- --dry-run "
                  "shows its plan and price" % (name, c.accelerators or "a CPU VM",
                                                c.infra or "any cloud",
                                                " (spot)" if c.use_spot else "",
                                                c.autostop_minutes), file=out)
    # Each workload's inputs once, with the digest a matrix may pin them to (sha256:).
    workloads = {c.workload.name: c.workload for c in cells if c.workload.inputs}
    for name, plan in workloads.items():
        for given in plan.inputs:
            print("workload %s, input %s" % (name, given.describe()), file=out)


def _plans(opts: Options, m: models.Matrix, cells: list[Cell], problems: list[str],
           warnings: list[str]) -> dict[str, Any]:
    """Each asked environment's image planned as a build would plan it (its lock's state
    said), without building; what stops one is a problem."""
    plans: dict[str, Any] = {}
    for name in dict.fromkeys(c.environment for c in cells):
        env = m.environments[name]
        try:
            current = None
            if env.source == "pip":
                found = lockmod.status(name, env, opts.matrix_dir, opts.locks_dir)
                current = found.lock
                _lock_state(name, env, found.state, opts, problems, warnings)
            plans[name] = dockerfile.plan(name, env, opts.matrix_dir, current,
                                          m.needs_compiler)
        except UserError as exc:
            problems.append(str(exc))
    return plans


def _lock_state(name: str, env: models.Environment, state: lockmod.LockState, opts: Options,
                problems: list[str], warnings: list[str]) -> None:
    where = lockmod.path_for(opts.locks_dir, name)
    if state is lockmod.LockState.STALE:
        problems.append("environments.%s: %s is stale (its inputs changed); run "
                        "`./noxw -s lock`" % (name, where))
    elif state is lockmod.LockState.MISSING and opts.frozen:
        problems.append("environments.%s: %s is missing and --frozen forbids "
                        "creating it; run `./noxw -s lock`" % (name, where))
    elif state is lockmod.LockState.MISSING:
        why = (" (the kit commits locks only for stacks on the default index: "
               "the index this one names is not reachable where the kit is "
               "developed)" if env.index_url else "")
        warnings.append("environments.%s: no committed lock%s: `bench` will "
                        "resolve %s (or run `./noxw -s lock` and commit it)"
                        % (name, why, where))


def _engine_checks(client: docker.DockerClient, plans: dict[str, Any], gpu_targets: list[str],
                   allow_pull: bool, problems: list[str], warnings: list[str]) -> None:
    try:
        runtimes = client.info().get("Runtimes") or {}
    except connection.ENGINE_ERRORS as exc:
        warnings.append("the engine did not answer: %s" % connection.explain(exc))
        return
    for target in gpu_targets:
        if "nvidia" not in runtimes:
            warnings.append("targets.%s: this Docker engine has no NVIDIA runtime, so its "
                            "cells would fail here (install nvidia-container-toolkit)" % target)
    if allow_pull:
        return
    for name, plan in plans.items():
        try:
            found = connection.image_or_none(client, plan.base)
        except UserError as exc:
            problems.append("environments.%s.base: %s" % (name, exc))
            continue
        if found is None and not plan.env.base and bases.kit_base(plan.env) is not None:
            # bench builds on the kit's own base (debootstrap: no registry, no pull).
            warnings.append("environments.%s: %s is not in the engine: it builds on the kit's "
                            "own base %s" % (name, plan.base, bases.kit_base(plan.env)))
        elif found is None and connection.image_or_none(client, plan.tag) is None:
            problems.append("environments.%s.base: %s is not in the engine and --offline "
                            "forbids pulling it" % (name, plan.base))
