"""The batch script of one Slurm target: one job, one node, the target's cells as its steps in
the kit's round order, so that every environment of a comparison runs on the same node.

Each step leaves in the run's folder (shared_dir/runs/RUN/cells/STEM/) bench's result, the
step's output, what Slurm gave it (slurm.env), the other jobs on its node before and after it
(others), and last its exit code (exit): the login node takes a cell in when that appears.
A step whose exit file exists is not run again should the job be requeued by an admin.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import PurePosixPath

from envbench.matrix.models import Slurm
from envbench.slurm import runtimes


@dataclass(frozen=True)
class Step:
    stem: str
    srun_options: list[str]  # the step's own (CPUs, memory; Pyxis's container options)
    command: list[str]       # what srun runs (nothing more for Pyxis: it is in the options)


@dataclass(frozen=True)
class ImageUse:
    """A converted image the job makes ready before its steps (Podman loads its archive;
    Apptainer builds its SIF from the archive once, on the node, where it runs)."""

    runtime: str
    archive: str         # docker save's archive in shared_dir/images
    reference: str       # podman: the image ID; apptainer: the SIF; pyxis: the squashfs
    # The sha256 of the archive (and of Pyxis's squashfs) the login node wrote: the node
    # checks the file against it before using it (None: --print, nothing written yet).
    archive_sha256: str | None = None
    squashfs_sha256: str | None = None
    # Apptainer's SIF, built on a node by an earlier job, with the sha256 that job wrote in
    # its run folder (images.take_in_made): checked before use. None: the job builds it.
    sif_sha256: str | None = None


def header(job_name: str, block: Slurm, run_dir: PurePosixPath) -> list[str]:
    lines = ["#!/bin/bash", "#SBATCH --job-name=%s" % job_name,
             "#SBATCH --partition=%s" % block.partition, "#SBATCH --time=%s" % block.time,
             "#SBATCH --nodes=%d" % block.nodes,
             "#SBATCH --ntasks=1" if block.nodes == 1 else "#SBATCH --ntasks-per-node=1",
             "#SBATCH --output=%s" % (run_dir / "job.out"),
             # A node that fails ends the job (no silent requeue behind the user's back):
             # its unfinished cells are failed with Slurm's state, and the same command again
             # runs only those.
             "#SBATCH --no-requeue"]
    if block.exclusive:
        lines += ["#SBATCH --exclusive", "#SBATCH --mem=0"]
    if block.gpus is not None:
        lines.append("#SBATCH --gpus=%d" % block.gpus)
    if block.gres is not None:
        lines.append("#SBATCH --gres=%s" % block.gres)
    for option, value in (("account", block.account), ("qos", block.qos),
                          ("constraint", block.constraint), ("nodelist", block.nodelist)):
        if value is not None:
            lines.append("#SBATCH --%s=%s" % (option, value))
    return lines


PROLOGUE = r"""
set -uo pipefail
export RUN=%(run)s
mkdir -p "$RUN/cells"
# One CDI device per GPU Slurm gave the job (its absolute indexes; Podman's GPU cells).
ENVBENCH_GPU_DEVICES=()
IFS=, read -r -a _gpus <<< "${SLURM_JOB_GPUS:-${SLURM_STEP_GPUS:-}}"
for gpu in "${_gpus[@]}"; do
  [ -n "$gpu" ] && ENVBENCH_GPU_DEVICES+=(--device "nvidia.com/gpu=$gpu")
done
echo "envbench: job $SLURM_JOB_ID on $SLURMD_NODENAME"
# Where a step across nodes meets: the address of the job's first node (its steps' task 0
# runs there), and a port from the job's ID, so that two jobs on one node do not share it.
ENVBENCH_FIRST=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
_addr=$(scontrol show node "$ENVBENCH_FIRST" --oneliner 2>/dev/null \
  | sed -n 's/.* NodeAddr=\([^ ]*\).*/\1/p')
ENVBENCH_FIRST=${_addr:-$ENVBENCH_FIRST}
# as an address: a container may not resolve the node's names
_ip=$(getent ahostsv4 "$ENVBENCH_FIRST" 2>/dev/null | awk 'NR == 1 {print $1}')
ENVBENCH_FIRST=${_ip:-$ENVBENCH_FIRST}
ENVBENCH_PORT=$((20000 + (SLURM_JOB_ID %% 1000) * 32))
ENVBENCH_RENDEZVOUS=
next_port() {  # before each step's line, whose words expand it: a port of its own
  ENVBENCH_PORT=$((ENVBENCH_PORT + 1))
  ENVBENCH_RENDEZVOUS="$ENVBENCH_FIRST:$ENVBENCH_PORT"
}

others() {  # the other jobs on this node now (none on an exclusive node)
  squeue --noheader --nodelist "$SLURMD_NODENAME" --format '%%i %%u %%C' 2>/dev/null \
    | awk -v me="$SLURM_JOB_ID" '$1 != me'
}

after_step() { :; }  # STEM: what a runtime leaves of a step that was ended (Podman's below)

