"""Whose files these are: containers run as the invoking user, and what the kit creates for
them follows. Under sudo the kit changes the owner of nothing it did not create in this run,
and never through a symbolic link."""
from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from bench.result import write_text_atomic
from envbench.user_errors import UserError


def host_user() -> str:
    """uid:gid for the container, so results belong to whoever ran the kit (sudo: the caller)."""
    uid = os.environ.get("SUDO_UID") if os.getuid() == 0 else None
    gid = os.environ.get("SUDO_GID") if uid else None
    return "%s:%s" % (uid or os.getuid(), gid or os.getgid())


def _caller() -> tuple[int, int] | None:
    """The uid:gid to hand files to, or None when there is nothing to change (not root)."""
    uid, gid = (int(x) for x in host_user().split(":"))
    return (uid, gid) if os.getuid() == 0 and uid != 0 else None


def own(path: Path) -> None:
    """Hand a file or folder the kit has just written to the invoking user (under sudo, root
    writes). A symbolic link is not followed: the link itself is left as it is."""
    caller = _caller()
    if caller is None or path.is_symlink() or not path.exists():
        return
    os.chown(path, *caller, follow_symlinks=False)


def write_text(path: Path, text: str) -> None:
    """Write one of the kit's output files (reports, locks, logs) atomically, its folders
    created as prepare_dirs does, and hand it to the invoking user."""
    prepare_dirs(path.parent)
    write_text_atomic(str(path), text)
    own(path)


def write_together(files: list[tuple[Path, str]], what: str) -> None:
    """Several output files as one (a report's page, summary and CSV): each written to a
    temporary file beside it, then all renamed. A disk that fills, or a folder that is a
    file, leaves every earlier file as it was and is said in one sentence (UserError)."""
    written: list[tuple[str, Path]] = []
    try:
        for path, text in files:
            if path.parent.exists() and not path.parent.is_dir():
                raise UserError("%s is a file, not a folder: give a folder to write %s into"
                                % (path.parent, what))
            prepare_dirs(path.parent)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
            written.append((tmp, path))
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
        for tmp, path in written:
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
            own(path)
        written = []
    except OSError as exc:
        folder = files[0][0].parent
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise UserError("no space left to write %s into %s (%.1f MB free there): the files "
                            "already there are as they were; free space and run it again"
                            % (what, folder, _free_mb(folder)))
        if exc.errno in (errno.ENOTDIR, errno.EEXIST):
            raise UserError("%s is not a folder (%s): give a folder to write %s into"
                            % (folder, exc.strerror, what))
        # /proc/1/nope, a read-only mount, a folder of another user's: nothing was written.
        raise UserError("cannot write %s into %s (%s): give a folder this user can write"
                        % (what, folder, exc.strerror or exc))
    finally:
        for tmp, _ in written:
            if os.path.exists(tmp):
                os.unlink(tmp)


def _free_mb(folder: Path) -> float:
    try:
        return shutil.disk_usage(folder).free / 1e6
    except OSError:
        return 0.0


def own_like_folder(path: Path, tree: bool = False) -> None:
    """For the cache: under sudo, hand a file or folder the kit has just created (with
    ``tree``, and all below it) to the caller only where its folder is the caller's (a cache
    in the caller's home, as sudo -E or a sudo that keeps HOME leaves it). In root's own
    cache (sudo's usual HOME) it stays root's, as does everything outside the caller's
    folders. Links are never followed."""
    caller = _caller()
    if caller is None or path.is_symlink() or not path.exists():
        return
    if path.parent.stat().st_uid != caller[0]:
        return
    os.chown(path, *caller, follow_symlinks=False)
    if tree and path.is_dir():
        for below in path.rglob("*"):  # rglob does not descend through links
            os.chown(below, *caller, follow_symlinks=False)


def cache_dirs(folder: Path) -> None:
    """Create a cache folder; each folder created here follows its parent's owner as
    own_like_folder says."""
    _make(folder, own_like_folder)


def prepare_dirs(*folders: Path) -> None:
    """Create the output folders writable by the container's user. Only folders created here
    change owner; an existing folder (or a link to one) keeps its owner."""
    for folder in folders:
        _make(folder, own)


def _make(folder: Path, hand_over: Callable[[Path], None]) -> None:
    """mkdir -p, then ``hand_over`` each folder that did not exist, top down."""
    missing = []
    probe = folder
    while not probe.exists() and not probe.is_symlink():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    folder.mkdir(parents=True, exist_ok=True)
    for created in reversed(missing):
        hand_over(created)
