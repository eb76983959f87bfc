"""`envbench slurm` (./noxw -s slurm): each Slurm target's cells as one batch job.

On the login node: preflight (nothing is submitted on a ✘), the images built in the engine
here and saved for the nodes, the data set and the user's code copied into shared_dir, one
job per target whose steps run the cells in the kit's round order, then the job followed:
each cell is taken in (the same bounded reader as every result) as its step ends, and a job
that ends early leaves each unfinished cell failed with one sentence naming the Slurm state
and the job id. Ctrl-C cancels the jobs and keeps what finished; the same command again runs
only the cells without a current result. --print writes the script and the conversion
commands, and submits nothing.
"""
from __future__ import annotations

import os
import secrets
import shlex
import shutil
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Any, TextIO

from bench import boundedread
from bench.rules import FailureKind
from envbench import terminal, users
from envbench.cells import cellspec, console, dataset, records, schedule, takein, triage
from envbench.cells import expansion as cellmod
from envbench.cells.gpufit import GpuBlock
from envbench.cells.matrixrun import build_images, data_dir_for
from envbench.cells.progress import MatrixProgress
from envbench.cells.resources import Resources
from envbench.command_options import Options
from envbench.engine import connection
from envbench.engine.host import Host
from envbench.images.build import BuiltImage
from envbench.matrix import inputs as inputmod
from envbench.matrix import models
from envbench.matrix.inputs import InputPlan
from envbench.results import store
from envbench.results.identity import DataIdentity
from envbench.slurm import cluster, images, preflight, runtimes
from envbench.slurm.script import ImageUse, Step, render
from envbench.user_errors import BadInput, UserError

POLL_S = 2.0
# Characters the job's bash would read as its own inside the quoted words of a step.
SHELL_ACTIVE = set('$`"\\\n')


@dataclass
class Planned:
    """A cell of the job: what it runs and how its record is completed when it ends."""

    p: cellmod.Prepared
    target: models.Target
    image: dict[str, Any]
    order: dict[str, Any]
    target_accuracy: float | None


@dataclass
class Job:
    target: str
    block: models.Slurm
    run_dir: Path
    cells: dict[str, Planned] = field(default_factory=dict)  # by file stem, in order
    job_id: str | None = None
    submitted_at: float = 0.0
    last_seen: tuple[str, str] | None = None  # the state and reason last said


def slurm_targets(m: models.Matrix, opts: Options) -> list[str]:
    named = [t for t in opts.targets if t in m.targets]
    unknown = [t for t in opts.targets if t not in m.targets]
    if unknown:
        raise BadInput("--target %s: no such target in %s (its targets: %s)"
                       % (unknown[0], opts.matrix_path, ", ".join(m.targets)))
    not_slurm = [t for t in named if m.targets[t].slurm is None]
    if not_slurm:
        raise BadInput("--target %s has no slurm: block; it runs with ./noxw -s bench (or "
                       "./noxw -s cloud)" % not_slurm[0])
    chosen = named or [t for t, target in m.targets.items() if target.slurm is not None]
    if not chosen:
        raise BadInput("%s has no target with a slurm: block (see docs/hpc.md)"
                       % opts.matrix_path)
    return chosen


