"""A real Slurm cluster on this machine, from Debian's slurm-wlm and munge, for the tests of
the Slurm path: munged with a key of its own, slurmctld and two slurmd as root. Each slurmd
is a node as `slurmd -C` describes this machine (`slurmd -N NAME`, each with its own port,
spool folder and log): the partition `envbench` holds the first, `envbench2` both, for the
runs across nodes. Started once, left running; a second call finds it up. Accounting has no
database here (no slurmdbd): jobs are followed with squeue and scontrol, as they are on a
cluster whose sacct is closed to users.
"""
from __future__ import annotations

import functools
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

PARTITION = "envbench"
TWO_NODES = "envbench2"
SECOND_PORT = 6819  # the first slurmd listens on Slurm's default, 6818
CONF = Path("/etc/slurm/slurm.conf")
KEY = Path("/etc/munge/munge.key")
DAEMONS = ("munged", "slurmctld", "slurmd")


def missing() -> str | None:
    """Why no cluster can be started here (None: it can)."""
    absent = [name for name in (*DAEMONS, "sinfo", "sbatch", "podman")
              if shutil.which(name) is None]
    if absent:
        return ("%s not installed (Debian: apt-get install slurm-wlm munge podman; .ci/run "
                "does it)" % ", ".join(absent))
    if os.geteuid() != 0:
        return "a one-node cluster is started as root, and this is uid %d" % os.geteuid()
    return None


def _running(name: str) -> bool:
    return subprocess.run(["pgrep", "-x", name], capture_output=True).returncode == 0


def _slurmd_running(node: str) -> bool:
    return subprocess.run(["pgrep", "-f", "^slurmd -N %s$" % node],
                          capture_output=True).returncode == 0


@functools.lru_cache(maxsize=1)
def _node_line() -> str:
    """This machine as slurmd sees it, less what changes (UpTime)."""
    described = subprocess.run(["slurmd", "-C"], capture_output=True, text=True,
                               timeout=60, check=True).stdout.splitlines()[0]
    return " ".join(f for f in described.split() if not f.startswith("UpTime="))


def _config() -> str:
    host = socket.gethostname()
    return "\n".join([
        "ClusterName=envbench-ci",
        "SlurmctldHost=%s(127.0.0.1)" % host,
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        "StateSaveLocation=/var/spool/slurmctld",
        # %n: the node's name, so that the two slurmd keep apart
        "SlurmdSpoolDir=/var/spool/slurmd/%n",
        "SlurmctldPidFile=/run/slurmctld.pid",
        "SlurmdPidFile=/run/slurmd-%n.pid",
        "SlurmctldLogFile=/var/log/slurm/slurmctld.log",
        "SlurmdLogFile=/var/log/slurm/slurmd-%n.log",
        "AccountingStorageType=accounting_storage/none",
        "JobAcctGatherType=jobacct_gather/none",
        "MpiDefault=none",
        "ReturnToService=2",
        # Finished jobs stay visible to scontrol for ten minutes (no accounting database).
        "MinJobAge=600",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=30",
        "%s NodeHostname=%s Port=6818 State=UNKNOWN" % (_node_line(), host),
        "%s NodeHostname=%s Port=%d State=UNKNOWN" % (
            _node_line().replace("NodeName=%s " % node_name(), "NodeName=%s " %
                                 second_node_name(), 1), host, SECOND_PORT),
        "PartitionName=%s Nodes=%s Default=YES MaxTime=INFINITE State=UP"
        % (PARTITION, node_name()),
        "PartitionName=%s Nodes=%s,%s MaxTime=INFINITE State=UP"
        % (TWO_NODES, node_name(), second_node_name()),
        ""])


CONTAINERS_CONF = Path("/etc/containers/containers.conf")


def ensure_podman_limits() -> None:
    """On this kind of machine Podman's default open-files and process limits are above the
    hard ones and every container fails ("error setting rlimit type 7"): no default ulimits
    (docs/hpc.md says so to a user who meets it)."""
    text = CONTAINERS_CONF.read_text() if CONTAINERS_CONF.exists() else ""
    if "default_ulimits" in text:
        return
    CONTAINERS_CONF.parent.mkdir(parents=True, exist_ok=True)
    if "[containers]" in text:
        text = text.replace("[containers]", "[containers]\ndefault_ulimits = []", 1)
    else:
        text += "\n[containers]\ndefault_ulimits = []\n"
    CONTAINERS_CONF.write_text(text)


