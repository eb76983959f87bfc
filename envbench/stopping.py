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
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def as_interrupt() -> dict[int, Any]:
    """Install the handlers; return the previous ones for restore(). Only the main thread
    may set handlers: elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    previous: dict[int, Any] = {}
    for s in STOP_SIGNALS:
        handler = signal.getsignal(s)
        if handler is signal.SIG_IGN:
            continue
        previous[s] = handler
        signal.signal(s, _interrupt)
    return previous


def restore(previous: dict[int, Any]) -> None:
    for s, handler in previous.items():
        signal.signal(s, handler)
