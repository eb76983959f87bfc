"""CIFAR-10 on the host: downloaded once into a cache, md5-checked, unpacked for the containers."""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any, TextIO

from bench.rules import CIFAR_FOLDER
from envbench import cache, download, files, users
from envbench.results.identity import SYNTHETIC, DataIdentity
from envbench.user_errors import UserError

URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
MD5 = "c58f30108f718f92721af3b95e74349a"
FOLDER = CIFAR_FOLDER  # what the archive unpacks to, where bench reads it
FILES = ["data_batch_%d" % i for i in range(1, 6)] + ["test_batch", "batches.meta"]


def default_cache() -> Path:
    return Path(os.environ.get("ENVBENCH_DATA") or cache.root() / "cifar10")


def is_ready(root: Path) -> bool:
    return all((root / FOLDER / name).is_file() for name in FILES)


# The largest file of each kind: CIFAR-10's archive is 170,498,071 bytes, a batch 31 MB.
MAX_ARCHIVE_BYTES = 200 * 10**6
MAX_BATCH_BYTES = 64 * 10**6


def _hash_regular(path: Path, cap: int, algorithm: Any) -> str:
    """``algorithm``'s digest of a regular file of at most ``cap`` bytes, opened without
    following a link (a link to /dev/zero, or a planted sparse terabyte, is refused, never
    hashed for ever); UserError naming the file and what to do otherwise."""
    try:
        with files.regular(path, cap) as stream:
            for block in iter(lambda: stream.read(1 << 20), b""):
                algorithm.update(block)
    except files.Unreadable as exc:
        raise UserError("%s is %s: it is not CIFAR-10's; remove it and run `./noxw -s data` "
                        "again" % (path, exc))
    return str(algorithm.hexdigest())


def digest(root: Path) -> str:
    """sha256 of the data set's files (names and bytes): which data a result was measured on."""
    sha = hashlib.sha256()
    for name in FILES:
        sha.update(name.encode() + b"\0")
        _hash_regular(root / FOLDER / name, MAX_BATCH_BYTES, sha)
    return sha.hexdigest()


def identity_of(root: Path | None) -> DataIdentity:
    """Which data cells measure on: synthetic (no folder), or this data set by its digest."""
    return SYNTHETIC if root is None else DataIdentity("cifar10", digest(root))


def md5sum(path: Path) -> str:
    # The data set publishes an md5, not a security check.
    return _hash_regular(path, MAX_ARCHIVE_BYTES, hashlib.md5())  # noqa: S324


def fetch(root: Path | None = None, url: str = URL, md5: str = MD5,
          out: TextIO = sys.stdout, timeout: float = 60) -> Path:
    """Make ROOT/cifar-10-batches-py/ exist and be whole; return ROOT."""
    root = root or default_cache()
    if is_ready(root):
        print("CIFAR-10 is in %s" % root, file=out)
        return root
    users.cache_dirs(root)
    # One download at a time into a folder: a second run waits, then finds it ready.
    # Never through a link: in a shared cache, a link planted as .fetch.lock would have the
    # kit (maybe root) create a file at its target.
    lock_path = root / ".fetch.lock"
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise UserError("%s cannot be opened as the download's lock (%s%s): remove it and run "
                        "again" % (lock_path, exc.strerror, ", a symbolic link"
                                   if lock_path.is_symlink() else ""))
    with os.fdopen(fd, "r+") as lock:
        users.own_like_folder(lock_path)
        fcntl.flock(lock, fcntl.LOCK_EX)
        if is_ready(root):
            print("CIFAR-10 is in %s" % root, file=out)
            return root
        return _fetch_holding_the_lock(root, url, md5, out, timeout)


def _fetch_holding_the_lock(root: Path, url: str, md5: str, out: TextIO,
                            timeout: float) -> Path:
    archive = root / "cifar-10-python.tar.gz"
    if not (archive.exists() or archive.is_symlink()) or md5sum(archive) != md5:
        print("downloading %s" % url, file=out, flush=True)
        partial = Path(tempfile.mkstemp(dir=root, suffix=".part")[1])
        try:
            try:
                download.fetch(url, partial, out, "cifar-10-python.tar.gz", timeout)
            except UserError as exc:
                raise UserError("%s. Offline: put cifar-10-python.tar.gz (md5 %s) at %s and run "
                                "again, or use --synthetic" % (exc, md5, archive))
            got = md5sum(partial)
            if got != md5:
                raise UserError("%s: md5 %s, expected %s: the download is corrupt or not "
                                "CIFAR-10; nothing was kept" % (url, got, md5))
            partial.replace(archive)
            users.own_like_folder(archive)
        finally:
            partial.unlink(missing_ok=True)
    unpack(archive, root)
    print("CIFAR-10 is in %s" % root, file=out)
    return root


def unpack(archive: Path, root: Path) -> None:
    staging = Path(tempfile.mkdtemp(dir=root, prefix=".unpack-"))
    try:
        with tarfile.open(archive) as tar:
            members = [m for m in tar.getmembers()
                       if m.isfile() and m.name.startswith(FOLDER + "/") and ".." not in m.name]
            tar.extractall(staging, members=members)  # noqa: S202 - members filtered above
        if not is_ready(staging):
            raise UserError("%s does not hold %s/ with %s" % (archive, FOLDER, ", ".join(FILES)))
        shutil.rmtree(root / FOLDER, ignore_errors=True)
        (staging / FOLDER).replace(root / FOLDER)
        users.own_like_folder(root / FOLDER, tree=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
