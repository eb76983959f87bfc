"""Slurm's client commands as the login node has them (sinfo, sbatch, squeue, scontrol,
scancel, srun): each with a timeout, each failure one sentence that names the command.

Job states come from squeue while the job is known to the controller and scontrol after;
sacct is read where accounting answers, since many clusters close it to users or run none.
"""
from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass

from envbench.user_errors import UserError

TIMEOUT_S = 60
# States a job does not leave (Slurm's JOB_STATE_BASE names, as squeue/scontrol print them).
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
         "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "REVOKED"}
# What each ended state means for the cells the job had not finished, in words.
MEANING = {"FAILED": "the batch job failed", "CANCELLED": "the job was cancelled",
           "TIMEOUT": "the job reached its time limit (slurm: time)",
           "NODE_FAIL": "the node failed under the job",
           "PREEMPTED": "the job was preempted by another",
           "OUT_OF_MEMORY": "the job ran out of memory",
           "BOOT_FAIL": "the node failed to boot for the job",
           "DEADLINE": "the job passed its deadline", "REVOKED": "the job was revoked"}


class SlurmError(UserError):
    """A Slurm command failed or is missing: what it said, in one sentence."""


def available() -> str | None:
    """Why this machine cannot talk to a Slurm cluster (None: it can)."""
    missing = [name for name in ("sinfo", "sbatch", "squeue", "scontrol", "scancel")
               if shutil.which(name) is None]
    if missing:
        return ("%s not found: run this on the cluster's login node, where Slurm's client "
                "commands are" % ", ".join(missing))
    return None


def run(command: list[str], timeout_s: float = TIMEOUT_S, check: bool = True,
        input_text: str | None = None) -> subprocess.CompletedProcess[str]:
    """One client command; SlurmError with its own words when it fails (check)."""
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s,
                              input=input_text, stdin=None if input_text else
                              subprocess.DEVNULL)
    except FileNotFoundError:
        raise SlurmError("%s not found: run this on the cluster's login node" % command[0]) \
            from None
    except subprocess.TimeoutExpired:
        raise SlurmError("%s did not answer in %.0f s (is slurmctld up?)"
                         % (" ".join(command[:2]), timeout_s)) from None
    if check and proc.returncode != 0:
        said = " ".join((proc.stderr or proc.stdout).split())[:400]
        raise SlurmError("%s failed (exit %d): %s" % (" ".join(command[:2]), proc.returncode,
                                                      said or "it printed nothing"))
    return proc


@dataclass(frozen=True)
class Partition:
    name: str
    state: str           # up, down, drain, inact
    nodes: list[str]
    cpus: int            # per node (the least, where the partition mixes nodes)
    memory_mb: int       # per node (the least)
    gres: list[str]      # per node, as Slurm writes them: gpu:h100:4(S:0-1)


def partitions() -> dict[str, Partition]:
    """Every partition this user may see, by name."""
    proc = run(["sinfo", "--noheader", "--format", "%R|%a|%N|%c|%m|%G"])
    found: dict[str, Partition] = {}
    for line in proc.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 6:
            continue
        name, state, nodes, cpus, memory, gres = parts
        known = found.get(name)
        cpu_count = _number(cpus)
        memory_mb = _number(memory)
        gres_list = [] if gres in ("(null)", "") else gres.split(",")
        if known is None:
            found[name] = Partition(name, state, [nodes], cpu_count, memory_mb, gres_list)
        else:  # one line per node configuration: keep the least of each
            found[name] = Partition(name, state, known.nodes + [nodes],
                                    min(known.cpus, cpu_count),
                                    min(known.memory_mb, memory_mb), known.gres + gres_list)
    return found


# Node states (sinfo %T) in which a node takes no new job: it must be resumed (by an admin, or
# by Slurm once it answers again) before a job can start on it. "~" (powered down to save
# energy) and "#" (powering up) are nodes Slurm starts for a job, so they can take one; a
# trailing "*" (not answering just now, as a node does for a moment after it is resumed)
# leaves the judgement to the state before it and to the probe job.
CLOSED_STATES = ("down", "drain", "drained", "draining", "fail", "failing", "maint",
                 "reserved", "inval", "future", "unknown", "not_responding")


@dataclass(frozen=True)
class NodeState:
    name: str
    state: str  # sinfo's long form, flags included: idle, mixed, drained, down*, idle~, ...
    reason: str  # why an admin or Slurm set it so ("none" where there is no reason)

    @property
    def open(self) -> bool:
        """Whether a job can start on the node (now, or once the jobs on it end)."""
        # Flags trail the state (idle~, mixed-); a compound state joins its parts (idle+drain).
        parts = self.state.rstrip("~#!%$@^-*").split("+")
        return not any(part in CLOSED_STATES for part in parts)

    def describe(self) -> str:
        said = self.reason.strip()
        return "%s %s%s" % (self.name, self.state, " (%s)" % said
                            if said and said.lower() not in ("none", "(null)") else "")


