"""Cells: environments x compatible targets x sweep x repeats, each with its bench options."""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.options import parse_config
from envbench.cells import resources
from envbench.cells.resources import Resources
from envbench.engine.host import Host
from envbench.matrix import workloads
from envbench.matrix.models import Matrix, Settings, Target
from envbench.matrix.workloads import WorkloadPlan
from envbench.results import identity
from envbench.results.identity import SYNTHETIC, DataIdentity, Identity
from envbench.user_errors import BadInput, UserError

# --quick: one short epoch per cell, to check a matrix end to end in minutes (with each
# workload's own limits: 5000 and 1000 samples for the CIFAR-10 ones).
QUICK = {"epochs": 1, "repeats": 1}
# A batch size nothing names: the write-up's (a user's workload without one in the matrix).
FALLBACK_BATCH = 256


@dataclass(frozen=True)
class Cell:
    """A point of the matrix: what to run. Its identity as a measurement also needs the image
    and the data, known once the image is built (see envbench.identity)."""

    environment: str
    target: str
    repeat: int
    variant: dict[str, Any]
    settings: dict[str, Any] = field(repr=False)
    quick: bool = False
    workload: WorkloadPlan = field(default_factory=lambda: workloads.LENET, repr=False)

    @property
    def label(self) -> str:
        shown = dict(self.variant)
        if "workload" not in shown and self.workload.name != workloads.LENET.name:
            shown["workload"] = self.workload.name  # what it trains, where nothing says
        variant = identity.variant_text(shown, "")
        return "%s × %s%s%s (repeat %d)" % (self.environment, self.target,
                                            " × " + variant if variant else "",
                                            " (quick)" if self.quick else "", self.repeat + 1)


def _settings(base: dict[str, Any], variant: dict[str, Any], plan: WorkloadPlan,
              quick: bool) -> dict[str, Any]:
    """A cell's bench settings: the matrix's, its swept values, then its workload's own. The
    batch size is the sweep's, else the workload entry's, else benchmark.batch_size where
    the matrix gives it, else the workload's own default."""
    settings = dict(base, **variant)
    if "batch_size" not in variant:
        settings["batch_size"] = (plan.batch_size or base["batch_size"]
                                  or plan.default_batch_size or FALLBACK_BATCH)
    for key in ("limit", "limit_test"):
        given = getattr(plan, key) or base[key]
        if quick:
            short = plan.quick[0 if key == "limit" else 1]
            given = min(given, short) if given else short
        settings[key] = given
    return settings


def expand(matrix: Matrix, envs: list[str] | None = None, targets: list[str] | None = None,
           kind: str | None = None, quick: bool = False,
           matrix_dir: Path | None = None, profile: bool = False) -> list[Cell]:
    """Every cell to run, in a stable order; ``kind`` keeps cpu or cuda targets only. A
    user's workload is found and hashed in ``matrix_dir`` (the matrix's folder). ``profile``
    (--profile) profiles every cell, whatever the matrix says."""
    for wanted, known, what in ((envs, matrix.environments, "environment"),
                                (targets, matrix.targets, "target")):
        unknown = sorted(set(wanted or ()) - set(known))
        if unknown:
            raise BadInput("unknown %s %s (the matrix has: %s)"
                            % (what, ", ".join(unknown), ", ".join(known)))
    bench = matrix.benchmark
    base = Settings(**bench.model_dump(include=set(Settings.model_fields))).model_dump()
    plans = _plans(matrix, matrix_dir)
    repeats = bench.planned_repeats
    if quick:
        repeats = QUICK["repeats"]
        base.update({k: v for k, v in QUICK.items() if k != "repeats"})
    keys = list(bench.sweep)
    if profile:
        base["profile"] = True
        keys = [k for k in keys if k != "profile"]
    cells = []
    for env_name in matrix.environments:
        if envs and env_name not in envs:
            continue
        for target_name in matrix.targets_for(env_name):
            target = matrix.targets[target_name]
            if (targets and target_name not in targets) or (kind and target.device != kind):
                continue
            for values in itertools.product(*(bench.sweep[k] for k in keys)):
                # A swept workload is named in the variant (a result holds values): the
                # cell's settings take the rest of its entry.
                variant = {k: (v.label if k == "workload" else v) for k, v in zip(keys, values)}
                plan = plans[variant.get("workload", bench.workload.label)]
                settings = _settings(base, variant, plan, quick)
                for repeat in range(repeats):
                    cells.append(Cell(env_name, target_name, repeat, variant, settings,
                                      quick, plan))
    return cells


