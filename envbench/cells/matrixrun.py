"""Every selected cell of a matrix: the images built first (once each), then each cell in its
container, resuming what is already done; GPU cells this host cannot run are recorded, with
one sentence, before any build."""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import docker

from bench.rules import FailureKind
from envbench import cache, provision, users
from envbench.cells import (
    console,
    containerrun,
    dataset,
    decide,
    dockercells,
    estimate,
    gpufit,
    lifecycle,
    resources,
    runlock,
    schedule,
    takein,
    triage,
)
from envbench.cells import expansion as cellmod
from envbench.cells.gpufit import GpuBlock
from envbench.cells.progress import MatrixProgress
from envbench.command_options import Options
from envbench.engine import connection, gpu
from envbench.engine.host import Host
from envbench.images import bases, build, dockerfile
from envbench.images import lock as lockmod
from envbench.images.build import BuildFailure, BuiltImage
from envbench.matrix import models
from envbench.results import outcome
from envbench.results.identity import DataIdentity
from envbench.user_errors import BadInput, UserError


@dataclass(frozen=True)
class Selection:
    """The asked cells by where they run: this machine's engine, a Slurm target's batch job
    (./noxw -s slurm), a cloud target's VM (./noxw -s cloud). ``check`` and ``doctor`` judge
    all three; ``bench`` runs the first."""

    matrix: models.Matrix
    here: list[cellmod.Cell]
    slurm: list[cellmod.Cell]
    cloud: list[cellmod.Cell]

    @property
    def every(self) -> list[cellmod.Cell]:
        return self.here + self.slurm + self.cloud


def select_cells(opts: Options) -> Selection:
    """Every asked cell, split by where it runs. A cloud target named with --target runs
    here: that is how the kit runs on the target's own VM. No cells at all is bad input."""
    m = models.load(opts.matrix_path)
    provision.index_environment()  # a bad ENVBENCH_INDEX_URL is bad input, said before all
    cells = cellmod.expand(m, list(opts.envs), list(opts.targets), opts.kind, opts.quick,
                           opts.matrix_dir, opts.profile)
    if not cells:
        raise BadInput(_no_cells(m, opts))
    cloud = [c for c in cells if m.targets[c.target].cloud is not None
             and c.target not in opts.targets]
    slurm = [c for c in cells if m.targets[c.target].slurm is not None]
    here = [c for c in cells if c not in cloud and c not in slurm]
    return Selection(m, here, slurm, cloud)


def _no_cells(m: models.Matrix, opts: Options) -> str:
    """Why nothing was selected, where the matrix can say: a CUDA target whose asked
    environments are all CPU builds names them and the fix."""
    said = "no cells match (kind=%s, env=%s, target=%s) in %s" % (
        opts.kind or "any", ",".join(opts.envs) or "any", ",".join(opts.targets) or "any",
        opts.matrix_path)
    envs = [n for n in (opts.envs or tuple(m.environments)) if n in m.environments]
    targets = [t for t in (opts.targets or tuple(m.targets)) if t in m.targets
               and (opts.kind is None or m.targets[t].device == opts.kind)]
    gpu = [t for t in targets if m.targets[t].device == "cuda"]
    if envs and gpu and all(not m.environments[e].cuda for e in envs):
        said += (": %s %s a GPU, and %s %s CPU build%s (no cuda:); give a stack a cuda: "
                 "version (docs/stacks.md), or ask for a CPU target" % (
                     ", ".join(gpu), "is" if len(gpu) == 1 else "are",
                     ", ".join(envs), "is a" if len(envs) == 1 else "are",
                     "" if len(envs) == 1 else "s"))
    return said


def plan_cells(opts: Options) -> tuple[models.Matrix, list[cellmod.Cell]]:
    """The cells this machine's engine runs: the Slurm and cloud targets' are left out, with a
    line saying so; a Slurm target asked for by name is a mistake said before anything."""
    selected = select_cells(opts)
    m = selected.matrix
    cloud = sorted({c.target for c in selected.cloud})
    if cloud:
        print("cloud targets %s run on their own VMs (./noxw -s cloud); left out here"
              % ", ".join(cloud))
    slurm = sorted({c.target for c in selected.slurm})
    asked = [t for t in slurm if t in opts.targets]
    if asked:
        raise BadInput("%s: a Slurm target, whose cells run as a batch job on its cluster: "
                       "./noxw -s slurm -- --target %s" % (asked[0], asked[0]))
    if slurm:
        print("slurm targets %s run as batch jobs on their cluster (./noxw -s slurm); left out "
              "here" % ", ".join(slurm))
    if not selected.here:
        where = [w for w, on in (("Slurm targets (./noxw -s slurm runs them)", slurm),
                                 ("cloud targets (./noxw -s cloud runs them)", cloud)) if on]
        raise BadInput("none of the asked cells of %s runs in this machine's engine: they are "
                       "on %s" % (opts.matrix_path, " and ".join(where)))
    return m, selected.here


