"""Stop signals take Ctrl-C's path: SIGTERM (a supervisor, `timeout`, a cancelled CI job)
and SIGHUP (a closed terminal or ssh session) raise KeyboardInterrupt in the main thread, so
each command's interrupt handling runs: the running cell's container is stopped and removed,
finished results are kept for the resume, cloud clusters come down. By default Python dies
on either at once, leaving a cell's container running on the machine.

A signal the process was started ignoring stays ignored: `nohup` sets SIGHUP to be ignored,
and a run under it must outlive its terminal."""
from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _install(handler: Any) -> dict[int, Any]:
    """``handler`` for each stop signal not ignored; the previous handlers. Only the main
    thread may set handlers: elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    previous: dict[int, Any] = {}
    for s in STOP_SIGNALS:
        if signal.getsignal(s) is not signal.SIG_IGN:
            previous[s] = signal.signal(s, handler)
    return previous


def as_interrupt() -> dict[int, Any]:
    """Install the handlers; return the previous ones for restore()."""
    return _install(_interrupt)


def restore(previous: dict[int, Any]) -> None:
    for s, handler in previous.items():
        signal.signal(s, handler)


@contextmanager
def deferred() -> Iterator[None]:
    """Within, SIGTERM and SIGHUP wait: apt and dpkg killed half-way leave packages
    half-configured (KeyboardInterrupt in subprocess.run kills its child). Once out, a stop
    that came during it raises KeyboardInterrupt. Ctrl-C reaches apt from the terminal
    itself, as ever."""
    came: list[int] = []
    previous = _install(lambda signum, frame: came.append(signum))
    try:
        yield
    finally:
        restore(previous)
    if came:
        raise KeyboardInterrupt