def _plans(matrix: Matrix, matrix_dir: Path | None) -> dict[str, WorkloadPlan]:
    if matrix_dir is None:
        if any(not w.builtin for w in matrix.benchmark.workloads):
            raise UserError("the matrix names a workload file, but not where the matrix is")
        matrix_dir = Path(".")
    return workloads.resolve_all(matrix, matrix_dir)


def bench_args(cell: Cell, res: Resources, synthetic: bool) -> list[str]:
    """The `python -m bench` options for a cell (data at /data; --out is added last).

    The thread count is the resource plan's (see envbench.resources), not torch's default.
    """
    s = cell.settings
    args = ["--device", res.device, "--epochs", s["epochs"], "--batch-size", s["batch_size"],
            "--pipeline", s["pipeline"], "--workers", s["workers"], "--amp", s["amp"],
            "--compile", s["compile"], "--accumulate", s["accumulate"], "--seed", s["seed"],
            "--threads", res.threads, *cell.workload.bench_args(), "--parallel",
            s["parallel"], "--quantize-eval", s["quantize_eval"]]
    args += ["--synthetic"] if synthetic else ["--data", "/data"]
    for flag, key in (("--limit", "limit"), ("--limit-test", "limit_test"),
                      ("--pin-memory", "pin_memory"), ("--non-blocking", "non_blocking")):
        if s[key] is not None:
            args += [flag, s[key]]
    # nproc counts dp/ddp devices: a sweep of parallel: [none, ddp] leaves the none cells alone.
    if s["nproc"] is not None and s["parallel"] != "none":
        args += ["--nproc", s["nproc"]]
    if s["nodes"] > 1:  # the job adds where the nodes meet (--rendezvous), per step
        args += ["--nodes", s["nodes"]]
    for flag, key in (("--channels-last", "channels_last"), ("--deterministic", "deterministic"),
                      ("--profile", "profile")):
        if s[key]:
            args.append(flag)
    if not s["probe"]:
        args += ["--probe", "off"]  # bench's default is on
    return [str(a) for a in args]


def bench_config(args: list[str]) -> dict[str, Any]:
    """The config section bench will record for these arguments: bench's own parser decides,
    so the host's idea of a cell's options cannot drift from what bench runs."""
    return parse_config(args + ["--out", "result.json"])[1]


@dataclass(frozen=True)
class Prepared:
    """A cell made concrete for one host and image: resources, bench's command line and
    config, and the measurement's identity (which names its result file)."""

    cell: Cell
    resources: Resources
    args: list[str]
    config: dict[str, Any]
    identity: Identity

    @property
    def file_stem(self) -> str:
        return self.identity.file_stem(self.cell.variant)

    def command(self) -> list[str]:
        return self.args + ["--out", "/results/%s.json" % self.file_stem]


def cell_data(cell: Cell, data: DataIdentity) -> DataIdentity:
    """The data a cell measures on: the run's, or seeded data where its workload has no data
    set to be given (resnet50, the GPTs)."""
    return SYNTHETIC if cell.workload.data == "synthetic" else data


def prepare(cell: Cell, target: Target, host: Host | int, data: DataIdentity,
            image_id: str | None) -> Prepared:
    """Resources from the target and host, bench's options, and the identity: the runner's
    cells and the report's idea of the current matrix both come from here. A Slurm target's
    cells get no cores of the kit's choosing: Slurm binds each step to the job's."""
    res = resources.plan(target, host, cell.settings["threads"], cell.settings["parallel"],
                         pin_cores=target.slurm is None)
    data = cell_data(cell, data)
    args = bench_args(cell, res, data.synthetic)
    config = bench_config(args)
    ident = identity.make(cell.environment, cell.target, image_id, res.as_record(), config,
                          data, cell.quick, cell.repeat)
    return Prepared(cell, res, args, config, ident)
