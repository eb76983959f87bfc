"""Before a Slurm target's job is submitted: one line per check, ✔ or ✘ with what to do, and
nothing submitted while any says ✘.

The checks that only a compute node can answer (the shared folder seen from there, the
runtime installed there, its GPUs) run as one small probe job on the target's partition.
"""
from __future__ import annotations

import secrets
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from envbench.cells import gpufit
from envbench.cells.gpufit import GpuBlock
from envbench.engine.gpu import GpuInfo, GpuState
from envbench.images import archs
from envbench.matrix.models import Environment, Slurm
from envbench.slurm import cluster

PROBE_WAIT_S = 300  # how long the probe may wait for a node before the check says so
VERSION = {"podman": "podman --version", "apptainer": "apptainer --version",
           "pyxis": "enroot version"}


@dataclass
class Checks:
    target: str
    lines: list[tuple[bool, str]] = field(default_factory=list)
    partition: cluster.Partition | None = None
    gpu: GpuState | None = None  # the probe node's first GPU (GPU targets)

    def add(self, ok: bool, text: str) -> bool:
        self.lines.append((ok, text))
        return ok

    @property
    def passed(self) -> bool:
        return all(ok for ok, _ in self.lines)

    def show(self, out: TextIO) -> None:
        for ok, text in self.lines:
            print("  %s %s" % ("✔" if ok else "✘", text), file=out, flush=True)


def run(target: str, block: Slurm, out: TextIO, probe: bool = True) -> Checks:
    """Every check of one target, shown as it is made."""
    checks = Checks(target)
    print("preflight of %s (partition %s, runtime %s):" % (target, block.partition,
                                                          block.runtime), file=out)
    missing = cluster.available()
    if not checks.add(missing is None, missing or "Slurm's client commands are here"):
        checks.show(out)
        return checks
    try:
        found = cluster.partitions()
    except cluster.SlurmError as exc:
        checks.add(False, "sinfo: %s" % exc)
        checks.show(out)
        return checks
    checks.add(True, "sinfo answers (%d partition%s)" % (len(found),
                                                          "" if len(found) == 1 else "s"))
    part = found.get(block.partition)
    if part is None:
        checks.add(False, "partition %s does not exist here; the partitions are: %s (set "
                          "slurm: partition)" % (block.partition, ", ".join(sorted(found))))
        checks.show(out)
        return checks
    checks.partition = part
    if not checks.add(part.state == "up", "partition %s is %s" % (part.name, part.state)
                      + ("" if part.state == "up" else ": no job starts there; ask the "
                         "admins, or name another partition")):
        checks.show(out)
        return checks
    if not _nodes_open(checks, block):
        checks.show(out)
        return checks
    wanted = block.gpu_count
    if wanted:
        kind = None
        if block.gres and block.gres.count(":") == 2:
            kind = block.gres.split(":")[1]
        has = cluster.gres_gpus(part.gres, kind)
        checks.add(has >= wanted, "partition %s offers %d %sGPU(s) a node; the target asks "
                                  "for %d%s" % (part.name, has, (kind + " ") if kind else "",
                                                wanted, "" if has >= wanted else
                                                ": lower gpus/gres or name another "
                                                "partition"))
    shared = Path(block.shared_dir)
    token = secrets.token_hex(8)
    marker = shared / (".envbench-probe-%s" % token)
    try:
        shared.mkdir(parents=True, exist_ok=True)
        marker.write_text(token)
        checks.add(True, "shared_dir %s is writable here" % shared)
    except OSError as exc:
        checks.add(False, "shared_dir %s is not writable here (%s): name a folder on the "
                          "cluster's shared file system that you may write"
                          % (shared, exc.strerror or exc))
        checks.show(out)
        return checks
    try:
        if probe:
            _probe_node(checks, block, marker, token)
    finally:
        marker.unlink(missing_ok=True)
    checks.show(out)
    return checks


def _nodes_open(checks: Checks, block: Slurm) -> bool:
    """Whether any node of the partition (of the block's nodelist) can start a job: one
    that is down or drained would keep the probe, and the job, waiting for the probe's whole
    wait. Slurm's own words for each closed node, with the admin's reason."""
    try:
        nodes = cluster.node_states(block.partition, block.nodelist)
    except cluster.SlurmError as exc:
        return checks.add(False, "sinfo could not list the nodes of %s: %s"
                          % (block.partition, exc))
    where = "partition %s%s" % (block.partition, " (nodelist %s)" % block.nodelist
                                if block.nodelist else "")
    if not nodes:
        return checks.add(False, "%s has no node: name another partition, or check "
                                 "nodelist" % where)
    open_nodes = [node for node in nodes if node.open]
    closed = [node.describe() for node in nodes if not node.open]
    if not open_nodes:
        return checks.add(False, "no node of %s can start a job: %s; ask the admins to "
                                 "resume one, or name another partition"
                          % (where, "; ".join(closed[:8]) + (" …" if len(closed) > 8 else "")))
    if len(open_nodes) < block.nodes:
        # The job would wait in the queue for nodes that cannot start it (or never exist).
        return checks.add(False, "slurm.nodes: %d, and %s has %d node(s) that can start a "
                                 "job%s: fewer nodes, or another partition"
                          % (block.nodes, where, len(open_nodes),
                             " (%s)" % "; ".join(closed[:4]) if closed else ""))
    return checks.add(True, "%d of %d node(s) of %s can start a job%s"
                      % (len(open_nodes), len(nodes), where,
                         " (%s)" % "; ".join(closed[:4]) if closed else ""))


