"""Taking in a finished cell, whatever ran it (this engine, a Slurm step, a cloud VM's run):
its log kept, the tail a failed result carries, and the sentence for a run that left no
result. Written once, so the executors cannot drift apart on any of them.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from envbench import users

# The lines of its log a failed result carries (the page and the summary show them).
LOG_TAIL_LINES = 40
# What the host keeps of one cell's log: its end, where the error is. The engine keeps no
# more than this either (containerrun's json-file max-size).
LOG_CAP = 16 * 2**20
NO_RESULT = "bench exited without writing a valid result"


def keep_log(data: bytes, log_path: Path) -> list[str]:
    """The end of a cell's output (at most LOG_CAP bytes) saved as its log, atomically (a
    link planted at the log's name is replaced, never written through) and owned by the
    invoking user; returns its lines."""
    text = data[-LOG_CAP:].decode("utf-8", errors="replace")
    encoded = text.encode("utf-8")
    if len(encoded) > LOG_CAP:  # a replaced byte takes three: the saved log stays capped
        text = encoded[-LOG_CAP:].decode("utf-8", errors="ignore")
    users.write_text(log_path, text)
    return text.splitlines()


def with_tail(record: dict[str, Any], lines: list[str]) -> dict[str, Any]:
    """A failed result with the last lines of its log, which say why."""
    record["log_tail"] = lines[-LOG_TAIL_LINES:]
    return record