def planned(m: models.Matrix, name: str, opts: Options, out: TextIO,
            chooser: bases.Chooser) -> dockerfile.Plan:
    """The image plan of an environment, with its lock (created when missing, refused when
    stale) for a pip stack, on the base this engine can have (see envbench.images.bases)."""
    env = m.environments[name]
    lock = None
    if env.source == "pip":
        lock = lockmod.ensure(name, env, opts.matrix_dir, opts.locks_dir, opts.frozen, out)
    return dockerfile.plan(name, env, opts.matrix_dir, lock, m.needs_compiler,
                           chooser.base(name, env))


def build_images(client: docker.DockerClient, m: models.Matrix, env_names: list[str],
                 opts: Options, out: TextIO, tidy: bool = True
                 ) -> tuple[dict[str, BuiltImage], dict[str, BuildFailure]]:
    """Build each environment's image; a failed build is recorded (with the tag it would
    have had, where known) and the others go on. ``tidy``: see build.build."""
    built: dict[str, BuiltImage] = {}
    failed: dict[str, BuildFailure] = {}
    chooser = bases.Chooser(client, opts.allow_pull, out)
    for name in env_names:
        p = None
        try:
            p = planned(m, name, opts, out, chooser)
            image = build.build(client, p, opts.log_dir, opts.allow_pull, out, tidy=tidy)
            base = connection.image_or_none(client, p.base)
            built[name] = BuiltImage(p, image, build.base_digest(base) if base else None)
        except UserError as exc:
            print("%s: %s" % (name, exc), file=out, flush=True)
            failed[name] = BuildFailure(str(exc), p.tag if p is not None else None)
    return built, failed


def data_dir_for(opts: Options, m: models.Matrix,
                 cells: list[cellmod.Cell] | None = None) -> Path | None:
    """The data set the cells mount: --data, else the cache (fetched once); None: synthetic,
    or no cell's workload reads a data set (resnet50 and the GPTs make their own)."""
    if opts.synthetic or m.benchmark.data == "synthetic":
        return None
    if cells is not None and all(c.workload.data == "synthetic" for c in cells):
        return None
    if opts.data_dir is not None:
        if not dataset.is_ready(opts.data_dir):
            raise UserError("--data %s: no CIFAR-10 there (expected %s/ with %s)"
                            % (opts.data_dir, dataset.FOLDER, ", ".join(dataset.FILES)))
        return opts.data_dir
    # Fetched on demand into the cache (progress and md5 check), once.
    return dataset.fetch(dataset.default_cache())


@dataclass
class _Session:
    """One matrix run: what every cell needs, what runs them, and the cells as they end."""

    matrix: models.Matrix
    opts: Options
    data: DataIdentity
    host: Host
    stacks: triage.Stacks
    executor: lifecycle.Executor
    cells: lifecycle.Cells

    def run(self, slot: schedule.Slot, mode: str, seed: int) -> None:
        """Run or reuse one cell, taken in by the lifecycle."""
        cell = slot.cell
        order = slot.record(mode, seed, _policy(self.matrix, self.opts).looks_up_to
                            if mode == "interleaved" else None)
        self.cells.shown.start(len(self.cells.done) + 1, cell.label)
        decided = triage.triage(cell, self.matrix, self.stacks, self.host, self.data,
                                self.opts.results_dir, order)
        if not self.cells.decided(decided):
            return
        assert decided.built is not None
        placed = takein.Placed(decided.prepared, self.matrix.targets[cell.target],
                               decided.built.record, self.matrix.benchmark.target_accuracy,
                               order)
        self.executor.launch(placed, decided.built, self.cells.taker(self.executor.live))


def run(opts: Options, out: TextIO) -> int:
    """Build what the selected cells need, then run the cells in rounds (resuming what is
    done), adding rounds where repeats ran contended or, with `repeats: auto`, where a
    comparison is still open; summarise."""
    started = time.perf_counter()
    m, cells = plan_cells(opts)
    # The engine and the GPU checks come before any download: on a machine where nothing
    # can run, the first message is why, not 170 MB of CIFAR-10 later.
    client = connection.connect()
    with runlock.holding(opts.reports_dir, out):  # one run at a time on this folder
        return _run_holding_the_lock(opts, out, started, m, cells, client)


