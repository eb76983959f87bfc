"""Text from elsewhere (a VM's output, a matrix label, a container's log) made safe to print:
no terminal escape sequences or control characters, which could rewrite what the user sees
(move the cursor, retitle the window, hide a line)."""
from __future__ import annotations

import re

# CSI and OSC sequences, and any other ESC-introduced pair; then C0/C1 controls but tab.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)?|\x1b.?")
_CONTROLS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def safe(text: str) -> str:
    """``text`` without escape sequences; other control characters shown as '?'."""
    return _CONTROLS.sub("?", _ESCAPES.sub("", text))
