"""A user's workload's read-only inputs (pretrained weights, a data set of one's own) as this
machine sees them: each found, checked and named by a content digest, once per run.

An input is a file or a folder of any size. Its digest is the sha256 of each file's name
(relative, '/'-separated) and the sha256 of its bytes, in name order; it goes into every
cell's identity (the bench option --input-sha256), so a changed weight file is a new
measurement and its cells run again. Reading tens of GB on every run would cost minutes:
each file's sha256 is kept in the kit's cache under its device, inode, size, modification
and change times, and taken from there while none of them moved (a write, a touch, a copy
over it, even one that keeps the mtime, moves the change time). A digest the matrix gives
is checked against the input's, so a run never measures other weights than the ones named.

The cell sees the input read-only under MOUNT_ROOT/NAME: the folder itself, or for a file,
the file under its own name (readers that go by the extension keep working).
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from bench import boundedread
from bench.boundedread import kind_of
from envbench import cache, users
from envbench.matrix import sources
from envbench.matrix.models import InputChoice
from envbench.user_errors import BadInput

MOUNT_ROOT = "/inputs"
CACHE_NAME = "input-digests.json"
# Folders within folders before the walk stops: a loop of bind mounts would never end.
MAX_DEPTH = 64
# Hashing that reads more than this says so as it goes: a user waiting on 40 GB sees why.
SAY_FROM_BYTES = 1 << 30
BLOCK = 1 << 20


@dataclass(frozen=True)
class InputPlan:
    """One input, resolved: its name, where it lies on this host, its digest and size."""

    name: str
    path: Path          # resolved: the file or folder itself, never a link to it
    sha256: str
    files: int
    size: int           # bytes
    # A file: its name as the matrix gave it (a link's, not its target's: a hub snapshot's
    # model.safetensors, not blobs/<sha>), part of its digest and of where the cell sees
    # it. None: a folder. Taken when resolved: a run never sees it change kind.
    file_name: str | None = None

    @property
    def is_file(self) -> bool:
        return self.file_name is not None

    @property
    def mount_point(self) -> str:
        """Where the cell's container sees it (and build() finds it: ctx.inputs[name])."""
        base = "%s/%s" % (MOUNT_ROOT, self.name)
        return "%s/%s" % (base, self.file_name) if self.file_name is not None else base

    def bench_args(self) -> list[str]:
        return ["--input", "%s=%s" % (self.name, self.mount_point),
                "--input-sha256", "%s=%s" % (self.name, self.sha256)]

    def describe(self) -> str:
        """One line: the name, the host path, its size and digest (check and doctor say it)."""
        return "%s: %s (%s in %d file%s, sha256 %s)" % (
            self.name, self.path, _size_text(self.size), self.files,
            "" if self.files == 1 else "s", self.sha256)


