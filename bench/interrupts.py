"""SIGTERM, noted where it lands and acted on where Python can act.

A signal handler that raises runs wherever the interpreter happens to be, and some places
there swallow what it raises: code that C calls back into reports its exception as "Exception
ignored in ..." and goes on (CI saw one inside ``collections.abc`` while torch was busy, and
the run trained on for 120 s after SIGTERM). So the handler also remembers the signal, and the
training loop asks at every step (``check``): a raise that was swallowed is raised again a
step later. While an extension module loads nothing is raised at all (see ``deferred``).
"""
from __future__ import annotations

from bench.errors import Terminated


class SigtermGuard(object):
    """Raise Terminated on SIGTERM, except while an extension module loads.

    An exception raised from a signal handler in the middle of ``import torch`` (while
    torch._C initialises) leaves the interpreter broken: the next call fails with
    "SystemError: bad call flags" and the process segfaults. So during the import the
    signal is only noted, and Terminated is raised as soon as the import is over.
    """

    def __init__(self):
        self.deferring = False
        self.pending = False

    def __call__(self, signum, frame):
        self.pending = True
        if not self.deferring:
            raise Terminated()

    def check(self):
        """Raise Terminated if SIGTERM came (its own raise may have been swallowed)."""
        if self.pending and not self.deferring:
            raise Terminated()

    def deferred(self):
        guard = self

        class _Deferred(object):
            def __enter__(self):
                guard.deferring = True

            def __exit__(self, *exc_info):
                guard.deferring = False
                if guard.pending and exc_info[0] is None:
                    raise Terminated()
                return False

        return _Deferred()


# The process's one guard: bench.cli installs it, the training loop asks it.
SIGTERM = SigtermGuard()


def check():
    SIGTERM.check()