def ensure_cluster(timeout_s: float = 60.0) -> str:
    """Start the cluster unless it answers as configured; return its first partition."""
    config = _config()
    if _answers() and _answers(TWO_NODES) and CONF.exists() and CONF.read_text() == config:
        return PARTITION
    if CONF.exists() and CONF.read_text() != config:  # an earlier layout: start again
        for daemon in ("slurmctld", "slurmd"):
            subprocess.run(["pkill", "-x", daemon], capture_output=True)
        deadline = time.monotonic() + 30
        while (_running("slurmctld") or _running("slurmd")) and time.monotonic() < deadline:
            time.sleep(0.5)
    for folder in ("/var/spool/slurmctld", "/var/log/slurm", "/run/munge",
                   "/var/spool/slurmd/%s" % node_name(),
                   "/var/spool/slurmd/%s" % second_node_name()):
        Path(folder).mkdir(parents=True, exist_ok=True)
    shutil.chown("/run/munge", "munge", "munge")
    if not KEY.exists() or KEY.stat().st_size < 32:
        KEY.write_bytes(os.urandom(1024))
    shutil.chown(KEY, "munge", "munge")
    KEY.chmod(0o400)
    CONF.parent.mkdir(parents=True, exist_ok=True)
    CONF.write_text(config)
    if not _running("munged"):
        subprocess.run(["runuser", "-u", "munge", "--", "munged"], check=True, timeout=30)
    if not _running("slurmctld"):
        subprocess.run(["slurmctld"], check=True, timeout=60)
    for node in (node_name(), second_node_name()):
        if not _slurmd_running(node):
            subprocess.run(["slurmd", "-N", node], check=True, timeout=60)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if _answers() and _answers(TWO_NODES):
            return PARTITION
        time.sleep(1)
    raise RuntimeError("the one-node cluster did not come up in %.0f s: %s" % (
        timeout_s, _log_tail()))


def _answers(partition: str = PARTITION) -> bool:
    """The partition's nodes are idle or allocated: jobs can run."""
    try:
        proc = subprocess.run(["sinfo", "--noheader", "--partition", partition, "-o", "%t"],
                              capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    states = proc.stdout.split()
    return proc.returncode == 0 and bool(states) and all(
        s.rstrip("*") in ("idle", "alloc", "mix", "comp") for s in states)


def _log_tail() -> str:
    lines = []
    for log in ("/var/log/slurm/slurmctld.log",
                "/var/log/slurm/slurmd-%s.log" % node_name(),
                "/var/log/slurm/slurmd-%s.log" % second_node_name()):
        try:
            lines += Path(log).read_text(errors="replace").splitlines()[-5:]
        except OSError:
            pass
    return " | ".join(lines)


def node_name() -> str:
    return _node_line().split()[0].split("=", 1)[1]


def second_node_name() -> str:
    """The second slurmd's node: this machine again, under another name and port."""
    return "%s-2" % node_name()


def set_node_state(state: str, reason: str = "envbench test") -> None:
    """DOWN (a node failure as a job sees it) or RESUME (refused, and harmless, where the
    node has already returned to service by itself: ReturnToService=2)."""
    command = ["scontrol", "update", "NodeName=%s" % node_name(), "State=%s" % state]
    if state.upper() in ("DOWN", "DRAIN"):
        command.append("Reason=%s" % reason)
    subprocess.run(command, check=state.upper() != "RESUME", capture_output=True, timeout=30)


def jobs() -> list[str]:
    """The ids of the jobs the controller has queued or running."""
    out = subprocess.run(["squeue", "--noheader", "--format", "%i"], capture_output=True,
                         text=True, timeout=30, check=True).stdout
    return out.split()


def wait_idle(timeout_s: float = 60.0) -> None:
    """Until the node takes jobs again (after a test set it DOWN)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if _answers():
            return
        set_node_state("RESUME")
        time.sleep(1)
    raise RuntimeError("the node did not return to service: %s" % _log_tail())
