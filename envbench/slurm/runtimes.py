"""A cell's container spec (envbench.engine.spec, made by envbench.cells.cellspec as for a
Docker cell) as the command line of each runtime a Slurm node may have: the same mounts
(results writable; data, the user's code and inputs read-only, their copies in shared_dir),
the same environment, workdir and entrypoint, and as locked down as the runtime allows.

- Podman (run in CI on a real cluster): the Docker cell's lockdown flag for flag; GPUs by CDI,
  the ones Slurm gave the step.
- Apptainer: --containall --cleanenv --no-home --writable-tmpfs; its network and process
  limits are the site's, and the step's CPUs and memory are Slurm's (srun).
- Enroot through Pyxis: srun's own --container-* options; the rest as Apptainer.
"""
from __future__ import annotations

import shlex

from envbench.engine.spec import Bind, ContainerSpec

# Expanded by the job's shell at each step: one CDI device per GPU Slurm gave the job.
GPU_DEVICES = "${ENVBENCH_GPU_DEVICES[@]}"
# ... and where a step's nodes meet: the job's first node's address, a port of the step's.
RENDEZVOUS = "${ENVBENCH_RENDEZVOUS}"
EXPANDED = (GPU_DEVICES, RENDEZVOUS)


def container_name(stem: str) -> str:
    return "envbench-%s" % stem[:200]


def _mount(bind: Bind) -> str:
    """source:target:ro|rw, as Apptainer's --bind and Pyxis's --container-mounts take it."""
    return "%s:%s:%s" % (bind.source, bind.target, "ro" if bind.read_only else "rw")


def _no_scratch(spec: ContainerSpec, runtime: str) -> None:
    # Apptainer and Enroot mount no tmpfs over one path; Slurm's copy of a workload has no
    # __pycache__ to hide (slurm/staging.py copies it without them), so none is asked for.
    if spec.scratch:
        raise ValueError("%s cannot hide %s" % (runtime, ", ".join(s.target for s in
                                                                  spec.scratch)))


def podman(spec: ContainerSpec) -> list[str]:
    lock = spec.lockdown
    # --replace: a step killed with its job (Ctrl-C, a node lost) leaves its container
    # behind under the cell's name, which the same cell takes over when it runs again.
    command = ["podman", "run", "--rm", "--replace", "--name", container_name(spec.name),
               "--network", lock.network, "--cap-drop", lock.cap_drop.lower()]
    if lock.no_new_privileges:
        command += ["--security-opt", "no-new-privileges"]
    if lock.read_only_root:
        command.append("--read-only")
    # No --init: Podman's needs catatonit, which many nodes lack; bench as PID 1 is stopped
    # by Podman's SIGKILL after its timeout when a job is cancelled.
    command += ["--tmpfs", "/tmp:%s" % lock.tmp, "--pids-limit", str(lock.pids_limit),
                "--shm-size", lock.shm_size, "--log-driver", "none"]
    if spec.user:
        command += ["--user", spec.user]
    for name, value in sorted(spec.environment.items()):
        command += ["--env", "%s=%s" % (name, value)]
    for bind in spec.binds:
        command += ["--mount", "type=bind,source=%s,target=%s%s"
                    % (bind.source, bind.target, ",ro=true" if bind.read_only else "")]
    for scratch in spec.scratch:
        command += ["--mount", "type=tmpfs,target=%s,tmpfs-size=%d"
                    % (scratch.target, scratch.size_bytes)]
    if spec.cpus is not None:
        command += ["--cpus", "%g" % spec.cpus]
    if spec.cpuset is not None:
        command += ["--cpuset-cpus", spec.cpuset]
    if spec.memory_bytes is not None:
        command += ["--memory", str(spec.memory_bytes),
                    "--memory-swap", str(spec.memory_bytes + spec.swap_bytes)]
    if spec.gpus:
        command.append(GPU_DEVICES)
    return command + ["--workdir", spec.workdir, "--entrypoint", spec.entrypoint[0],
                      spec.image, *spec.entrypoint[1:], *spec.args]


def podman_per_node(command: list[str]) -> list[str]:
    """Podman's command for a step across nodes: each node's container named for its node
    (srun sets SLURM_NODEID per task), so that two "nodes" sharing a host (a test cluster's
    two slurmd) do not --replace each other's container."""
    at = command.index("--name")
    name, rest = command[at + 1], command[2:at] + command[at + 2:]
    return ["bash", "-c", 'exec podman run --name "$0-${SLURM_NODEID:-0}" "$@"', name, *rest]


def apptainer(spec: ContainerSpec) -> list[str]:
    _no_scratch(spec, "apptainer")
    # --containall: its own /tmp, /dev, IPC and PID namespaces and no host home; --cleanenv:
    # only the spec's variables. The image is read-only; --writable-tmpfs gives /tmp room.
    command = ["apptainer", "exec", "--containall", "--cleanenv", "--no-home",
               "--writable-tmpfs", "--pwd", spec.workdir]
    if spec.gpus:
        command.append("--nv")
    for name, value in sorted(spec.environment.items()):
        command += ["--env", "%s=%s" % (name, value)]
    for bind in spec.binds:
        command += ["--bind", _mount(bind)]
    return command + [spec.image, *spec.entrypoint, *spec.args]


def pyxis(spec: ContainerSpec) -> list[str]:
    """The options srun takes for this cell (Pyxis's), and the command it runs inside."""
    _no_scratch(spec, "pyxis")
    command = ["--container-image=%s" % spec.image,
               "--container-mounts=%s" % ",".join(_mount(b) for b in spec.binds),
               "--no-container-mount-home", "--container-workdir=%s" % spec.workdir,
               "--no-container-remap-root"]
    environment = ["%s=%s" % item for item in sorted(spec.environment.items())]
    return command + ["env", *environment, *spec.entrypoint, *spec.args]


BUILDERS = {"podman": podman, "apptainer": apptainer, "pyxis": pyxis}

# The lock-down properties (engine.spec.Lockdown's fields) a runtime's command line cannot
# carry, and what holds instead; tests/host/test_container_spec.py holds every renderer to
# this list, and docs/hpc.md says it to users.
_SITE = "the site's (its install and its Slurm cgroups decide)"
LEFT_OUT = {
    "podman": {"init": "no --init: Podman's needs catatonit, which many nodes lack"},
    "apptainer": {
        "network": "the node's network: --network needs a privileged or setuid install",
        "cap_drop": _SITE, "no_new_privileges": _SITE,
        "read_only_root": "the image is read-only; --writable-tmpfs lays a small tmpfs over it",
        "tmp": "--containall gives the cell an empty /tmp of its own, without these options",
        "pids_limit": _SITE, "shm_size": "the node's /dev/shm", "init": _SITE},
    "pyxis": {
        "network": "the node's network: Enroot shares it", "cap_drop": _SITE,
        "no_new_privileges": _SITE, "read_only_root": _SITE, "tmp": _SITE,
        "pids_limit": _SITE, "shm_size": "the node's /dev/shm", "init": _SITE},
}


def shell_words(words: list[str]) -> str:
    """The words as the job's bash reads them: each quoted, but for the job's own expansion
    of its GPU devices, which must expand there."""
    out = []
    for word in words:
        if word in EXPANDED:
            out.append('"%s"' % word)
        else:
            out.append(shlex.quote(word))
    return " ".join(out)