def run(opts: Options, out: TextIO) -> int:
    m = models.load(opts.matrix_path)
    names = slurm_targets(m, opts)
    cells = cellmod.expand(m, list(opts.envs), names, opts.kind, opts.quick, opts.matrix_dir,
                           opts.profile)
    if not cells:
        raise BadInput("no cells match (env=%s) on %s" % (",".join(opts.envs) or "any",
                                                          ", ".join(names)))
    _refuse_unmountable(cells)
    checks = {}
    for name in names:
        block = m.targets[name].slurm
        assert block is not None
        checks[name] = preflight.run(name, block, out, probe=not opts.print_only)
    failed = [name for name, c in checks.items() if not c.passed]
    if failed:
        print("nothing submitted: the preflight of %s failed (✘ above)" % ", ".join(failed),
              file=out)
        return 1
    blocked = _gpu_blocks(m, cells, checks, out)
    client = connection.connect()
    # A stack whose every cell the nodes cannot run is not built at all.
    env_names = list(dict.fromkeys(c.environment for c in cells if not (
        m.targets[c.target].device == "cuda"
        and c.environment in blocked.get(c.target, {}))))
    built, failures = build_images(client, m, env_names, opts, out)
    data_dir = data_dir_for(opts, m, cells)
    data = dataset.identity_of(data_dir)
    users.prepare_dirs(opts.reports_dir, opts.results_dir, opts.log_dir)
    seed = opts.order_seed if opts.order_seed is not None else schedule.new_seed()
    jobs = []
    for name in names:
        part = checks[name].partition
        assert part is not None
        host = Host(part.cpus or 1, part.memory_mb * 2**20 if part.memory_mb else None)
        jobs.append(_plan_job(name, m, [c for c in cells if c.target == name], host, data,
                              data_dir, built, failures, blocked.get(name, {}), seed, opts,
                              client, out))
    jobs = [job for job in jobs if job.cells]
    if not jobs:
        print("every cell has a current result in %s: nothing to submit" % opts.results_dir,
              file=out)
        return 0
    if opts.print_only:
        return 0
    for job in jobs:
        job.job_id = cluster.submit(str(job.run_dir / "job.sh"))
        job.submitted_at = time.perf_counter()
        print("submitted job %s: %d cell(s) of %s on partition %s (%s)"
              % (job.job_id, len(job.cells), job.target, job.block.partition,
                 job.run_dir / "job.sh"), file=out, flush=True)
    return _follow(jobs, opts, out)


def _gpu_blocks(m: models.Matrix, cells: list[cellmod.Cell],
                checks: dict[str, preflight.Checks], out: TextIO
                ) -> dict[str, dict[str, GpuBlock]]:
    """By GPU target: the stacks its node cannot run (the GPU the probe found there against
    each stack's kernels and CUDA), each said once; their cells are recorded failed with the
    sentence and not submitted."""
    blocked: dict[str, dict[str, GpuBlock]] = {}
    for name, found in checks.items():
        if m.targets[name].device != "cuda" or found.gpu is None:
            continue
        names = dict.fromkeys(c.environment for c in cells if c.target == name)
        blocked[name] = preflight.stack_blocks({n: m.environments[n] for n in names},
                                               found.gpu)
        for env_name, reason in blocked[name].items():
            print("%s on %s: %s (its cells are recorded failed, not submitted)"
                  % (env_name, name, reason.sentence), file=out)
    return blocked


def _plan_job(name: str, m: models.Matrix, cells: list[cellmod.Cell], host: Host,
              data: DataIdentity, data_dir: Path | None, built: dict[str, BuiltImage],
              failures: dict[str, Any], blocked: dict[str, GpuBlock], seed: int,
              opts: Options, client: Any, out: TextIO) -> Job:
    target = m.targets[name]
    block = target.slurm
    assert block is not None
    shared = Path(block.shared_dir)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    job = Job(name, block, shared / "runs" / ("%s-%s-%s" % (name, stamp,
                                                          secrets.token_hex(3))))
    copy = not opts.print_only
    if opts.print_only:
        print("# the data and code the cells read (envbench copies them unless --print):",
              file=out)
    shared_data = (_copy_data(data_dir, data, shared, out, copy) if data_dir is not None
                   else None)
    uses: dict[str, ImageUse] = {}
    steps: list[Step] = []
    for planned_round in schedule.rounds(cells, "interleaved", seed):
        for slot in planned_round:
            cell = slot.cell
            order = slot.record("interleaved", seed)
            # A refused cell is recorded failed with its reason (said above), not submitted
            # (--print writes no result); a current one was done by an earlier run.
            decided = triage.triage(cell, m, triage.Stacks(built, failures, blocked), host,
                                    data, opts.results_dir, order,
                                    record=not opts.print_only)
            if not decided.runs:
                continue
            p, image = decided.prepared, built[cell.environment]
            if cell.environment not in uses:
                if opts.print_only:
                    uses[cell.environment] = ImageUse(
                        block.runtime, str(images.archive_path(shared, image.image.id)),
                        images.reference(block.runtime, shared, image.image.id))
                else:
                    uses[cell.environment] = images.ready(block.runtime, client,
                                                          image.plan.tag, image.image.id,
                                                          shared, out)
            workload = (_copy_workload(cell, shared, out, copy) if cell.workload.path
                        else None)
            inputs = [(given, _copy_input(given, shared, out, copy))
                      for given in cell.workload.inputs]
            steps.append(_step(job, p, uses[cell.environment], image, shared_data, workload,
                               host, inputs))
            job.cells[p.file_stem] = Planned(p, target, image.record, order,
                                             m.benchmark.target_accuracy)
    if not job.cells:
        return job
    text = render("envbench-%s" % name, block, PurePosixPath(str(job.run_dir)),
                  list(uses.values()), steps)
    if opts.print_only:
        print("# the conversion commands (envbench runs them unless --print):", file=out)
        for env_name in uses:
            for line in images.conversion_commands(block.runtime, built[env_name].plan.tag,
                                                   built[env_name].image.id, shared):
                print(line, file=out)
        print("# the batch script (sbatch it from a folder you may write):", file=out)
        print(text, file=out)
        return job
    job.run_dir.mkdir(parents=True, exist_ok=True)
    (job.run_dir / "job.sh").write_text(text)
    return job


