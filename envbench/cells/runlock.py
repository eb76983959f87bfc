"""One run at a time on a reports folder.

Two `./noxw -s bench-cpu` started on one folder used to run the same cells at once, and the
second one's clean-up removed the first one's just-created containers. A run now holds an
exclusive `flock` on REPORTS/.envbench-run.lock for as long as it runs (the kernel drops it
when the process dies, however it dies); a second run says which pid holds it and waits,
then resumes: the cells the first one finished are on disk and are not run again. The lock
is what makes the clean-up safe too: containers labelled with this folder, found while we
hold its lock, belong to a run that is gone (see matrixrun.remove_leftovers).
"""
from __future__ import annotations

import fcntl
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from envbench.user_errors import UserError
from envbench.users import own

LOCK_NAME = ".envbench-run.lock"


@contextmanager
def holding(reports: Path, out: TextIO = sys.stdout) -> Iterator[Path]:
    """Hold the reports folder's run lock for the block (waiting, and saying so, while
    another run holds it)."""
    reports.mkdir(parents=True, exist_ok=True)
    path = reports / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise UserError("cannot open the run lock %s (%s)" % (path, exc.strerror or exc))
    own(path)  # under sudo: the invoking user's, like everything else in reports/
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "?"
            print("another run (pid %s) is using %s: waiting for it to end (Ctrl-C stops this "
                  "one; the cells that run finishes are kept, and this one then runs only "
                  "what is missing)" % (holder, reports), file=out, flush=True)
            started = time.monotonic()
            fcntl.flock(fd, fcntl.LOCK_EX)
            print("the other run ended after %.0f s; going on" % (time.monotonic() - started),
                  file=out, flush=True)
        os.ftruncate(fd, 0)
        os.pwrite(fd, ("%d\n" % os.getpid()).encode(), 0)
        yield path
    finally:
        os.close(fd)  # releases the lock