def _size_text(size: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if size >= scale:
            return "%.1f %s" % (size / scale, unit)
    return "%d bytes" % size


def host_path(choice: InputChoice, matrix_dir: Path, where: str) -> Path:
    """The input's path on this host: ${VAR}s expanded, ~ the user's home, and relative to
    the matrix's folder where it is not absolute; never resolved further here."""
    text = os.path.expanduser(sources.expand(
        choice.path, where + ".path", "export it, naming the file or folder; see "
        "docs/workloads.md, 'Inputs of your own'"))
    path = Path(text)
    return path if path.is_absolute() else matrix_dir / path


@dataclass(frozen=True)
class _File:
    name: str           # relative to the input, '/'-separated
    full: str
    key: str            # device and inode: one entry per file in the cache
    version: list[int]  # size, modification and change times (ns): the entry's validity

    @property
    def size(self) -> int:
        return self.version[0]


def _entry(name: str, full: str, st: os.stat_result) -> _File:
    return _File(name, full, "%d:%d" % (st.st_dev, st.st_ino),
                 [st.st_size, st.st_mtime_ns, st.st_ctime_ns])


def _files(path: Path, where: str, file_name: str | None = None) -> list[_File]:
    """Every regular file of the input, in name order; links and special files refused (a
    link's target would not reach the container, a FIFO would hang the hash). A file input
    is named ``file_name`` (default: its own)."""
    st = os.stat(path)
    if stat.S_ISREG(st.st_mode):
        return [_entry(file_name or path.name, str(path), st)]
    if not stat.S_ISDIR(st.st_mode):
        raise BadInput("%s: %s is %s, not a file or a folder" % (where, path, kind_of(st.st_mode)))
    found = []
    for folder, dirs, names in os.walk(path, onerror=_raise):
        relative = os.path.relpath(folder, path)
        if relative != "." and relative.count(os.sep) + 1 > MAX_DEPTH:
            raise BadInput("%s: %s has folders more than %d levels deep" % (where, path,
                                                                             MAX_DEPTH))
        dirs.sort()
        for name in list(dirs) + names:
            full = os.path.join(folder, name)
            inner = os.path.relpath(full, path)
            mode = os.lstat(full).st_mode
            if stat.S_ISLNK(mode):
                raise BadInput("%s: %s/%s is a symbolic link: its target would not reach the "
                               "cell. Give the kit plain files: a folder written by "
                               "save_pretrained, or `hf download --local-dir`, not the hub's "
                               "cache of links" % (where, path, inner))
            if name in names and not stat.S_ISREG(mode):
                raise BadInput("%s: %s/%s is %s, not a regular file"
                               % (where, path, inner, kind_of(mode)))
        for name in sorted(names):
            full = os.path.join(folder, name)
            found.append(_entry(os.path.relpath(full, path).replace(os.sep, "/"), full,
                                os.lstat(full)))
    return sorted(found, key=lambda f: f.name)


def _raise(exc: OSError) -> None:
    raise exc


class DigestCache:
    """Each file's sha256 by device and inode, valid while its size and times stay."""

    def __init__(self, path: Path | None = None, load: bool = True) -> None:
        self.path = path or cache.root() / CACHE_NAME
        self.entries: dict[str, list[Any]] = {}
        self.changed = False
        if not load:  # a fresh copy's files: no entry could hold for them
            return
        try:
            loaded = json.loads(self.path.read_text())
            if isinstance(loaded, dict):
                self.entries = loaded
        except (OSError, ValueError):
            pass  # no cache yet, or a damaged one: every file is read again

    def get(self, f: _File) -> str | None:
        found = self.entries.get(f.key)
        if isinstance(found, list) and len(found) == 4 and found[:3] == f.version:
            return found[3] if isinstance(found[3], str) else None
        return None

    def put(self, f: _File, digest: str) -> None:
        self.entries[f.key] = [*f.version, digest]
        self.changed = True

    def save(self) -> None:
        if not self.changed:
            return
        try:
            users.write_text(self.path, json.dumps(self.entries))  # atomically
        except OSError:
            pass  # a cache that cannot be kept only costs the next run a read
        self.changed = False


def _hash_file(f: _File, where: str) -> str:
    sha = hashlib.sha256()
    try:
        # The cap is the size the walk saw: a file growing under the hash is refused.
        with boundedread.regular(f.full, f.size) as stream:
            while True:
                block = stream.read(BLOCK)
                if not block:
                    break
                sha.update(block)
    except boundedread.Unreadable as exc:
        raise BadInput("%s: %s cannot be read: %s" % (where, f.full, exc))
    return sha.hexdigest()


def digest(path: Path, where: str, digests: DigestCache, out: TextIO | None = None,
           file_name: str | None = None) -> tuple[str, int, int]:
    """(sha256, files, bytes) of a file or folder; files whose cache entry still holds are
    not read again. A file input is named ``file_name`` in it (default: its own name)."""
    files = _files(path, where, file_name)
    if not files:
        raise BadInput("%s: %s is an empty folder" % (where, path))
    unread = sum(f.size for f in files if digests.get(f) is None)
    if out is not None and unread >= SAY_FROM_BYTES:
        print("hashing %s (%s not hashed before; once per version of each file)"
              % (path, _size_text(unread)), file=out, flush=True)
    sha = hashlib.sha256()
    for f in files:
        known = digests.get(f)
        if known is None:
            known = _hash_file(f, where)
            after = os.lstat(f.full)
            if _entry(f.name, f.full, after).version != f.version:
                raise BadInput("%s: %s changed while it was hashed: run again once it is "
                               "written" % (where, f.full))
            digests.put(f, known)
        sha.update(f.name.encode("utf-8", "surrogateescape") + b"\0" + known.encode() + b"\0")
    return sha.hexdigest(), len(files), sum(f.size for f in files)


def resolve(name: str, choice: InputChoice, matrix_dir: Path, where: str,
            digests: DigestCache, out: TextIO | None = None) -> InputPlan:
    """One input of a workload entry, found, checked and hashed (``where``: its key)."""
    where = "%s.inputs.%s" % (where, name)
    given = host_path(choice, matrix_dir, where)
    try:
        path = given.resolve(strict=True)
        file_name = (given.name or path.name) if path.is_file() else None
        found, count, size = digest(path, where, digests, out, file_name)
    except RuntimeError:  # Python before 3.13: a loop of links
        raise BadInput("%s: %s is a loop of symbolic links" % (where, given))
    except FileNotFoundError:
        raise BadInput("%s: %s does not exist" % (where, given))
    except PermissionError as exc:
        raise BadInput("%s: %s cannot be read (%s): the cells run as you, and read it as you"
                       % (where, exc.filename or given, exc.strerror))
    except OSError as exc:
        raise BadInput("%s: %s cannot be read (%s)" % (where, given, exc.strerror or exc))
    if choice.sha256 is not None and choice.sha256 != found:
        raise BadInput("%s: %s has sha256 %s, not the %s the matrix gives: these are other "
                       "files than the ones named; point at the right ones, or give the new "
                       "digest" % (where, given, found, choice.sha256))
    return InputPlan(name, path, found, count, size, file_name)


def resolve_all(inputs: dict[str, InputChoice] | None, matrix_dir: Path, where: str,
                digests: DigestCache | None = None) -> tuple[InputPlan, ...]:
    """A workload entry's inputs in name order (none: an empty tuple)."""
    if not inputs:
        return ()
    digests = digests or DigestCache()
    try:
        return tuple(resolve(name, inputs[name], matrix_dir, where, digests, sys.stderr)
                     for name in sorted(inputs))
    finally:
        digests.save()
