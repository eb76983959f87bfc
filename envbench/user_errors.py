"""Errors a user is expected to meet: printed as one clear message, never as a traceback."""
from __future__ import annotations

from envbench import redact


class UserError(Exception):
    """A problem the user can fix (bad matrix, no engine, missing base image...). Its text
    never carries a URL's credentials, whoever wrote the message (a pip line, a URL)."""

    def __str__(self) -> str:
        return redact.credentials(super().__str__())


class BadInput(UserError):
    """What was asked cannot be run as asked (an unknown environment or target, a selection
    that matches no cell): exit code 2, nothing ran."""


class MatrixError(BadInput):
    """The matrix file is invalid; ``problems`` holds one 'key.path: reason' line each."""

    def __init__(self, path: str, problems: list[str]):
        self.path = path
        self.problems = problems
        super().__init__("%s is invalid:\n  %s" % (path, "\n  ".join(problems)))
