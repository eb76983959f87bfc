"""Whose files these are: containers run as the invoking user, and what the kit creates for
them follows. Under sudo the kit changes the owner of nothing it did not create in this run,
and never through a symbolic link."""
from __future__ import annotations

import os
from pathlib import Path


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


def prepare_dirs(*folders: Path) -> None:
    """Create the output folders writable by the container's user. Only folders created here
    change owner; an existing folder (or a link to one) keeps its owner."""
    for folder in folders:
        missing = []
        probe = folder
        while not probe.exists() and not probe.is_symlink():
            missing.append(probe)
            if probe.parent == probe:
                break
            probe = probe.parent
        folder.mkdir(parents=True, exist_ok=True)
        for created in reversed(missing):
            own(created)
