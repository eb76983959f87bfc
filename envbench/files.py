"""Reading a file the kit did not write, boundedly: without following a link, without
blocking (a FIFO would hang the kit), only a regular file (a link to /dev/zero passes a
stat() of the path's size; the check is on the open descriptor), and no more than a cap.
Also the names people give things, held to what they look like."""
from __future__ import annotations

import errno
import os
import stat
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO


class Unreadable(Exception):
    """Why a file cannot be read: one phrase ("a symbolic link", "not a regular file", ...),
    and its ``kind`` for callers with words of their own: "link", "special" (a FIFO, a
    device, a folder), "size" (past the cap) or "os" (the system's error)."""

    def __init__(self, message: str, kind: str = "os") -> None:
        super().__init__(message)
        self.kind = kind


def _open(path: Path) -> int:
    try:
        return os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK |
                       getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Unreadable("a symbolic link (the kit reads plain files only)", "link")
        raise Unreadable(exc.strerror or str(exc))


@contextmanager
def regular(path: Path, cap: int) -> Iterator[BinaryIO]:
    """The file open for reading, checked to be a regular file of at most ``cap`` bytes."""
    fd = _open(path)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Unreadable("not a regular file", "special")
        if info.st_size > cap:
            raise Unreadable("%d bytes, more than the %d a file of this kind holds"
                             % (info.st_size, cap), "size")
        with os.fdopen(fd, "rb", closefd=False) as stream:
            yield stream
    finally:
        os.close(fd)


def read_regular(path: Path, cap: int) -> bytes:
    """A regular file's bytes, at most ``cap`` (read no further: the size may lie)."""
    with regular(path, cap) as stream:
        data = stream.read(cap + 1)
    if len(data) > cap:
        raise Unreadable("more than the %d bytes a file of this kind holds" % cap, "size")
    return data


def decode_utf8(data: bytes) -> str:
    """UTF-8 text, or Unreadable saying which encoding it looks like and where it breaks."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise Unreadable("UTF-16 text: save it as UTF-8")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise Unreadable("not UTF-8 text (byte 0x%02x at line %d, column %d; Latin-1 or "
                         "another encoding?): save it as UTF-8"
                         % (data[exc.start], line, column))


# Letters of other scripts drawn like Latin ones: "NVIDIA Н200" with a Cyrillic Н reads as
# the plain label and must be judged as one.
CONFUSABLES = str.maketrans({
    "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P", "С": "C",
    "Т": "T", "Х": "X", "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "у": "y", "х": "x",
    "і": "i", "І": "I", "ј": "j", "Ј": "J", "ѕ": "s", "Ѕ": "S", "ԁ": "d", "ɡ": "g",
    "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N",
    "Ο": "O", "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X", "ο": "o", "ν": "v",
})


def skeleton(text: str) -> str:
    """What a name looks like: NFKC (full-width and ligature forms folded) and letters of
    other scripts that are drawn like Latin ones mapped to those."""
    return unicodedata.normalize("NFKC", text).translate(CONFUSABLES)


def hidden_character(text: str) -> str | None:
    """The first character that shows nothing or reorders what follows (zero-width spaces,
    joiners, bidi controls, other format or control characters), named, or None."""
    for char in text:
        if unicodedata.category(char) in ("Cf", "Cc", "Co", "Cs", "Zl", "Zp") and \
                char not in "\t":
            return "U+%04X %s" % (ord(char), unicodedata.name(char, "(unnamed)"))
    return None
