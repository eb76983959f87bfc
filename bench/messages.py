"""An exception's message as one line of a sentence: what a one-sentence error quotes.

Standard library only, Python 3.8 syntax: bench (in every image: torch maybe absent), the
host and ./noxw (bootstrap/noxw.py imports it by path, before anything is installed) share it.
"""
from __future__ import annotations

NO_MESSAGE = "(no message)"


def first_line(exc: BaseException, limit: int = 300) -> str:
    """The first non-blank line of ``exc``'s message, cut to ``limit`` characters: what a
    one-sentence error quotes of it (the rest is in the log). An exception raised with no
    message (``raise ValueError()``) reads "(no message)", never an IndexError."""
    for line in str(exc).splitlines():
        if line.strip():
            return line.strip()[:limit]
    return NO_MESSAGE