def _copy_data(data_dir: Path, data: DataIdentity, shared: Path, out: TextIO,
               copy: bool = True) -> Path:
    """The data set in shared_dir/data/DIGEST (copied once: the digest names its content).
    ``copy`` False (--print): the command that would copy it, printed, nothing written."""
    where = shared / "data" / (data.sha256 or "unnamed")
    if not (where / dataset.FOLDER).is_dir():
        if not copy:
            print("cp -r %s %s" % (shlex.quote(str(data_dir)), shlex.quote(str(where))),
                  file=out)
            return where
        print("copying the data set to %s" % where, file=out, flush=True)
        partial = where.with_name(where.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(data_dir, partial, symlinks=False)
        partial.replace(where)
    return where


def _copy_workload(cell: cellmod.Cell, shared: Path, out: TextIO, copy: bool = True) -> Path:
    """The user's workload in shared_dir/workloads/SHA256/NAME (its digest names it), its
    bytecode caches left out. ``copy`` False (--print): the command, printed."""
    plan = cell.workload
    assert plan.path is not None
    _refuse_separators("workload %s" % plan.name, plan.path.name)
    where = shared / "workloads" / (plan.sha256 or "unhashed") / plan.path.name
    if not where.exists() and not copy:
        print("mkdir -p %s && rsync -a --exclude __pycache__ %s %s"
              % (shlex.quote(str(where.parent)), shlex.quote(str(plan.path)),
                 shlex.quote(str(where.parent) + "/")), file=out)
    elif not where.exists():
        print("copying workload %s to %s" % (plan.name, where), file=out, flush=True)
        where.parent.mkdir(parents=True, exist_ok=True)
        if plan.path.is_dir():
            shutil.copytree(plan.path, where, symlinks=False,
                            ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(plan.path, where)
    return where


# Characters Podman's --mount and Apptainer's or Pyxis's src:dst lists read as separators.
MOUNT_SEPARATORS = frozenset(",:")


def _refuse_separators(what: str, name: str) -> None:
    """A file or folder name that a Slurm step's mount list would split, refused before
    anything is copied or submitted (Docker takes mounts as objects and needs no such rule;
    shared_dir is held to it by the matrix)."""
    if MOUNT_SEPARATORS & set(name):
        raise UserError("%s: a file name holding ',' or ':' (%s) cannot be handed to a Slurm "
                        "step's container runtime, which reads them as separators: rename it"
                        % (what, name))
# The leaf under shared_dir/inputs/SHA256 a folder input's copy is: its digest leaves the
# folder's own name out, so two names of one content share one copy.
FOLDER_LEAF = "folder"


def _refuse_unmountable(cells: list[cellmod.Cell]) -> None:
    """Every workload and input name a step would mount, checked before anything is built,
    copied or submitted."""
    for cell in cells:
        plan = cell.workload
        if plan.path is not None:
            _refuse_separators("workload %s" % plan.name, plan.path.name)
        for given in plan.inputs:
            _refuse_separators("input %s" % given.name, given.file_name or FOLDER_LEAF)


def _copy_input(given: InputPlan, shared: Path, out: TextIO, copy: bool = True) -> Path:
    """A workload's input in shared_dir/inputs/SHA256/ (a file under its name, a folder as
    FOLDER_LEAF), copied once (its digest names its content) and hashed again where it
    landed before it is used: the nodes read that copy, not this host's disk. ``copy``
    False (--print): the command, printed."""
    leaf = given.file_name or FOLDER_LEAF
    _refuse_separators("input %s" % given.name, leaf)
    folder = shared / "inputs" / given.sha256
    where = folder / leaf
    if where.exists():
        return where
    if not copy:
        print("mkdir -p %s && cp -r %s %s"
              % (shlex.quote(str(folder)), shlex.quote(str(given.path)),
                 shlex.quote(str(where))), file=out)
        return where
    print("copying input %s (%s) to %s" % (given.name, given.path, where), file=out,
          flush=True)
    # Copied beside, checked, then renamed into place whole: a copy cut short is never taken
    # for the input, and a copy in use (another run's job may be reading it) never removed.
    staging = folder.with_name(".%s.%s.partial" % (given.sha256, secrets.token_hex(6)))
    try:
        staging.mkdir(parents=True)
        if given.path.is_dir():
            shutil.copytree(given.path, staging / leaf, symlinks=False)
        else:
            shutil.copy2(given.path, staging / leaf)
        landed, _, _ = inputmod.digest(staging / leaf, "the copy of input %s" % given.name,
                                       inputmod.DigestCache(load=False), out,
                                       given.file_name)
        if landed != given.sha256:
            raise UserError("input %s: the copy in %s has sha256 %s, not the %s of %s: it "
                            "changed while it was copied, or shared_dir lost bytes; run again"
                            % (given.name, shared / "inputs", landed, given.sha256,
                               given.path))
        try:
            staging.rename(folder)
        except OSError:
            if not where.exists():  # else another run put the same copy there first
                raise
    except OSError as exc:
        raise UserError("input %s: copying %s into %s failed (%s): free space there, or "
                        "make it writable" % (given.name, given.path, shared / "inputs",
                                              exc.strerror or exc))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return where


def _step(job: Job, p: cellmod.Prepared, use: ImageUse, image: BuiltImage,
          shared_data: Path | None, workload: Path | None, host: Host,
          inputs: list[tuple[InputPlan, Path]] | None = None) -> Step:
    res: Resources = p.resources
    plan = p.cell.workload
    # The copies in shared_dir: the workload's left its bytecode caches out (_copy_workload),
    # so there is nothing to hide; the inputs', in the plan's order.
    files = cellspec.CellFiles(
        results=str(job.run_dir / "cells" / p.file_stem / "results"),
        data=str(shared_data) if shared_data is not None else None,
        workload=str(workload) if workload is not None else None,
        inputs=tuple(str(copied) for _, copied in inputs or []), hide_bytecode=False)
    gpus = 0
    if res.device == "cuda":
        gpus = res.gpus if isinstance(res.gpus, int) else job.block.gpu_count
    # No cpuset: Slurm binds a step to the CPUs it gave the job.
    launch = cellspec.cell_spec(p.file_stem, use.reference, image.image.id, image.plan.tag,
                                p.command(), res, files, plan, pin_cpuset=False, gpus=gpus)
    for bind in launch.binds:
        if SHELL_ACTIVE & set(bind.source):
            raise UserError("%s: a path holding $, `, \", \\ or a newline cannot be handed "
                            "to a batch script's steps; move it" % bind.source)
    cpus = int(res.cpus) if res.cpus else host.cpus
    options = ["--cpus-per-task=%d" % max(1, cpus)]
    if job.block.runtime != "podman" and launch.memory_bytes:
        options.append("--mem=%dM" % max(1, launch.memory_bytes // 2**20))
    if job.block.runtime == "pyxis":
        return Step(p.file_stem, options + runtimes.pyxis(launch), [])
    return Step(p.file_stem, options, runtimes.BUILDERS[job.block.runtime](launch))


# --- following the jobs ------------------------------------------------------------------

def _follow(jobs: list[Job], opts: Options, out: TextIO) -> int:
    total = sum(len(job.cells) for job in jobs)
    shown = MatrixProgress(total, out, live=False)
    done: list[tuple[cellmod.Cell, dict[str, Any]]] = []
    overheads: list[float] = []
    started = time.perf_counter()
    try:
        while any(job.cells for job in jobs):
            for job in jobs:
                _poll(job, opts, shown, done, overheads)
            if any(job.cells for job in jobs):
                time.sleep(POLL_S)
    except KeyboardInterrupt:
        shown.close()
        print("\ncancelling job(s) %s ..." % ", ".join(j.job_id or "?" for j in jobs),
              file=out, flush=True)
        lingering = [job.job_id for job in jobs if job.job_id and job.cells
                     and not cluster.cancel(job.job_id)]
        print("interrupted: job(s) %s cancelled%s; %d finished cells are kept in %s; run "
              "the same command again to run only the missing ones"
              % (", ".join(j.job_id or "?" for j in jobs),
                 " (%s still leaving the queue: see squeue)" % ", ".join(lingering)
                 if lingering else "", len(done), opts.results_dir), file=out)
        return 130
    shown.close()
    code = console.close_run(done, out, time.perf_counter() - started, opts.results_dir,
                             opts.log_dir, overheads,
                             "Slurm cell (the step's wall time beyond bench's own: srun and "
                             "the runtime's start and stop)")
    ran = [r["run_s"] for _, r in done if r.get("run_s") is not None]
    if ran:
        whole = time.perf_counter() - min(job.submitted_at for job in jobs)
        print("from submission to the last result: %.1f s for %d cells, bench's own %.1f s: "
              "%.2f s of queue, job start, steps and take-in per cell"
              % (whole, len(done), sum(ran), (whole - sum(ran)) / len(done)), file=out)
    return code


def _poll(job: Job, opts: Options, shown: MatrixProgress,
          done: list[tuple[cellmod.Cell, dict[str, Any]]], overheads: list[float]) -> None:
    """Take in the cells whose steps ended; end the job's unfinished cells if it ended."""
    assert job.job_id is not None
    state = cluster.job_state(job.job_id)
    seen = (state.state, state.reason) if state is not None else None
    if state is not None and seen != job.last_seen and not state.ended:
        print("job %s %s%s" % (job.job_id, state.state.lower(),
                               " (%s)" % state.reason if state.reason not in
                               ("", "None", "(null)") else
                               " on %s" % state.node if state.node else ""),
              file=shown.out, flush=True)
    job.last_seen = seen
    for stem in list(job.cells):
        folder = job.run_dir / "cells" / stem
        if (folder / "exit").is_file():
            _take(job, stem, folder, opts, shown, done, overheads, None)
    if job.cells and (state is None or state.ended):
        # One more look: a step may have ended between the first look and the state.
        for stem in list(job.cells):
            folder = job.run_dir / "cells" / stem
            sentence = (state.sentence(job.job_id) if state is not None else
                        "Slurm no longer knows job %s (it ended before its state could be "
                        "read)" % job.job_id)
            if state is not None and state.state == "COMPLETED" \
                    and not (folder / "exit").is_file():
                sentence = ("Slurm job %s ended COMPLETED without running this cell's step "
                            "(its output: %s)" % (job.job_id, job.run_dir / "job.out"))
            _take(job, stem, folder, opts, shown, done, overheads,
                  None if (folder / "exit").is_file() else sentence)


def _take(job: Job, stem: str, folder: Path, opts: Options, shown: MatrixProgress,
          done: list[tuple[cellmod.Cell, dict[str, Any]]], overheads: list[float],
          ended: str | None) -> None:
    planned = job.cells.pop(stem)
    p = planned.p
    cell = p.cell
    shown.start(len(done) + 1, cell.label)
    log_lines = _save_log(folder, opts.log_dir / ("%s.log" % stem))
    info = _slurm_info(job, folder)
    record: dict[str, Any] | None = None
    if ended is not None:
        record = store.host_failure(p.config, FailureKind.SLURM_JOB_ENDED, ended)
    else:
        record = store.read(folder / "results" / ("%s.json" % stem))
        # A step that failed as its job ended (a node lost, the time limit, scancel by an
        # admin) failed because of that: Slurm's state says why, the step's words after it.
        failed = record is None or record.get("status") != "ok"
        state = cluster.job_state(job.job_id) if failed and job.job_id else None
        if state is not None and state.ended and state.state != "COMPLETED":
            said = ((record.get("error") or {}).get("message") if record is not None
                    else None) or _last_words(log_lines)
            why = {"type": FailureKind.SLURM_JOB_ENDED, "message": state.sentence(job.job_id or "?")
                   + ("; the step said: %s" % said if said else "")}
            if record is None:
                record = store.host_failure(p.config, why["type"], why["message"])
            else:  # bench's own record of what it did before it was stopped, with the cause
                record["status"], record["error"] = "failed", why
        if record is None:
            code = _read_exit(folder)
            said = _last_words(log_lines)
            record = store.host_failure(
                p.config, FailureKind.CONTAINER_EXITED if code else FailureKind.NO_RESULT,
                ("the step exited with code %s on %s (Slurm job %s)%s"
                 % (code, info.get("node"), job.job_id, ": " + said if said else ""))
                if code else takein.NO_RESULT)
    if record.get("status") != "ok":
        takein.with_tail(record, log_lines)
    record["noise"] = _noise(info)
    record["slurm"] = info
    if record.get("run_s") is not None and info.get("step_s") is not None:
        record["host_s"] = info["step_s"]
        overheads.append(info["step_s"] - record["run_s"])
    records.annotate(record, p, planned.target, planned.image, planned.target_accuracy,
                     order=planned.order)
    records.save(opts.results_dir, p, record)
    # Counted before it is shown: a Ctrl-C between the two must not lose it from the count.
    done.append((cell, record))
    shown.done(console.figure(record), executed=True)


# Errors a runtime prints whose fix is known: said beside its words.
KNOWN_FIXES = {
    "error setting rlimit": "Podman's default ulimits are above this node's hard limits: set "
                            "default_ulimits = [] under [containers] in containers.conf "
                            "(docs/hpc.md)",
    "container-init binary not found": "Podman's --init needs catatonit on the node",
}


def _last_words(lines: list[str]) -> str:
    """The step's own last line (the runtime's error, bench's exception), not srun's, with
    the fix where it is a known one."""
    for line in reversed(lines):
        text = line.strip()
        if text and not text.startswith("srun: "):
            said = terminal.safe(text)[:300]
            fixes = [fix for needle, fix in KNOWN_FIXES.items() if needle in text]
            return said + ("; %s" % fixes[0] if fixes else "")
    return ""


def _read_exit(folder: Path) -> int | None:
    try:
        return int((folder / "exit").read_text().strip())
    except (OSError, ValueError):
        return None


def _save_log(folder: Path, log_path: Path) -> list[str]:
    """The step's log, as much of its end as the host keeps, read without following a link
    (the step wrote it in shared_dir, which a node's user can also write)."""
    try:
        with boundedread.regular(folder / "log", 1 << 62) as stream:
            size = os.fstat(stream.fileno()).st_size
            stream.seek(max(0, size - takein.LOG_CAP))
            data = stream.read(takein.LOG_CAP)
    except (OSError, boundedread.Unreadable):
        return []
    return takein.keep_log(data, log_path)


def _slurm_info(job: Job, folder: Path) -> dict[str, Any]:
    """What Slurm said about the step: the job, its node and what it gave."""
    values: dict[str, str] = {}
    try:
        for line in (folder / "slurm.env").read_text().splitlines():
            key, _, value = line.partition("=")
            values[key] = value
    except OSError:
        pass
    others: set[str] = set()
    for name in ("others.before", "others.after"):
        try:
            others.update(line.split()[0] for line in (folder / name).read_text().splitlines()
                          if line.strip())
        except OSError:
            pass
    step_s = None
    try:
        step_s = round((folder / "exit").stat().st_mtime
                       - (folder / "others.before").stat().st_mtime, 3)
    except OSError:
        pass
    return {"job_id": job.job_id, "partition": job.block.partition,
            "node": values.get("SLURMD_NODENAME"), "runtime": job.block.runtime,
            "exclusive": job.block.exclusive,
            "cpus_on_node": values.get("SLURM_CPUS_ON_NODE"),
            "gpus": values.get("SLURM_JOB_GPUS") or None,
            "memory_per_node_mb": values.get("SLURM_MEM_PER_NODE"),
            "other_jobs": sorted(others), "step_s": step_s}


def _noise(info: dict[str, Any]) -> dict[str, Any]:
    reasons = []
    if info["other_jobs"]:
        reasons.append("other Slurm jobs ran on node %s beside this cell: %s"
                       % (info.get("node"), ", ".join(info["other_jobs"][:10])))
    return {"host": None, "gpu": None, "contended": bool(reasons), "reasons": reasons,
            "unavailable": "a Slurm cell: the node's CPU counters are not read from the login "
                           "node; what Slurm said is in the record's slurm section"}
