"""`envbench slurm` (./noxw -s slurm): each Slurm target's cells as one batch job.

On the login node: preflight (nothing is submitted on a ✘), the images built in the engine
here and saved for the nodes, the data set and the user's code copied into shared_dir
(slurm.staging), one job per target whose steps run the cells in the kit's round order
(slurm.jobcells), then the jobs followed: each cell is taken in as its step ends, as every
executor's is (cells.lifecycle), and a job that ends early leaves each unfinished cell failed
with one sentence naming the Slurm state and the job id. Ctrl-C cancels the jobs and keeps
what finished; the same command again runs only the cells without a current result. --print
writes the script and the conversion commands, and submits nothing.
"""
from __future__ import annotations

import dataclasses
import secrets
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

from envbench import users
from envbench.cells import console, dataset, lifecycle, schedule, takein, triage
from envbench.cells import expansion as cellmod
from envbench.cells.gpufit import GpuBlock
from envbench.cells.matrixrun import build_images, data_dir_for
from envbench.cells.progress import MatrixProgress
from envbench.command_options import Options
from envbench.engine import connection
from envbench.engine.host import Host
from envbench.matrix import models
from envbench.results.identity import DataIdentity
from envbench.slurm import cluster, images, preflight, staging, trust
from envbench.slurm.jobcells import Job
from envbench.user_errors import BadInput

POLL_S = 2.0


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
    staging.refuse_unmountable(cells)
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
    stacks = triage.Stacks(built, failures, {})
    jobs = []
    for name in names:
        part = checks[name].partition
        assert part is not None
        host = Host(part.cpus or 1, part.memory_mb * 2**20 if part.memory_mb else None)
        jobs.append(_plan_job(name, m, [c for c in cells if c.target == name], host, data,
                              data_dir, dataclasses.replace(stacks,
                                                            gpu_blocked=blocked.get(name, {})),
                              seed, opts, client, out))
    jobs = [job for job in jobs if job.cells]
    if not jobs:
        print("every cell has a current result in %s: nothing to submit" % opts.results_dir,
              file=out)
        return 0
    if opts.print_only:
        return 0
    for job in jobs:
        job.start()
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
              data: DataIdentity, data_dir: Path | None, stacks: triage.Stacks, seed: int,
              opts: Options, client: Any, out: TextIO) -> Job:
    """The target's cells decided and, those that run, launched as the steps of one job
    (its script written); --print: the commands and the script, printed."""
    target = m.targets[name]
    block = target.slurm
    assert block is not None
    shared = Path(block.shared_dir)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    copy = not opts.print_only
    job = Job(name, block, shared / "runs" / ("%s-%s-%s" % (name, stamp, secrets.token_hex(3))),
              host, out, opts.log_dir, client, copy=copy,
              manifest=trust.Manifest() if copy else None)
    if opts.print_only:
        print("# the data and code the cells read (envbench copies them unless --print):",
              file=out)
    job.shared_data = (staging.copy_data(data_dir, data, shared, out, copy)
                       if data_dir is not None else None)
    for planned_round in schedule.rounds(cells, "interleaved", seed):
        for slot in planned_round:
            order = slot.record("interleaved", seed)
            # A refused cell is recorded failed with its reason (said above), not submitted
            # (--print writes no result); a current one was done by an earlier run.
            decided = triage.triage(slot.cell, m, stacks, host, data, opts.results_dir,
                                    order, record=not opts.print_only)
            if not decided.runs:
                continue
            assert decided.built is not None
            job.launch(takein.Placed(decided.prepared, target, decided.built.record,
                                     m.benchmark.target_accuracy, order), decided.built,
                       _planned_only)
    if not job.cells:
        return job
    text = job.script()
    if opts.print_only:
        print("# the conversion commands (envbench runs them unless --print):", file=out)
        for env_name in job.uses:
            built = stacks.built[env_name]
            for line in images.conversion_commands(block.runtime, built.plan.tag,
                                                   built.image.id, shared):
                print(line, file=out)
        print("# the batch script (sbatch it from a folder you may write):", file=out)
        print(text, file=out)
        return job
    trust.kit_folder(job.run_dir)
    (job.run_dir / "job.sh").write_text(text)
    return job


def _planned_only(placed: takein.Placed, ending: takein.Ending) -> dict[str, Any]:
    """A batch job's cells are taken in as it is polled (lifecycle.Cells.drain), never as
    they are launched."""
    raise AssertionError("a Slurm step was taken in as it was planned")


# --- following the jobs ------------------------------------------------------------------

def _follow(jobs: list[Job], opts: Options, out: TextIO) -> int:
    """The jobs polled until each cell is taken in; Ctrl-C cancels them, keeping what ended."""
    shown = MatrixProgress(sum(len(job.cells) for job in jobs), out, live=False)
    cells = lifecycle.Cells(opts.results_dir, shown)
    done = cells.done
    started = time.perf_counter()
    try:
        cells.drain(jobs, POLL_S)
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
                             opts.log_dir, cells.overheads,
                             "Slurm cell (the step's wall time beyond bench's own: srun and "
                             "the runtime's start and stop)")
    ran = [r["run_s"] for _, r in done if r.get("run_s") is not None]
    if ran:
        whole = time.perf_counter() - min(job.submitted_at for job in jobs)
        print("from submission to the last result: %.1f s for %d cells, bench's own %.1f s: "
              "%.2f s of queue, job start, steps and take-in per cell"
              % (whole, len(done), sum(ran), (whole - sum(ran)) / len(done)), file=out)
    return code