def _run_holding_the_lock(opts: Options, out: TextIO, started: float, m: models.Matrix,
                          cells: list[cellmod.Cell], client: docker.DockerClient) -> int:
    host = Host.of_engine(client)
    tags = estimate.tags_to_run(m, list(dict.fromkeys(c.environment for c in cells)),
                                opts.matrix_dir, opts.locks_dir, client)
    blocked = gpu_blocks(client, m, cells, out, tags)
    # An environment whose every cell this host cannot run is not built at all.
    names = list(dict.fromkeys(c.environment for c in cells if not (
        m.targets[c.target].device == "cuda" and c.environment in blocked)))
    # Before anything is fetched (data, wheels, base image): what the run will take.
    to_build = estimate.unbuilt(client, {name: tags[name] for name in names})
    print(estimate.describe(m, cells, to_build, opts.locks_dir, opts.reports_dir), file=out,
          flush=True)
    refused, warned = estimate.disk_check(client, m, to_build, opts.locks_dir, cache.root())
    if refused:
        raise UserError(refused)
    if warned:
        print(warned, file=out, flush=True)
    data_dir = data_dir_for(opts, m, cells)
    mounts = containerrun.Mounts(opts.results_dir, opts.log_dir, data_dir, opts.cells_dir)
    users.prepare_dirs(opts.reports_dir, opts.results_dir, opts.log_dir)
    remove_leftovers(client, opts.results_dir, out)
    # Folders of a killed run's cells: no run holds them now (this one holds the lock).
    containerrun.remove_cell_folders(mounts.cells_dir)
    print_resources(m, cells, host, out)
    built, build_failures = build_images(client, m, names, opts, out)
    seed = opts.order_seed if opts.order_seed is not None else schedule.new_seed()
    print("order: %s, seed %d (replay it with --order %s --order-seed %d)%s"
          % (opts.order, seed, opts.order, seed,
             "; grouped runs the planned repeats only: no rounds are added for contended "
             "repeats or open comparisons" if opts.order == "grouped" else ""),
          file=out, flush=True)
    shown = MatrixProgress(len(cells), out)
    session = _Session(m, opts, dataset.identity_of(data_dir), host,
                       triage.Stacks(built, build_failures, blocked),
                       dockercells.DockerCells(client, mounts, shown.line),
                       lifecycle.Cells(opts.results_dir, shown))
    done = session.cells.done
    try:
        for planned in schedule.rounds(cells, opts.order, seed):
            _run_round(session, planned, opts.order, seed)
        for number in itertools.count(max(c.repeat for c in cells) + 1):
            extra = _more(m, opts, done) if opts.order == "interleaved" else []
            if not extra:
                break
            shown.grow(len(extra))
            print("round %d: %d more cell(s) (%s)" % (number + 1, len(extra), _why(m)),
                  file=out, flush=True)
            _run_round(session, schedule.extra_round(extra, number, opts.order, seed),
                       opts.order, seed)
    except KeyboardInterrupt:
        shown.close()
        print("\ninterrupted: %d finished cells are kept in %s; run the same command again "
              "to run only the missing ones" % (len(done), opts.results_dir), file=out)
        return 130
    shown.close()
    return console.close_run(done, out, time.perf_counter() - started, opts.results_dir,
                             opts.log_dir, session.cells.overheads,
                             "executed cell (container start/stop, result handling)")


def _run_round(session: _Session, slots: list[schedule.Slot], mode: str, seed: int) -> None:
    for slot in slots:
        session.run(slot, mode, seed)


def _policy(m: models.Matrix, opts: Options) -> decide.Policy:
    bench = m.benchmark
    if opts.quick:
        return decide.Policy(cellmod.QUICK["repeats"], bench.max_repeats, bench.precision)
    return decide.Policy(None if bench.repeats == "auto" else bench.repeats,
                         bench.max_repeats, bench.precision)


def _why(m: models.Matrix) -> str:
    if m.benchmark.repeats == "auto":
        return "comparisons still open at %.0f%% precision, or contended repeats to re-run" \
            % (100 * m.benchmark.precision)
    return "re-runs of repeats that ran contended"