cell() {  # STEM, then srun's arguments: one step, its traces in $RUN/cells/STEM
  local stem=$1; shift
  local dir="$RUN/cells/$stem"
  [ -e "$dir/exit" ] && return 0
  mkdir -p "$dir/results"
  others > "$dir/others.before"
  echo "envbench: cell $stem"
  CURRENT=$stem
  srun "$@" > "$dir/log" 2>&1
  local code=$?
  after_step "$stem"
  others > "$dir/others.after"
  env | grep -E "^(%(said)s)=" > "$dir/slurm.env"
  echo "$code" > "$dir/exit.partial" && mv "$dir/exit.partial" "$dir/exit"
}
"""


# What the job's environment says of what Slurm gave it, kept beside each cell.
SAID = ("SLURM_JOB_ID", "SLURM_JOB_PARTITION", "SLURM_JOB_NODELIST", "SLURMD_NODENAME",
        "SLURM_CPUS_ON_NODE", "SLURM_JOB_CPUS_PER_NODE", "SLURM_JOB_GPUS", "SLURM_MEM_PER_NODE",
        "SLURM_JOB_ACCOUNT", "SLURM_JOB_QOS", "CUDA_VISIBLE_DEVICES")


# Podman: a job cancelled (scancel, Ctrl-C on the login node) or out of time kills the
# step's podman client; its container must not run on, or stay, after the job.
PODMAN_TRAP = ("CURRENT=\n"
               # The step's container, and on this node the one of each node a step across
               # nodes named (envbench-STEM-NODEID; runtimes.podman_per_node).
               "remove_cell() { podman ps --all --quiet --filter \"name=^envbench-$1(-[0-9]+)?$\" "
               "2>/dev/null | xargs -r podman rm --force --ignore >/dev/null 2>&1; }\n"
               "trap '[ -n \"$CURRENT\" ] && remove_cell \"$CURRENT\"' EXIT TERM INT\n"
               # A step Slurm ended at its time limit killed the podman client, not always
               # its container: removed before the next step starts.
               "after_step() { remove_cell \"$1\"; }")


def prepare_image(use: ImageUse) -> str:
    """The job's line that makes one image ready on the node, the file it reads from
    shared_dir checked first against the sha256 the login node wrote (none to make for Pyxis:
    its squashfs is made on the login node, where enroot reads the engine; only checked)."""
    archive, reference = shlex.quote(use.archive), shlex.quote(use.reference)
    if use.runtime == "podman":
        return ("podman image exists %s || { %s && podman load --quiet --input %s >&2; } "
                "|| echo %s >&2" % (reference, checked(use.archive, use.archive_sha256),
                                    archive, shlex.quote(
                                        "envbench: podman could not load %s" % use.archive)))
    if use.runtime == "apptainer":
        return _apptainer(use)
    return "%s  # %s: made on the login node" % (checked(use.reference, use.squashfs_sha256),
                                                 use.reference)


# $RUN/MADE/<SIF's name>.sha256: the digest of a SIF the job built on its node, which the
# login node records (images.take_in_made) so that a later job checks the SIF, not its name.
MADE = "made"


def _apptainer(use: ImageUse) -> str:
    """The SIF: checked against the digest an earlier job recorded, or built here from the
    checked archive, its digest written where the login node takes it in (the run folder,
    the user's alone), and renamed into place whole."""
    sif, archive = shlex.quote(use.reference), shlex.quote(use.archive)
    if use.sif_sha256 is not None:
        return "%s  # %s: built by an earlier job" % (checked(use.reference, use.sif_sha256),
                                                      use.reference)
    if use.archive_sha256 is None:  # --print: as a user would run it by hand
        return ("[ -f %s ] || { apptainer build %s.partial docker-archive://%s >&2 && "
                "mv %s.partial %s; }" % (sif, sif, archive, sif, sif))
    partial = shlex.quote(use.reference + ".partial-") + '"$SLURM_JOB_ID"'
    digest = '"$RUN/%s/"%s' % (MADE, shlex.quote(PurePosixPath(use.reference).name
                                                   + ".sha256"))
    return ("{ %s && apptainer build --force %s docker-archive://%s >&2 && mkdir -p "
            '"$RUN/%s" && sha256sum %s | cut -d" " -f1 > %s && mv %s %s; }'
            % (checked(use.archive, use.archive_sha256), partial, archive, MADE, partial,
               digest, partial, sif))


# Where the job says why it stopped before its steps: the login node reads it into the
# sentence each unrun cell is failed with.
REFUSED = "refused"


def checked(path: str, sha256: str | None) -> str:
    """A command that goes on only where ``path`` holds the bytes of ``sha256``; else the job
    says why in $RUN/refused and ends before any step (where ``sha256`` is None, --print:
    nothing to check)."""
    if sha256 is None:
        return "true"
    said = ("%s on the node is not the file the login node wrote (its sha256 differs): "
            "not used; run the same command again to make it again" % path)
    return ('{ echo %s | sha256sum --check --status || { echo %s | tee "$RUN/%s" >&2; '
            'exit 1; }; }' % (shlex.quote("%s  %s" % (sha256, path)), shlex.quote(said),
                              REFUSED))


def on_every_node(line: str, block: Slurm) -> str:
    """A line that makes an image ready, run where the job's steps will use it: here, or on
    each of its nodes (Podman's image store is the node's own; a SIF or a squashfs in
    shared_dir is checked on each node before use). A refusal on any node ends the job."""
    if block.nodes == 1:
        return line
    return ("srun --nodes=%d --ntasks=%d --ntasks-per-node=1 bash -c %s; "
            '[ -e "$RUN/%s" ] && exit 1' % (block.nodes, block.nodes, shlex.quote(line),
                                            REFUSED))


def render(job_name: str, block: Slurm, run_dir: PurePosixPath, images: list[ImageUse],
           steps: list[Step]) -> str:
    lines = header(job_name, block, run_dir)
    lines.append(PROLOGUE % {"run": shlex.quote(str(run_dir)), "said": "|".join(SAID)})
    if block.runtime == "podman":
        lines.append(PODMAN_TRAP)
    lines += [on_every_node(prepare_image(use), block) for use in images]
    lines.append("")
    for step in steps:
        lines.append("next_port; cell %s %s" % (shlex.quote(step.stem),
                                     runtimes.shell_words(step.srun_options + step.command)))
    lines.append('echo "envbench: all cells ran"')
    return "\n".join(lines) + "\n"
