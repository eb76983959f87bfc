"""What the user sees on the terminal: text from elsewhere (a VM's output, a matrix label, a
container's log) made safe to print, with no terminal escape sequences or control characters,
which could rewrite what the user sees (move the cursor, retitle the window, hide a line); and
whole lines from work that runs side by side."""
from __future__ import annotations

import re
import threading
from typing import Any, TextIO

from envbench import redact

# CSI and OSC sequences, and any other ESC-introduced pair; then C0/C1 controls but tab.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)?|\x1b.?")
_CONTROLS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")
# Unicode's bidirectional controls (U+202A-U+202E, U+2066-U+2069) and the marks beside them:
# a right-to-left override makes "lenet.py" read as something else on a terminal or a page.
_BIDI = re.compile("[\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def safe(text: str) -> str:
    """``text`` without escape sequences or bidirectional overrides; other control
    characters shown as '?'. The one sanitiser for what reaches a terminal or a Markdown
    file from elsewhere (a result's names, a workload's operators, a container's log)."""
    return redact.credentials(_CONTROLS.sub("?", _BIDI.sub("", _ESCAPES.sub("", text))))


class WholeLines:
    """A stream for threads that print side by side (the demo's two image builds): each
    thread's text reaches ``out`` a whole line at a time, so lines never mix mid-way.
    print() writes its text and its newline as two calls; another thread's line could
    otherwise land between them. Text without its newline yet waits in its thread's buffer."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self._lock = threading.Lock()
        self._pending = threading.local()
        self._closed = False

    def close(self) -> None:
        """From now on, lines go nowhere (an interrupted run: the threads left behind must
        not hold the real stream while the interpreter shuts down)."""
        with self._lock:
            self._closed = True

    def write(self, text: str) -> int:
        held = getattr(self._pending, "text", "") + text
        done, newline, rest = held.rpartition("\n")
        self._pending.text = rest
        if newline:
            with self._lock:
                if not self._closed:
                    self.out.write(done + newline)
                    self.out.flush()
        return len(text)

    def flush(self) -> None:
        with self._lock:
            if not self._closed:
                self.out.flush()

    def isatty(self) -> bool:  # a live progress line would be held back: never live here
        return False

    def __getattr__(self, name: str) -> Any:  # encoding, fileno, ...: the real stream's
        return getattr(self.out, name)
