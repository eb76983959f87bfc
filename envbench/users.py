"""Whose files these are: containers run as the invoking user, and host-written files follow."""
from __future__ import annotations

import os
from pathlib import Path


def host_user() -> str:
    """uid:gid for the container, so results belong to whoever ran the kit (sudo: the caller)."""
    uid = os.environ.get("SUDO_UID") if os.getuid() == 0 else None
    gid = os.environ.get("SUDO_GID") if uid else None
    return "%s:%s" % (uid or os.getuid(), gid or os.getgid())


def own(path: Path) -> None:
    """Hand a file or folder the host wrote to the invoking user (under sudo, root writes)."""
    uid, gid = (int(x) for x in host_user().split(":"))
    if os.getuid() == 0 and uid != 0 and path.exists():
        os.chown(path, uid, gid)


def prepare_dirs(*folders: Path) -> None:
    """Create the output folders writable by the container's user."""
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
        own(folder)
