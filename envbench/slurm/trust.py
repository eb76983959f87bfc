"""Nothing in shared_dir is trusted by its name.

shared_dir is often a project's group-writable scratch space: a file found there by the name
the kit would give it may be anyone's. So:

- The folders the kit writes into there (images, data, workloads, inputs, runs) are the
  user's, and nobody else may write into them: made so (mode 0755: the container's user is
  not the user on every runtime, rootless Podman maps it, so they stay readable), and one
  that exists must be a real folder of the user's that only the user may write, or it is
  named with its owner and not written into.
- A copy named by its content's digest (the data set, a workload, an input) is hashed again
  before it is used (staging); one that does not match is said, removed and copied again.
- An image file (an archive, a squashfs, a SIF) is named by the image, not by its bytes: the
  sha256 of what the kit wrote (or a job built on its node: images.take_in_made) is kept in
  a manifest in the user's own cache folder, and a file whose bytes are not those is said,
  removed and made again. The job checks it again on the node before it loads it
  (script.prepare_image).
"""
from __future__ import annotations

import hashlib
import json
import os
import pwd
import shutil
import stat
from pathlib import Path
from typing import TextIO

from envbench import cache, files, users
from envbench.user_errors import UserError

FOLDER_MODE = 0o755
MANIFEST_NAME = "slurm-shared-files.json"
MAX_MANIFEST_BYTES = 16 * 2**20
ANY_SIZE = 1 << 62  # an image file is as large as its image


def _user() -> int:
    """The uid whose folders these are: the invoking user's (sudo: the caller's)."""
    return int(users.host_user().split(":")[0])


def owner_name(uid: int) -> str:
    try:
        return "%s (uid %d)" % (pwd.getpwuid(uid).pw_name, uid)
    except KeyError:
        return "uid %d" % uid


def kit_folder(folder: Path) -> Path:
    """``folder`` under shared_dir, made where it is missing (each new folder the user's,
    writable by the user alone); an existing one checked: a real folder, the user's, that
    nobody else may write into. Else refused in one sentence naming its owner."""
    missing = []
    probe = folder
    while not probe.exists() and not probe.is_symlink():
        missing.append(probe)
        probe = probe.parent
    for made in reversed(missing):
        try:
            made.mkdir(mode=FOLDER_MODE)
        except FileExistsError:  # another run made it first: checked below as any other
            continue
        os.chmod(made, FOLDER_MODE)  # the umask's modes aside
        users.own(made)
    check_folder(folder)
    return folder


def check_folder(folder: Path) -> None:
    """A folder the kit takes files from or writes into, refused unless it is the user's
    and writable by the user alone."""
    try:
        info = os.lstat(folder)
    except OSError as exc:
        raise UserError("%s cannot be read (%s)" % (folder, exc.strerror or exc)) from None
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise UserError("%s is %s, not a folder: the kit writes into shared_dir's folders of "
                        "its own only; remove it, or name another shared_dir"
                        % (folder, "a link" if stat.S_ISLNK(info.st_mode) else "a file"))
    if info.st_uid != _user():
        raise UserError("%s belongs to %s, not to you: nothing in it is taken, and nothing "
                        "written into it; ask its owner to remove it, or name another "
                        "shared_dir" % (folder, owner_name(info.st_uid)))
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UserError("%s is yours but others may write into it (mode %o): anything in it "
                        "could be theirs; chmod go-w %s (the kit makes its folders so), or "
                        "name another shared_dir"
                        % (folder, stat.S_IMODE(info.st_mode), folder))


def sha256_of(path: Path) -> str:
    """sha256 of a regular file (files.regular: no link followed, no FIFO waited on);
    files.Unreadable where it is not one."""
    sha = hashlib.sha256()
    with files.regular(path, ANY_SIZE) as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def discard(path: Path, why: str, out: TextIO) -> None:
    """A file or folder in one of the kit's folders that is not what its name says: said,
    with its owner, and removed, so that it is made again. (The folder is the user's and
    nobody else may write into it, so what is in it is the user's own: an older kit's file,
    a copy cut short, or one changed since.)"""
    try:
        who = owner_name(os.lstat(path).st_uid)
    except OSError:
        who = "nobody now"
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    except OSError as exc:
        raise UserError("%s (owned by %s) %s, and it cannot be removed (%s): remove it, or "
                        "name another shared_dir" % (path, who, why, exc.strerror or exc)
                        ) from None
    print("%s (owned by %s) %s: removed, and made again" % (path, who, why), file=out,
          flush=True)


class Manifest:
    """The sha256 of each image file the kit made in a shared_dir, by the file's path, kept
    in the user's own cache folder (outside every shared_dir: nobody else writes there)."""

    def __init__(self, path: Path | None = None):
        path = path or cache.root() / MANIFEST_NAME
        self.path = path
        self.digests: dict[str, str] = {}
        try:
            if path.is_file() and path.stat().st_size <= MAX_MANIFEST_BYTES:
                loaded = json.loads(path.read_text())
                if isinstance(loaded, dict):
                    self.digests = {str(k): str(v) for k, v in loaded.items()
                                    if isinstance(v, str)}
        except (OSError, ValueError):
            self.digests = {}  # unreadable: every image file is checked as one not known

    def trusted(self, made: Path, what: str, out: TextIO) -> bool:
        """Whether ``made`` holds the bytes the kit wrote there; one that does not (or that
        the kit has no record of) is set aside, and False says to make it again."""
        if not made.exists() and not made.is_symlink():
            return False
        known = self.digests.get(str(made))
        try:
            found = sha256_of(made)
        except (OSError, files.Unreadable) as exc:
            discard(made, "cannot be read as a file (%s)" % (
                getattr(exc, "strerror", None) or exc), out)
            return False
        if found == known:
            return True
        discard(made, "is not the %s this kit wrote there for you (%s)" % (
            what, "its sha256 differs from the one recorded" if known else
            "no run of yours recorded writing it"), out)
        return False

    def record(self, made: Path, sha256: str) -> None:
        """``made``'s sha256 kept; entries of files that are gone (a shared_dir removed)
        are dropped."""
        self.digests = {path: digest for path, digest in self.digests.items()
                        if os.path.lexists(path)}
        self.digests[str(made)] = sha256
        users.write_text(self.path, json.dumps(self.digests, indent=1, sort_keys=True) + "\n")

