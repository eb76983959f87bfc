"""A profiled cell's Chrome trace, taken across from its folder to beside its result.

The container wrote it; the host trusts nothing about it but what it checks: the name is the
one bench gives the cell's result (stem + .trace.json.gz), the file is a regular file opened
without following links, and it is at most MAX_BYTES. Anything else is dropped and the
record says why; the operators in the record stay either way.
"""
from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path
from typing import Any

from bench.tracefile import TRACE_SUFFIX
from envbench import users

# A few steps of ResNet-50 on a GPU are a few MB gzipped; a trace past this is no trace of
# a short window.
MAX_BYTES = 256 * 1024 * 1024


def path_for(results_dir: Path, stem: str) -> Path:
    return results_dir / (stem + TRACE_SUFFIX)


def take(record: dict[str, Any], folder: Path, results_dir: Path, stem: str,
         home_stem: str | None = None) -> None:
    """Copy the trace ``record`` names from ``folder`` (where the result's stem is ``stem``)
    to beside the result in ``results_dir`` (named ``home_stem`` there, when it is renamed
    on the way: a cloud VM's results are named by their identity); on any problem drop it
    from the record with a note."""
    profile = record.get("profile")
    if not isinstance(profile, dict) or not profile.get("trace"):
        return
    name = stem + TRACE_SUFFIX
    home = home_stem or stem
    why = None
    if profile["trace"] != name:
        why = "the trace was not named after the cell's result"
    else:
        try:
            _copy(folder / name, path_for(results_dir, home))
            profile["trace"] = home + TRACE_SUFFIX
        except (OSError, ValueError) as exc:
            why = "the trace could not be taken across: %s" % (
                getattr(exc, "strerror", None) or exc)
    if why is not None:
        profile["trace"], profile["trace_bytes"] = None, None
        profile["note"] = "; ".join(p for p in (profile.get("note"), why) if p)[:400]


def _copy(source: Path, target: Path) -> None:
    fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError("not a regular file")
        if info.st_size > MAX_BYTES:
            raise ValueError("%d bytes, over the %d a trace may have" % (info.st_size, MAX_BYTES))
        users.prepare_dirs(target.parent)
        tmp = target.with_name(".tmp-" + target.name)
        try:
            with os.fdopen(fd, "rb", closefd=False) as src, open(tmp, "wb") as dst:
                shutil.copyfileobj(src, dst)
                if dst.tell() > MAX_BYTES:
                    raise ValueError("grew past %d bytes while copied" % MAX_BYTES)
            os.chmod(tmp, 0o644)
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        users.own(target)
    finally:
        os.close(fd)
