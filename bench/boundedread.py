"""A file the kit did not write, read boundedly: never through a link, never blocking on a
FIFO, never more than a cap.

Standard library only, Python 3.8 syntax: bench (in every image: torch maybe absent), the
host and ./noxw (bootstrap/noxw.py imports it by path, before anything is installed) share it.
"""
from __future__ import annotations

import errno
import os
import stat
from contextlib import contextmanager
from typing import BinaryIO, Iterator, Optional


class Unreadable(Exception):
    """Why a file cannot be read: one phrase ("a symbolic link", "a FIFO (named pipe), not a
    regular file", ...), and its ``kind`` for callers with words of their own: "link",
    "special" (a FIFO, a device, a socket, a folder), "size" (past the cap) or "os" (the
    system's error); ``what`` the file turned out to be, for a link or a special file."""

    def __init__(self, message: str, kind: str = "os", what: Optional[str] = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.what = what


def kind_of(mode: int) -> str:
    """What a file that is not a plain file is, in words."""
    for test, words in ((stat.S_ISFIFO, "a FIFO (named pipe)"),
                        (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                        (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link"),
                        (stat.S_ISDIR, "a folder")):
        if test(mode):
            return words
    return "not a regular file"


def _special(mode: int) -> Unreadable:
    what = kind_of(mode)
    return Unreadable(what if what == "not a regular file" else
                      "%s, not a regular file" % what, "special", what)


@contextmanager
def regular(path: "os.PathLike[str] | str", cap: int) -> Iterator[BinaryIO]:
    """``path`` open for reading, checked on the open descriptor to be a regular file of at
    most ``cap`` bytes. Opened without following a link and without blocking: a FIFO would
    hang the reader, and a link to /dev/zero passes a stat() of the path. The size a stat
    gives may lie (a file that grows): read no more than ``cap`` + 1 bytes of it."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) |
                     getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Unreadable("a symbolic link (the kit reads plain files only)", "link",
                             "a symbolic link")
        mode = None
        if exc.errno == errno.ENXIO:  # a socket cannot be opened at all: say what it is
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                pass
        raise _special(mode) if mode is not None else Unreadable(exc.strerror or str(exc))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _special(info.st_mode)
        if info.st_size > cap:
            raise Unreadable("%d bytes, more than the %d a file of this kind holds"
                             % (info.st_size, cap), "size")
        with os.fdopen(fd, "rb", closefd=False) as stream:
            yield stream
    finally:
        os.close(fd)


def read_regular(path: "os.PathLike[str] | str", cap: int) -> bytes:
    """A regular file's bytes, at most ``cap`` (read no further: the size may lie)."""
    with regular(path, cap) as stream:
        data = stream.read(cap + 1)
    if len(data) > cap:
        raise Unreadable("more than the %d bytes a file of this kind holds" % cap, "size")
    return data