def node_states(partition: str, nodelist: str | None = None) -> list[NodeState]:
    """The state of each node of ``partition`` (only those of ``nodelist``, where given)."""
    command = ["sinfo", "--noheader", "--Node", "--partition", partition, "--format",
               "%N|%T|%E"]
    if nodelist is not None:
        command += ["--nodes", nodelist]
    return parse_node_states(run(command).stdout)


def parse_node_states(text: str) -> list[NodeState]:
    """sinfo --Node --format '%N|%T|%E': one line a node, its name, state and reason."""
    found: dict[str, NodeState] = {}
    for line in text.splitlines():
        parts = line.strip().split("|", 2)
        if len(parts) == 3 and parts[0]:
            found.setdefault(parts[0], NodeState(parts[0], parts[1].strip().lower(),
                                                 parts[2].strip()))
    return list(found.values())


def _number(text: str) -> int:
    """sinfo's '64', '64+' (mixed nodes: at least), '257000'."""
    digits = text.rstrip("+").strip()
    return int(digits) if digits.isdigit() else 0


def gres_gpus(gres: list[str], kind: str | None = None) -> int:
    """The most GPUs (of ``kind``, where given) one node of these GRES strings offers."""
    most = 0
    for entry in gres:
        fields = entry.split("(")[0].split(":")
        if not fields or fields[0] != "gpu":
            continue
        count = fields[-1]
        name = fields[1] if len(fields) == 3 else None
        if kind is not None and name != kind:
            continue
        most = max(most, int(count) if count.isdigit() else 1)
    return most


def submit(script_path: str) -> str:
    """sbatch the script; the job id."""
    proc = run(["sbatch", "--parsable", script_path])
    job_id = proc.stdout.strip().split(";")[0]
    if not job_id.isdigit():
        raise SlurmError("sbatch printed no job id: %s" % proc.stdout.strip()[:200])
    return job_id


@dataclass(frozen=True)
class JobState:
    state: str           # PENDING, RUNNING, COMPLETED, NODE_FAIL, ...
    reason: str          # Slurm's reason (Resources, Priority, NodeDown, ...)
    node: str | None

    @property
    def ended(self) -> bool:
        return self.state in ENDED

    def sentence(self, job_id: str) -> str:
        """Why the job's unfinished cells did not finish."""
        meaning = MEANING.get(self.state, "the job ended")
        reason = "" if self.reason in ("", "None", "(null)") else ", reason %s" % self.reason
        return "Slurm job %s ended %s (%s%s)" % (job_id, self.state, meaning, reason)


def job_state(job_id: str) -> JobState | None:
    """The job's state: squeue while it is queued or running, scontrol show job after (None:
    the controller has forgotten it and sacct cannot say)."""
    proc = run(["squeue", "--noheader", "--jobs", job_id, "--format", "%T|%r|%N"],
               check=False)
    line = proc.stdout.strip()
    if proc.returncode == 0 and line:
        state, reason, node = (line.split("|") + ["", ""])[:3]
        return JobState(state.strip(), reason.strip(), node.strip() or None)
    proc = run(["scontrol", "show", "job", "--oneliner", job_id], check=False)
    if proc.returncode == 0 and "JobState=" in proc.stdout:
        fields = dict(f.split("=", 1) for f in proc.stdout.split() if "=" in f)
        nodes = fields.get("NodeList") or ""
        return JobState(fields.get("JobState", "UNKNOWN"), fields.get("Reason", ""),
                        None if nodes in ("(null)", "") else nodes)
    if shutil.which("sacct"):
        proc = run(["sacct", "--noheader", "--parsable2", "--jobs", job_id, "--format",
                    "State,Reason,NodeList", "-X"], check=False)
        line = proc.stdout.strip().splitlines()[0] if proc.stdout.strip() else ""
        if proc.returncode == 0 and line:
            state, reason, node = (line.split("|") + ["", ""])[:3]
            return JobState(state.split()[0], reason, node or None)
    return None


def cancel(job_id: str, wait_s: float = 90.0) -> bool:
    """scancel the job and wait until it has left the queue (its steps killed, its
    containers removed by the job's own trap). False: still there after ``wait_s``."""
    run(["scancel", job_id], check=False)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        proc = run(["squeue", "--noheader", "--jobs", job_id, "--format", "%T"], check=False)
        if proc.returncode != 0 or not proc.stdout.strip():
            return True
        time.sleep(1)
    return False
