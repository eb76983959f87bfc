"""Results home from a cluster's job log: the fallback when rsync over the ssh alias fails.

The task's run script prints every result file after the marker, base64-encoded on one line
(see tasks.run_script). SkyPilot's logs prefix each line (``(task, pid=…)``), so the marker is
searched anywhere in a line. A line is restored only when its name is a plain result file
name and its content is a valid result; everything else is listed with its reason.
"""
from __future__ import annotations

import base64
import binascii
import re
from pathlib import Path

from bench import result
from envbench.cloud.tasks import RESULT_MARKER
from envbench.results import contract

LINE = re.compile(re.escape(RESULT_MARKER) + r" (\S+) ([A-Za-z0-9+/=]*)\s*$")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}\.json\Z")


def restore(log: str, dest: Path) -> tuple[list[Path], list[tuple[str, str]]]:
    """Write every valid result printed in ``log`` into ``dest``; (written, [(name, why)])."""
    written: list[Path] = []
    refused: list[tuple[str, str]] = []
    for line in log.splitlines():
        match = LINE.search(line)
        if match is None:
            continue
        name, encoded = match.groups()
        if not NAME.match(name):
            refused.append((name, "not a result file name"))
            continue
        try:
            text = base64.b64decode(encoded, validate=True).decode("utf-8")
            contract.check(contract.parse(text))
        except (binascii.Error, UnicodeDecodeError) as exc:
            refused.append((name, "not base64 of UTF-8 text (%s)" % exc))
            continue
        except contract.InvalidResult as exc:
            refused.append((name, str(exc)))
            continue
        dest.mkdir(parents=True, exist_ok=True)
        path = dest / name
        result.write_text_atomic(str(path), text)
        written.append(path)
    return written, refused