def probe_command(block: Slurm, marker: Path) -> list[str]:
    """The probe job: one task on the partition, reading the marker and the runtime's
    version there (and the driver, where the target has GPUs)."""
    script = "cat %s; echo; echo node=$SLURMD_NODENAME; echo runtime=$(%s 2>&1 | head -1)" % (
        shlex.quote(str(marker)), VERSION[block.runtime])
    if block.gpu_count:
        script += ("; echo gpu=$(nvidia-smi --query-gpu=name,driver_version,compute_cap,"
                   "memory.total --format=csv,noheader 2>&1 | head -1)")
    command = ["srun", "--partition", block.partition, "--nodes", "1", "--ntasks", "1",
               "--time", "5", "--job-name", "envbench-preflight",
               "--immediate=%d" % PROBE_WAIT_S]
    for option, value in (("account", block.account), ("qos", block.qos),
                          ("constraint", block.constraint), ("nodelist", block.nodelist)):
        if value is not None:
            command += ["--%s" % option, value]
    if block.gpus is not None:
        command += ["--gpus", "1"]
    elif block.gres is not None:
        command += ["--gres", block.gres.rsplit(":", 1)[0] + ":1"
                    if block.gres.rsplit(":", 1)[-1].isdigit() else block.gres]
    return command + ["bash", "-c", script]


def _probe_node(checks: Checks, block: Slurm, marker: Path, token: str) -> None:
    try:
        proc = cluster.run(probe_command(block, marker), timeout_s=PROBE_WAIT_S + 60,
                           check=False)
    except cluster.SlurmError as exc:
        checks.add(False, "the probe job on %s: %s" % (block.partition, exc))
        return
    lines = proc.stdout.splitlines()
    report = dict(line.split("=", 1) for line in lines[1:] if "=" in line)
    if proc.returncode != 0 and not lines:
        said = " ".join(proc.stderr.split())[:300]
        checks.add(False, "the probe job on %s did not run: %s" % (block.partition, said))
        return
    node = report.get("node", "a node")
    checks.add(bool(lines) and lines[0].strip() == token,
               "shared_dir is seen from %s" % node if lines and lines[0].strip() == token
               else "shared_dir %s is not seen from %s (the marker written here is not "
                    "there): name a folder every node mounts" % (block.shared_dir, node))
    version = report.get("runtime", "")
    ok = bool(version) and "not found" not in version and "No such file" not in version
    checks.add(ok, "%s on %s: %s" % (block.runtime, node, version) if ok else
               "%s is not on %s (%s): ask the admins for it, or name another runtime"
               % (block.runtime, node, version or "no output"))
    if block.gpu_count:
        said = report.get("gpu", "")
        checks.gpu = node_gpu(said)
        checks.add(checks.gpu is not None,
                   "GPU on %s: %s" % (node, said) if checks.gpu is not None else
                   "nvidia-smi on %s said: %s" % (node, said or "nothing"))


def node_gpu(line: str) -> GpuState | None:
    """The node's first GPU from the probe's nvidia-smi line ("NVIDIA H100 80GB HBM3,
    550.54.15, 9.0, 81559 MiB"), as the host path's gates read a GPU; None if unreadable."""
    parts = [p.strip() for p in line.split(",")]
    if len(parts) != 4 or not parts[1] or not parts[1][0].isdigit():
        return None
    major, _, minor = parts[2].partition(".")
    capability = (int(major), int(minor)) if major.isdigit() and minor.isdigit() else None
    return GpuState(runtime=True, gpus=(GpuInfo(parts[0], parts[1], parts[3], capability),))


def stack_blocks(environments: dict[str, Environment], state: GpuState
                 ) -> dict[str, GpuBlock]:
    """The stacks whose GPU cells cannot run on the node, each with the host path's sentence
    (kernels against the GPU's capability, the driver against the stack's CUDA)."""
    out = {}
    for name, env in environments.items():
        reason = gpufit.block(name, env, state, archs.known(env.torch, env.cuda))
        if reason is not None:
            out[name] = reason
    return out
