"""What bench (in every image: Python 3.8 up, torch maybe absent), the host and ./noxw
(before anything is installed) all need, written once: an exception's message as one line of a
sentence, a file the kit did not write read boundedly, pip's settings as pip weighs them, and a
package index URL checked and shown without its credentials.

Standard library only, Python 3.8 syntax: bootstrap/noxw.py imports this by path.
"""
from __future__ import annotations

import configparser
import errno
import os
import re
import stat
import sys
import urllib.parse
from contextlib import contextmanager
from typing import BinaryIO, Callable, Dict, Iterator, List, Mapping, Optional

NO_MESSAGE = "(no message)"


def first_line(exc: BaseException, limit: int = 300) -> str:
    """The first non-blank line of ``exc``'s message, cut to ``limit`` characters: what a
    one-sentence error quotes of it (the rest is in the log). An exception raised with no
    message (``raise ValueError()``) reads "(no message)", never an IndexError."""
    for line in str(exc).splitlines():
        if line.strip():
            return line.strip()[:limit]
    return NO_MESSAGE


def http_url(url: str) -> bool:
    """An http(s) URL with a host that urllib can ask: no spaces or control characters, a
    well-formed host and port ("[::1", ":99999" raise inside urllib, quoting the URL)."""
    if not url.startswith(("https://", "http://")) or any(ord(c) < 33 or c == "\x7f"
                                                          for c in url):
        return False
    try:
        parts = urllib.parse.urlsplit(url)
        return bool(parts.hostname) and (parts.port is None or parts.port > 0)
    except ValueError:
        return False


# user:password@ or token@ right after a scheme's ://, anywhere in a text.
_CREDENTIALS = re.compile(r"(?<=://)[^/@\s]+@")


def without_credentials(text: str) -> str:
    """``text`` with every URL's credentials (user:password@, often a token) as ***@."""
    return _CREDENTIALS.sub("***@", text) if "://" in text else text


# --- a file the kit did not write, read boundedly -------------------------------------------

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


# --- pip's settings, read the way pip reads them (by the host, and by ./noxw before any pip)

PIP_CONFIG_BYTES = 1 << 20   # a pip.conf is a few lines
# The index an installed pip uses when nothing is configured, asked of that pip (the kit
# writes no package registry's address of its own): pip's internal name, so callers guard it.
PIP_DEFAULT_QUERY = "from pip._internal.models.index import PyPI; print(PyPI.simple_url)"


def pip_config_files(environ: Mapping[str, str], prefix: str = sys.prefix) -> List[str]:
    """pip's configuration files in the order pip loads them, a later one winning: the
    site-wide ones (each of XDG_CONFIG_DIRS, then /etc), the user's (the legacy ~/.pip, then
    XDG_CONFIG_HOME's), the interpreter's own (its prefix: a venv's), then PIP_CONFIG_FILE.
    The user's are skipped where PIP_CONFIG_FILE names a file that exists; none at all is
    read where it names the null device (pip's way to turn configuration off)."""
    named = environ.get("PIP_CONFIG_FILE")
    if named == os.devnull:
        return []
    home = environ.get("HOME") or os.path.expanduser("~")
    found = [os.path.join(d, "pip", "pip.conf")
             for d in (environ.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(os.pathsep) if d]
    found.append("/etc/pip.conf")
    if not (named and os.path.exists(named)):
        found.append(os.path.join(home, ".pip", "pip.conf"))
        found.append(os.path.join(environ.get("XDG_CONFIG_HOME") or
                                  os.path.join(home, ".config"), "pip", "pip.conf"))
    found.append(os.path.join(prefix, "pip.conf"))
    if named:
        found.append(named)
    return found


def _pip_name(name: str) -> str:
    return name.lower().replace("_", "-").lstrip("-")


def pip_settings(environ: Optional[Mapping[str, str]] = None, prefix: str = sys.prefix,
                 warn: Optional[Callable[[str], None]] = None) -> Dict[str, str]:
    """pip's settings by name ('index-url', 'cert', 'proxy', ...), weighed as pip weighs them:
    a PIP_* variable over the section of the commands the kit runs ([install] over
    [download]) over [global], each section merged over the files in pip's order, a later
    file winning. Read without pip, which a stock VM lacks; a file that cannot be read or
    parsed is passed over, said through ``warn``."""
    environ = os.environ if environ is None else environ

    def passed_over(path: str, why: object) -> None:
        if warn is not None:
            warn("pip's configuration %s is passed over: %s" % (path, why))

    # Each section merged over the files; then global, download, install, the variables.
    sections = {"global": {}, "download": {}, "install": {}}  # type: Dict[str, Dict[str, str]]
    for path in pip_config_files(environ, prefix):
        try:
            text = read_regular(path, PIP_CONFIG_BYTES).decode("utf-8")
        except Unreadable as exc:
            if exc.kind != "os" or os.path.lexists(path):  # not there: nothing configured
                passed_over(path, exc)
            continue
        except UnicodeDecodeError:
            passed_over(path, "not UTF-8 text")
            continue
        parser = configparser.RawConfigParser()
        try:
            parser.read_string(text, source=path)
        except configparser.Error as exc:
            passed_over(path, first_line(exc))
            continue
        for section in parser.sections():
            if section in sections:
                sections[section].update((_pip_name(k), v) for k, v in parser.items(section))
    found = dict(sections["global"])
    found.update(sections["download"])
    found.update(sections["install"])  # uv and the VMs install: install's settings win
    found.update((_pip_name(k[4:]), v) for k, v in environ.items()
                 if k.startswith("PIP_") and v and k != "PIP_CONFIG_FILE")
    return {k: v for k, v in found.items() if v}
