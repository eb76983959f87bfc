"""Every failure bench expects, and how any failure is told in a result's error section.

Imports nothing but bench.messages and bench.rules (the standard library): the CLI needs it
before torch is imported, and a spawned ddp rank reports its failure through it to rank 0.
"""
from __future__ import annotations

import sys
from typing import Dict

from bench.messages import first_line
from bench.rules import FailureKind


class DataError(Exception):
    """The data set is missing or unreadable; the message names the file."""


class UnsupportedOption(Exception):
    """An option this image's torch (or this device) cannot run: a clear per-cell error."""


class DeviceUnavailable(Exception):
    """--device cuda on a machine or container where torch sees no GPU."""


class WorkloadError(Exception):
    """A user's workload that cannot run: missing, unreadable, or breaking its contract (the
    message says which; its own traceback, where it raised, goes to the log)."""


class RankFailed(Exception):
    """A ddp rank other than this one failed; the message says which and why."""


class Terminated(BaseException):
    """SIGTERM: `docker stop`, or an engine shutting down, asked bench to end.

    A BaseException, as KeyboardInterrupt is: the handler raises it wherever the run is, and
    an ``except Exception`` on the way (the fingerprint's, the profile window's, or one
    inside torch) would swallow it and train on. CI saw a run go on after SIGTERM.
    """


# Failures a user can act on: one line on stderr, never a traceback.
EXPECTED = (DataError, UnsupportedOption, DeviceUnavailable, RankFailed, WorkloadError)


def is_out_of_memory(exc: BaseException) -> bool:
    """True for torch's out-of-memory errors, once torch has imported: bench.compat is looked
    up, never imported, since importing torch after a failed import can crash the process."""
    compat = sys.modules.get("bench.compat")
    return compat is not None and compat.is_out_of_memory(exc)


def is_expected(exc: BaseException) -> bool:
    return isinstance(exc, EXPECTED) or is_out_of_memory(exc)


def describe(exc: BaseException) -> Dict[str, str]:
    """The error section of a result: the failure's type and its message."""
    if is_out_of_memory(exc):
        return {"type": FailureKind.OUT_OF_MEMORY, "message": first_line(exc, 500)}
    return {"type": type(exc).__name__, "message": str(exc)}
