"""One host cache of wheels, addressed by sha256: filled once, verified on arrival, shared.

A wheel lives at CACHE/wheels/<sha256>/<file name>; every image that locks it reads that one
file into its build context, so two environments never hold two copies. Filling is safe
when runs overlap: a wheel is written under a temporary name and renamed once its hash is
right. A wheel from a wheelhouse is hard-linked where the file system allows, else copied.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TextIO

from envbench import cache, download, users
from envbench.errors import UserError
from envbench.images.lock import Lock, Wheel

BLOCK = 1 << 20


def path_for(wheel: Wheel, root: Path | None = None) -> Path:
    """CACHE/wheels/<sha256>/<file name>; both parts were checked when the lock was read,
    and the result is checked again to lie in the cache (a second line of defence)."""
    folder = (root or cache.root()) / "wheels"
    path = folder / wheel.sha256 / wheel.filename
    if os.path.normpath(path).rsplit(os.sep, 2)[0] != os.path.normpath(folder):
        raise UserError("%s: %s would lie outside the wheel cache: refused" % (
            wheel.package, wheel.filename))
    return path


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def _arrive(wheel: Wheel, source: Path | None, root: Path, out: TextIO) -> Path:
    final = path_for(wheel, root)
    users.cache_dirs(final.parent)
    fd, name = tempfile.mkstemp(prefix=".part-", dir=final.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        if source is not None:
            tmp.unlink()
            try:
                os.link(source, tmp)
            except OSError:
                shutil.copyfile(source, tmp)
        elif wheel.url:
            download.fetch(wheel.url, tmp, out, wheel.filename[:60], timeout=120,
                           max_bytes=wheel.size)
        got = sha256_of(tmp)
        if got != wheel.sha256:
            raise UserError("%s: sha256 %s, but the lock says %s: the file is corrupt or not "
                            "the one locked; nothing was kept" % (wheel.filename, got,
                                                                   wheel.sha256))
        os.replace(tmp, final)
        users.own_like_folder(final)
    finally:
        if tmp.exists():
            tmp.unlink()
    return final


def ensure(lock: Lock, wheelhouse: Path | None, out: TextIO = sys.stdout,
           root: Path | None = None) -> list[Path]:
    """Every wheel of the lock in the cache, fetched where missing; their cache paths."""
    root = root or cache.root()
    paths = []
    missing = [w for w in lock.wheels if not path_for(w, root).is_file()]
    if missing:
        total = sum(w.size or 0 for w in missing)
        print("%s: fetching %d wheel(s)%s into %s" % (
            lock.environment, len(missing), " (%.1f MB)" % (total / 1e6) if total else "",
            root / "wheels"), file=out, flush=True)
    for wheel in lock.wheels:
        path = path_for(wheel, root)
        if not path.is_file():
            source = None
            if wheel.url is None:
                source = (wheelhouse / wheel.filename) if wheelhouse else None
                if source is None or not source.is_file():
                    raise UserError("%s: %s is locked from a wheelhouse but not in %s"
                                    % (lock.environment, wheel.filename, wheelhouse))
                if wheelhouse is not None and \
                        not source.resolve().is_relative_to(wheelhouse.resolve()):
                    raise UserError("%s: %s in the wheelhouse is a link to %s, outside it: "
                                    "refused" % (lock.environment, wheel.filename,
                                                 source.resolve()))
            path = _arrive(wheel, source, root, out)
        paths.append(path)
    return paths