def _more(m: models.Matrix, opts: Options,
          done: list[tuple[cellmod.Cell, dict[str, Any]]]) -> list[cellmod.Cell]:
    """One more repeat of each measurement that wants one (see envbench.cells.decide)."""
    by_key: dict[tuple[str, str, str, bool], list[dict[str, Any]]] = {}
    template: dict[tuple[str, str, str, bool], cellmod.Cell] = {}
    for cell, record in sorted(done, key=lambda pair: pair[0].repeat):
        key = decide.measurement(cell)
        by_key.setdefault(key, []).append(record)
        template.setdefault(key, cell)
    wanted = decide.wanted(_policy(m, opts), by_key)
    return [schedule.another_repeat(template[key], len(by_key[key]))
            for key in by_key if wanted[key] > len(by_key[key])]


# Reasons that hold for every stack alike: said once, not per environment.
HOST_WIDE = (FailureKind.GPU_UNAVAILABLE, FailureKind.NO_GPU)


def gpu_blocks(client: docker.DockerClient, m: models.Matrix, cells: list[cellmod.Cell],
               out: TextIO, tags: dict[str, str | None]) -> dict[str, GpuBlock]:
    """The GPU checks, before any build: environments whose GPU cells cannot run here (no
    kernels for this GPU, no GPU runtime, a driver too old), with the one sentence each
    cell will be recorded with."""
    names = sorted({c.environment for c in cells if m.targets[c.target].device == "cuda"})
    if not names:
        return {}
    found = gpu.state(client, None)
    if found.mode == gpu.CDI:
        print("GPUs are attached as CDI devices (nvidia.com/gpu=...): this engine refused "
              "Docker's --gpus the way a toolkit in CDI mode does", file=out)
    if found.gpus:
        print("GPUs: %s; driver %s" % (", ".join(
            "%s%s" % (g.name, " (sm_%d%d)" % g.capability if g.capability else "")
            for g in found.gpus), found.driver), file=out)
    blocked = gpufit.blocks(client, {n: m.environments[n] for n in names}, found, tags)
    host_wide = {why for why in blocked.values() if why.kind in HOST_WIDE}
    for why in sorted(host_wide, key=lambda w: w.sentence):  # once for every stack
        print("GPU cells %s on this host: %s" % (
            "are left out" if why.kind in outcome.REFUSED_BY_DESIGN else "cannot run",
            why.sentence), file=out, flush=True)
    for name, why in blocked.items():
        if why.kind not in HOST_WIDE:
            print("GPU cells of %s %s here: %s" % (
                name, "are refused" if why.kind in outcome.REFUSED_BY_DESIGN else
                "cannot run", why.sentence), file=out, flush=True)
    return blocked


def remove_leftovers(client: docker.DockerClient, results_dir: Path, out: TextIO) -> None:
    """Containers left by an earlier run on this reports folder: a stopped engine or a killed
    run could not remove them, and a killed run's cells may even still be running.

    Called while this run holds the folder's run lock (cells.runlock), so a container
    labelled with this folder belongs to a run that is gone: stopped and removed, whatever
    its state. Another folder's containers are another run's, left alone; so are other
    machines' (an engine can be shared, as the local cloud launcher's "VMs" share this one).
    Containers of kits older than the label: only those that ended or never started.
    """
    ours = str(results_dir.resolve())
    try:
        found = client.containers.list(all=True, filters={"label": [
            "envbench.cell", "envbench.host=%s" % connection.client_host()]})
        stale = [c for c in found if (c.labels or {}).get(containerrun.RESULTS_LABEL) == ours
                 or (containerrun.RESULTS_LABEL not in (c.labels or {})
                     and c.status in ("exited", "created"))]
        running = sum(c.status == "running" for c in stale)
        for container in stale:
            container.remove(force=True)
    except connection.ENGINE_ERRORS as exc:
        print("could not remove containers left by an earlier run: %s" % connection.explain(exc),
              file=out)
        return
    if stale:
        print("removed %d container(s) left by an earlier run%s" % (
            len(stale), " (%d still running: its run had died)" % running if running else ""),
            file=out)


def print_resources(m: models.Matrix, cells: list[cellmod.Cell], host: Host,
                    out: TextIO) -> None:
    """Say what each target's cells may use on this host before anything runs."""
    seen: set[tuple[str, Any, Any]] = set()
    for cell in cells:
        key = (cell.target, cell.settings["threads"], cell.settings["parallel"])
        if key in seen:
            continue
        seen.add(key)
        res = resources.plan(m.targets[cell.target], host, cell.settings["threads"],
                             cell.settings["parallel"])
        print("target %s on this %d-CPU host: %s" % (cell.target, host.cpus, res.describe()),
              file=out)
