"""What `./noxw -s cloud` would do, and what it would cost, before any money is spent.

Per cloud target: the accelerator and where (infra, or the cheapest cloud in the catalog),
the hourly price (the matrix's price_per_hour, else SkyPilot's catalog, and which), the cells,
the estimated time and cost, and the task YAML that SkyPilot itself has accepted.

Time estimate: a fixed provisioning allowance (VM start, set-up), an allowance per image the
VM builds (BUILD_S), plus, per cell,
the earlier results' first epoch and median epoch for the same environment and target where
present. Without earlier results the run time is unknown and the cost shown is a lower bound.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import yaml

from envbench import provision, users
from envbench.cells import dataset, expansion
from envbench.cells.estimate import BUILD_S, CELL_OVERHEAD_S, earlier_epochs
from envbench.cloud import sky as skyapi
from envbench.cloud import tasks
from envbench.command_options import Options
from envbench.matrix import models
from envbench.matrix.models import Matrix
from envbench.user_errors import UserError

# VM start, SkyPilot's set-up and ./noxw: typically 5-10 minutes.
PROVISION_S = 8 * 60
# First-time image builds (BUILD_S per stack) and the cells' time (earlier runs' epochs plus
# CELL_OVERHEAD_S each) are the local run's estimate too: envbench/cells/estimate.py.


@dataclass
class TargetPlan:
    name: str
    accelerators: str
    infra: str
    price: float | None
    price_source: str
    instance_type: str | None
    cells: list[expansion.Cell]
    run_s: float | None
    unknown_cells: int
    yaml_path: Path | None = None
    environments: list[str] = field(default_factory=list)
    task: dict[str, Any] = field(default_factory=dict)  # the SkyPilot task-YAML, validated
    build_s: float = 0.0  # the images this VM builds first (BUILD_S per stack)

    @property
    def total_s(self) -> float:
        return PROVISION_S + self.build_s + (self.run_s or 0.0)

    @property
    def cost(self) -> float | None:
        return None if self.price is None else self.price * self.total_s / 3600


def plan(matrix: Matrix, opts: Options, workdir: Path,
         run_prefix: str = tasks.CLUSTER_PREFIX) -> list[TargetPlan]:
    """Every selected cloud target's plan; its task YAML written to --out where given.
    ``run_prefix`` starts every cluster name: a launch gives its run's
    (envbench.cloud.runid); the dry run's plain ``envbench-`` names a cluster that a later
    run never takes for a leftover, should someone launch its YAML by hand."""
    data, synthetic, out, targets = opts.data_dir, opts.synthetic, opts.out, opts.targets
    if data is not None and not synthetic and not dataset.is_ready(data):
        raise UserError("--data %s: no CIFAR-10 there (expected %s/ with %s); each VM would "
                        "receive it" % (data, dataset.FOLDER, ", ".join(dataset.FILES)))
    cloud_targets = [n for n, t in matrix.targets.items() if t.cloud is not None]
    if targets:
        not_cloud = [t for t in targets if t not in cloud_targets]
        if not_cloud:
            raise UserError("not a cloud target: %s (cloud targets: %s)"
                            % (", ".join(not_cloud), ", ".join(cloud_targets) or "none"))
        cloud_targets = [t for t in cloud_targets if t in targets]
    if not cloud_targets:
        raise UserError("the matrix has no cloud targets (give a target a cloud: block with "
                        "accelerators, e.g. cloud: {accelerators: \"H100:1\", infra: aws})")
    with_inputs = sorted(w.label for w in matrix.benchmark.workloads if w.inputs)
    if with_inputs:
        # A VM receives the repository, the matrix's folder and the data set; an input lies
        # anywhere on this host and may weigh tens of GB: nothing carries it there yet.
        raise UserError("workload %s names inputs:, which cloud targets cannot take yet (a VM "
                        "receives the matrix's folder and the data set, not files elsewhere "
                        "on this host): run it on this engine or on a Slurm target"
                        % ", ".join(with_inputs))
    by_cluster: dict[str, str] = {}
    for name in cloud_targets:  # gpu.a, gpu-a and GPU_A would share (and kill) one cluster
        other = by_cluster.setdefault(tasks.target_part(name), name)
        if other != name:
            raise UserError("targets %s and %s would both be cluster %s: rename one (cluster "
                            "names keep lower-case letters, digits and '-', 60 characters)"
                            % (other, name, tasks.cluster_name(name, run_prefix)))
    earlier = earlier_epochs(opts.reports_dir)
    index_url = provision.package_index()  # a stock VM image has no pip to name one
    plans = []
    for name in cloud_targets:
        target = matrix.targets[name]
        cloud = target.cloud
        assert cloud is not None
        price: float | None
        instance: str | None
        if target.price_per_hour is not None:
            price, instance, source = target.price_per_hour, cloud.instance_type, "matrix"
        else:
            price, instance, source = skyapi.hourly_price(cloud)
        todo = expansion.expand(matrix, targets=[name], matrix_dir=opts.matrix_dir)
        run_s, unknown = 0.0, 0
        for cell in todo:
            known = earlier.get((cell.environment, name, cell.workload.name))
            if known is None:
                unknown += 1
                continue
            first, steady = known
            run_s += first + steady * (cell.settings["epochs"] - 1) + CELL_OVERHEAD_S
        config = tasks.task_config(name, target, workdir, opts.matrix_path, data, synthetic,
                                   tasks.matrix_variables(matrix), run_prefix, index_url)
        skyapi.validated_task(config)  # SkyPilot's own schema check, before anything is written
        p = TargetPlan(name, cloud.accelerators or "CPU VM",
                       cloud.infra or "cheapest in the catalog",
                       price, source, instance, todo,
                       None if unknown == len(todo) else run_s, unknown,
                       environments=sorted({c.environment for c in todo}), task=config,
                       build_s=sum(BUILD_S[matrix.environments[e].kind]
                                   for e in {c.environment for c in todo}))
        if out is not None:
            p.yaml_path = out / ("%s.yaml" % config["name"])
            users.write_text(p.yaml_path, yaml.safe_dump(tasks.redacted(config),
                                                         sort_keys=False))
            skyapi.validated_task(yaml.safe_load(p.yaml_path.read_text()))  # as written
        plans.append(p)
    return plans


def _duration(seconds: float) -> str:
    minutes = seconds / 60
    return "%.0f min" % minutes if minutes < 120 else "%.1f h" % (minutes / 60)


def describe(plans: list[TargetPlan], launching: bool = False) -> str:
    lines = ["Plan (launching now):" if launching else "Plan (dry run: nothing is launched):"]
    total = 0.0
    for p in plans:
        price = ("$%.2f/h (%s%s)" % (p.price, p.price_source,
                                     ", %s" % p.instance_type if p.instance_type else "")
                 if p.price is not None else "no price: %s" % p.price_source)
        lines.append("")
        lines.append("%s: %s on %s, %s" % (p.name, p.accelerators, p.infra, price))
        lines.append("  cells: %d (%s)" % (len(p.cells), ", ".join(p.environments)))
        if p.unknown_cells:
            run = ("%d of %d cells have no earlier results here: their time is unknown"
                   % (p.unknown_cells, len(p.cells)))
        else:
            run = "cells %s (from earlier results)" % _duration(p.run_s or 0.0)
        lines.append("  time: provisioning allowance %s + image builds %s (%d stack%s) + %s"
                     % (_duration(PROVISION_S), _duration(p.build_s), len(p.environments),
                        "" if len(p.environments) == 1 else "s", run))
        if p.cost is not None:
            bound = "at least " if p.unknown_cells else ""
            lines.append("  cost: %s$%.2f" % (bound, p.cost))
            total += p.cost
        if p.yaml_path is not None:
            lines.append("  task: %s (accepted by SkyPilot's validator)" % p.yaml_path)
    lines.append("")
    lines.append("Estimated total: %s$%.2f; every cluster is torn down at the end, with "
                 "autostop-and-down as the safety net."
                 % ("at least " if any(p.unknown_cells or p.price is None for p in plans)
                    else "", total))
    return "\n".join(lines)


def checkout() -> Path:
    """The folder nox runs in: the checkout that each VM receives as its workdir."""
    workdir = Path.cwd()
    if not (workdir / "noxfile.py").exists() or not (workdir / "bench").is_dir():
        raise UserError("run the cloud command from the envbench checkout (%s has no "
                        "noxfile.py and bench/): that folder is synced to each VM" % workdir)
    return workdir


def dry_run(opts: Options, out: TextIO = sys.stdout) -> int:
    plans = plan(models.load(opts.matrix_path), opts, checkout())
    print(describe(plans), file=out)
    return 0
