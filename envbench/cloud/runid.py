"""Which fan-out a cluster belongs to, so that a run never touches another's VMs and the next
run sweeps those of a run that died.

Every cluster name carries this machine's tag and the run's id:
``envbench-<machine>-<run>-<target>``. A run holds an exclusive ``flock`` on
``<cache>/cloud-runs/<run>.lock`` for as long as it lives (the kernel drops it however the
process dies). At its start, a run takes down the clusters of this machine whose run no longer
holds its lock: a kit killed before its teardown (kill -9, a closed laptop) leaves VMs that
only autostop would have stopped. A concurrent run's clusters, and other machines', are left
alone.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import re
import secrets
import socket
from pathlib import Path

from envbench import cache, users

PREFIX = "envbench-"
MACHINE_CHARS = 4
RUN_CHARS = 6
_NAME = re.compile(r"envbench-([0-9a-f]{%d})-([0-9a-f]{%d})-" % (MACHINE_CHARS, RUN_CHARS))


def machine_tag() -> str:
    """This machine and user, in four hex digits (a cluster name has 60 characters to spare)."""
    try:
        machine = Path("/etc/machine-id").read_text().strip()
    except OSError:
        machine = ""
    seed = "%s|%s|%d" % (machine, socket.gethostname(), os.getuid())
    return hashlib.sha256(seed.encode()).hexdigest()[:MACHINE_CHARS]


def claims_dir() -> Path:
    return cache.root() / "cloud-runs"


def owner(cluster: str) -> tuple[str, str] | None:
    """(machine tag, run id) of a cluster this kit named, else None (not the kit's)."""
    found = _NAME.match(cluster)
    return (found.group(1), found.group(2)) if found else None


class RunClaim:
    """This run's id, held (its lock file locked) from creation until release()."""

    def __init__(self, run: str | None = None) -> None:
        self.run = run or secrets.token_hex(RUN_CHARS // 2)
        folder = claims_dir()
        users.cache_dirs(folder)
        self.path = folder / ("%s.lock" % self.run)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # ids are random: never held twice
        except OSError:
            os.close(fd)
            raise
        self._fd: int | None = fd
        users.own_like_folder(self.path)

    @property
    def prefix(self) -> str:
        """What every cluster name of this run starts with."""
        return "%s%s-%s-" % (PREFIX, machine_tag(), self.run)

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            self.path.unlink()
        except OSError:
            pass
        os.close(self._fd)
        self._fd = None


def is_live(run: str) -> bool:
    """Whether the run of that id still holds its lock on this machine."""
    path = claims_dir() / ("%s.lock" % run)
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False  # no claim: the run ended (its lock file goes with it) or never was
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def leftovers(clusters: list[str], current: RunClaim) -> list[str]:
    """Clusters this machine's earlier runs left: named by the kit, with this machine's tag,
    of a run other than ``current`` that no longer holds its lock."""
    mine = machine_tag()
    found = []
    for name in clusters:
        parts = owner(name)
        if parts and parts[0] == mine and parts[1] != current.run and not is_live(parts[1]):
            found.append(name)
    return found
