"""One cell's command line in each runtime a Slurm node may have, from one description of the
cell: the same mounts as a Docker cell (results writable; data and the user's code read-only,
its copy in shared_dir without bytecode caches), the same environment, and as locked down as
the runtime allows. bench inside is unchanged: `python3 -m bench ARGS` in the image's /opt/envbench.

- Podman (run in CI on a real cluster): the Docker cell's lockdown flag for flag; GPUs by CDI,
  the ones Slurm gave the step.
- Apptainer: --containall --cleanenv --no-home --writable-tmpfs; its network and process
  limits are the site's, and the step's CPUs and memory are Slurm's (srun).
- Enroot through Pyxis: srun's own --container-* options; the rest as Apptainer.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from envbench.engine import sandbox

WORKDIR = "/opt/envbench"  # the image's WORKDIR (images/_stack.Dockerfile.j2)
ENTRY = ["python3", "-m", "bench"]  # the image's ENTRYPOINT
# Expanded by the job's shell at each step: one CDI device per GPU Slurm gave the job.
GPU_DEVICES = "${ENVBENCH_GPU_DEVICES[@]}"


@dataclass(frozen=True)
class Bind:
    source: str
    target: str
    read_only: bool = True


@dataclass(frozen=True)
class Launch:
    """A cell as every runtime needs it."""

    name: str                          # the cell's file stem: names the container
    image: str                         # podman: the image ID; apptainer: a SIF; pyxis: squashfs
    args: list[str]                    # bench's arguments
    binds: list[Bind]
    environment: dict[str, str] = field(default_factory=dict)
    user: str | None = None            # uid:gid (podman; the others run as the user anyway)
    cpus: float | None = None
    cpuset: str | None = None
    memory_bytes: int | None = None
    swap_bytes: int = 0
    gpus: int = 0


def container_name(stem: str) -> str:
    return "envbench-%s" % stem[:200]


def podman(cell: Launch) -> list[str]:
    # --replace: a step killed with its job (Ctrl-C, a node lost) leaves its container
    # behind under the cell's name, which the same cell takes over when it runs again.
    command = ["podman", "run", "--rm", "--replace", "--name", container_name(cell.name),
               "--network", "none", "--cap-drop", "all", "--security-opt", "no-new-privileges",
               "--read-only", "--tmpfs", "/tmp:%s" % sandbox.TMP_TMPFS,
               # No --init: Podman's needs catatonit, which many nodes lack; bench as PID 1
               # is stopped by Podman's SIGKILL after its timeout when a job is cancelled.
               "--pids-limit", str(sandbox.PIDS_LIMIT),
               "--shm-size", sandbox.SHM_SIZE, "--log-driver", "none"]
    if cell.user:
        command += ["--user", cell.user]
    for name, value in sorted(cell.environment.items()):
        command += ["--env", "%s=%s" % (name, value)]
    for bind in cell.binds:
        command += ["--mount", "type=bind,source=%s,target=%s%s"
                    % (bind.source, bind.target, ",ro=true" if bind.read_only else "")]
    if cell.cpus is not None:
        command += ["--cpus", "%g" % cell.cpus]
    if cell.cpuset is not None:
        command += ["--cpuset-cpus", cell.cpuset]
    if cell.memory_bytes is not None:
        command += ["--memory", str(cell.memory_bytes),
                    "--memory-swap", str(cell.memory_bytes + cell.swap_bytes)]
    if cell.gpus:
        command.append(GPU_DEVICES)
    return command + ["--workdir", WORKDIR, "--entrypoint", ENTRY[0], cell.image,
                      *ENTRY[1:], *cell.args]


def apptainer(cell: Launch) -> list[str]:
    command = ["apptainer", "exec", "--containall", "--cleanenv", "--no-home",
               "--writable-tmpfs", "--pwd", WORKDIR]
    if cell.gpus:
        command.append("--nv")
    for name, value in sorted(cell.environment.items()):
        command += ["--env", "%s=%s" % (name, value)]
    for bind in cell.binds:
        command += ["--bind", "%s:%s:%s" % (bind.source, bind.target,
                                            "ro" if bind.read_only else "rw")]
    return command + [cell.image, *ENTRY, *cell.args]


def pyxis(cell: Launch) -> list[str]:
    """The options srun takes for this cell (Pyxis's), and the command it runs inside."""
    mounts = ["%s:%s:%s" % (b.source, b.target, "ro" if b.read_only else "rw")
              for b in cell.binds]
    command = ["--container-image=%s" % cell.image,
               "--container-mounts=%s" % ",".join(mounts),
               "--no-container-mount-home", "--container-workdir=%s" % WORKDIR,
               "--no-container-remap-root"]
    environment = ["%s=%s" % item for item in sorted(cell.environment.items())]
    return command + ["env", *environment, *ENTRY, *cell.args]


BUILDERS = {"podman": podman, "apptainer": apptainer, "pyxis": pyxis}


def shell_words(words: list[str]) -> str:
    """The words as the job's bash reads them: each quoted, but for the job's own expansion
    of its GPU devices, which must expand there."""
    out = []
    for word in words:
        if word == GPU_DEVICES:
            out.append('"%s"' % word)
        else:
            out.append(shlex.quote(word))
    return " ".join(out)
