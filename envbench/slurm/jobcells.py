"""A Slurm batch job as an executor of the cell lifecycle (cells.lifecycle): each cell
launched is a step planned into the job's script, start() submits it, and poll() hands each
cell whose step ended (or that the job, ending, never ran) to the take-in with what Slurm
said: its node, what it gave, the other jobs beside it, and why a job ended early.
"""
from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, TextIO

from bench import boundedread
from bench.rules import FailureKind
from envbench import terminal
from envbench.cells import cellspec, lifecycle, takein
from envbench.cells import expansion as cellmod
from envbench.cells.resources import Resources
from envbench.engine.host import Host
from envbench.images.build import BuiltImage
from envbench.matrix import models
from envbench.matrix.inputs import InputPlan
from envbench.results import store
from envbench.slurm import cluster, images, runtimes, staging, trust
from envbench.slurm.script import REFUSED, ImageUse, Step, render
from envbench.user_errors import UserError

# Characters the job's bash would read as its own inside the quoted words of a step.
SHELL_ACTIVE = set('$`"\\\n')


@dataclass
class Job:
    """One target's cells as the steps of one batch job. ``copy`` False (--print): what
    would be converted and copied is printed, and nothing is written or submitted."""

    target: str
    block: models.Slurm
    run_dir: Path
    host: Host  # the partition's node, as the preflight found it
    out: TextIO
    log_dir: Path  # where the host keeps each cell's log
    client: Any = None  # the engine the images are saved from
    manifest: trust.Manifest | None = None  # the image files' digests (None: --print)
    shared_data: Path | None = None
    copy: bool = True
    # by file stem, in order: what each cell runs and what its record is completed with
    cells: dict[str, takein.Placed] = field(default_factory=dict)
    uses: dict[str, ImageUse] = field(default_factory=dict)  # by environment
    steps: list[Step] = field(default_factory=list)
    job_id: str | None = None
    submitted_at: float = 0.0
    last_seen: tuple[str, str] | None = None  # the state and reason last said
    live: bool = False

    def launch(self, placed: takein.Placed, built: BuiltImage, take: lifecycle.Take) -> None:
        """The cell planned as a step of the job: its image converted for the runtime and
        its code and inputs copied into shared_dir, once each."""
        p = placed.p
        cell = p.cell
        shared = Path(self.block.shared_dir)
        if cell.environment not in self.uses:
            if self.copy:
                assert self.manifest is not None
                self.uses[cell.environment] = images.ready(
                    self.block.runtime, self.client, built.plan.tag, built.image.id, shared,
                    self.out, self.manifest)
            else:
                self.uses[cell.environment] = ImageUse(
                    self.block.runtime, str(images.archive_path(shared, built.image.id)),
                    images.reference(self.block.runtime, shared, built.image.id))
        workload = (staging.copy_workload(cell, shared, self.out, self.copy)
                    if cell.workload.path else None)
        inputs = [(given, staging.copy_input(given, shared, self.out, self.copy))
                  for given in cell.workload.inputs]
        self.steps.append(self._step(p, self.uses[cell.environment], built, workload, inputs,
                                     placed.target.timeout_s))
        self.cells[p.file_stem] = placed

    def script(self) -> str:
        return render("envbench-%s" % self.target, self.block,
                      PurePosixPath(str(self.run_dir)), list(self.uses.values()), self.steps)

    def start(self) -> None:
        self.job_id = cluster.submit(str(self.run_dir / "job.sh"))
        self.submitted_at = time.perf_counter()
        print("submitted job %s: %d cell(s) of %s on partition %s (%s)"
              % (self.job_id, len(self.cells), self.target, self.block.partition,
                 self.run_dir / "job.sh"), file=self.out, flush=True)

    def poll(self, take: lifecycle.Take) -> bool:
        """Take in the cells whose steps ended; end the job's unfinished cells if it ended."""
        assert self.job_id is not None
        state = cluster.job_state(self.job_id)
        self._say(state)
        if self.manifest is not None:  # a SIF the job built on its node: its digest kept
            images.take_in_made(self.run_dir, Path(self.block.shared_dir), self.manifest)
        for stem in list(self.cells):
            folder = self.run_dir / "cells" / stem
            if (folder / "exit").is_file():
                placed = self.cells.pop(stem)
                take(placed, self._ending(placed, folder, None))
        if self.cells and (state is None or state.ended):
            # One more look: a step may have ended between the first look and the state.
            for stem in list(self.cells):
                folder = self.run_dir / "cells" / stem
                sentence = (state.sentence(self.job_id) if state is not None else
                            "Slurm no longer knows job %s (it ended before its state could "
                            "be read)" % self.job_id)
                refused = _refused(self.run_dir)
                if refused and not (folder / "exit").is_file():
                    sentence = "Slurm job %s stopped before its steps: %s" % (self.job_id,
                                                                              refused)
                elif state is not None and state.state == "COMPLETED" \
                        and not (folder / "exit").is_file():
                    sentence = ("Slurm job %s ended COMPLETED without running this cell's "
                                "step (its output: %s)" % (self.job_id,
                                                           self.run_dir / "job.out"))
                placed = self.cells.pop(stem)
                take(placed, self._ending(
                    placed, folder, None if (folder / "exit").is_file() else sentence))
        return bool(self.cells)

    def _say(self, state: cluster.JobState | None) -> None:
        """The job's state, said when it changes."""
        seen = (state.state, state.reason) if state is not None else None
        if state is not None and seen != self.last_seen and not state.ended:
            print("job %s %s%s" % (self.job_id, state.state.lower(),
                                   " (%s)" % state.reason if state.reason not in
                                   ("", "None", "(null)") else
                                   " on %s" % state.node if state.node else ""),
                  file=self.out, flush=True)
        self.last_seen = seen

    def _step(self, p: cellmod.Prepared, use: ImageUse, image: BuiltImage,
              workload: Path | None, inputs: list[tuple[InputPlan, Path]],
              timeout_s: int) -> Step:
        res: Resources = p.resources
        # The copies in shared_dir: the workload's left its bytecode caches out
        # (staging.copy_workload), so there is nothing to hide; the inputs', in the plan's
        # order.
        files = cellspec.CellFiles(
            results=str(self.run_dir / "cells" / p.file_stem / "results"),
            data=str(self.shared_data) if self.shared_data is not None else None,
            workload=str(workload) if workload is not None else None,
            inputs=tuple(str(copied) for _, copied in inputs), hide_bytecode=False)
        gpus = 0
        if res.device == "cuda":
            gpus = res.gpus if isinstance(res.gpus, int) else self.block.gpu_count
        # No cpuset: Slurm binds a step to the CPUs it gave the job.
        launch = cellspec.cell_spec(p.file_stem, use.reference, image.image.id,
                                    image.plan.tag, p.command(), res, files, p.cell.workload,
                                    pin_cpuset=False, gpus=gpus)
        nodes = p.cell.settings["nodes"]
        if nodes > 1:
            # The nodes' benches meet at the first node's address: the step's containers
            # share their node's network (Podman's only; docs/hpc.md and the page say so).
            launch = dataclasses.replace(launch, lockdown=dataclasses.replace(
                launch.lockdown, network="host"), args=(*launch.args, "--rendezvous",
                                                        runtimes.RENDEZVOUS))
        for bind in launch.binds:
            if SHELL_ACTIVE & set(bind.source):
                raise UserError("%s: a path holding $, `, \", \\ or a newline cannot be "
                                "handed to a batch script's steps; move it" % bind.source)
        cpus = int(res.cpus) if res.cpus else self.host.cpus
        # The target's timeout_s as the step's own time limit: a cell that hangs is ended by
        # Slurm, and the job goes on to the next, as the engine's wait does on a VM.
        # One task per node: each node's bench starts its --nproc ranks itself.
        options = ["--nodes=%d" % nodes, "--ntasks=%d" % nodes, "--ntasks-per-node=1",
                   "--cpus-per-task=%d" % max(1, cpus),
                   "--time=%d:%02d" % divmod(timeout_s, 60)]
        if self.block.runtime != "podman" and launch.memory_bytes:
            options.append("--mem=%dM" % max(1, launch.memory_bytes // 2**20))
        if self.block.runtime == "pyxis":
            return Step(p.file_stem, options + runtimes.pyxis(launch), [])
        command = runtimes.BUILDERS[self.block.runtime](launch)
        if nodes > 1 and self.block.runtime == "podman":
            command = runtimes.podman_per_node(command)
        return Step(p.file_stem, options, command)

    def _ending(self, placed: takein.Placed, folder: Path, ended: str | None
                ) -> takein.Ending:
        """How the cell's step ended, as Slurm and the step's folder say; ``ended``: the
        job ended without running it, in one sentence."""
        stem = placed.p.file_stem
        log_lines = _save_log(folder, self.log_dir / ("%s.log" % stem))
        info = _slurm_info(self, folder)
        ending = takein.Ending(None, log_lines, overrules=True, noise=_noise(info),
                               host_s=info.get("step_s"), folder=folder / "results",
                               sections={"slurm": info})
        if ended is not None:
            ending.failure = (FailureKind.SLURM_JOB_ENDED, ended)
            return ending
        ending.record = record = store.read(folder / "results" / ("%s.json" % stem))
        # A step that failed as its job ended (a node lost, the time limit, scancel by an
        # admin) failed because of that: Slurm's state says why, the step's words after it.
        failed = record is None or record.get("status") != "ok"
        state = cluster.job_state(self.job_id) if failed and self.job_id else None
        code = _read_exit(folder)
        if state is not None and state.ended and state.state != "COMPLETED":
            said = ((record.get("error") or {}).get("message") if record is not None
                    else None) or _last_words(log_lines)
            ending.failure = (FailureKind.SLURM_JOB_ENDED, state.sentence(self.job_id or "?")
                              + ("; the step said: %s" % said if said else ""))
        elif failed and _past_time_limit(log_lines):
            ending.failure = (FailureKind.TIMEOUT, "the cell ran past the target's timeout_s="
                              "%d: Slurm ended its step (Slurm job %s)"
                              % (placed.target.timeout_s, self.job_id))
        elif record is None and code:
            said = _last_words(log_lines)
            ending.failure = (FailureKind.CONTAINER_EXITED,
                              "the step exited with code %s on %s (Slurm job %s)%s"
                              % (code, info.get("node"), self.job_id,
                                 ": " + said if said else ""))
        return ending


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


def _refused(run_dir: Path) -> str:
    """What the job said when it stopped before its steps (script.checked), as one line."""
    try:
        with boundedread.regular(run_dir / REFUSED, 4096) as stream:
            said = stream.read(4096)
    except (OSError, boundedread.Unreadable):
        return ""
    return terminal.safe(" ".join(said.decode("utf-8", errors="replace").split()))[:600]


def _past_time_limit(lines: list[str]) -> bool:
    """Whether Slurm ended the step at its time limit (slurmstepd's or srun's words)."""
    return any("DUE TO TIME LIMIT" in line and "STEP" in line for line in lines[-50:])


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
