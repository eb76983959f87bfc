"""What bench (in every image: Python 3.8 up, torch maybe absent), the host and ./noxw
(before anything is installed) all need, written once: an exception's message as one line of a
sentence, and a package index URL checked and shown without its credentials.

Standard library only, Python 3.8 syntax: tools/noxw.py imports this by path.
"""
from __future__ import annotations

import re
import urllib.parse

NO_MESSAGE = "(no message)"


def first_line(exc: BaseException, limit: int = 300) -> str:
    """The first non-blank line of ``exc``'s message, cut to ``limit`` characters: what a
    one-sentence error quotes of it (the rest is in the log). An exception raised with no
    message (``raise ValueError()``) reads "(no message)", never an IndexError."""
    for line in str(exc).splitlines():
        if line.strip():
            return line.strip()[:limit]
    return NO_MESSAGE


def http_url(url: str) -> bool:
    """An http(s) URL with a host that urllib can ask: no spaces or control characters, a
    well-formed host and port ("[::1", ":99999" raise inside urllib, quoting the URL)."""
    if not url.startswith(("https://", "http://")) or any(ord(c) < 33 or c == "\x7f"
                                                          for c in url):
        return False
    try:
        parts = urllib.parse.urlsplit(url)
        return bool(parts.hostname) and (parts.port is None or parts.port > 0)
    except ValueError:
        return False


# user:password@ or token@ right after a scheme's ://, anywhere in a text.
_CREDENTIALS = re.compile(r"(?<=://)[^/@\s]+@")


def without_credentials(text: str) -> str:
    """``text`` with every URL's credentials (user:password@, often a token) as ***@."""
    return _CREDENTIALS.sub("***@", text) if "://" in text else text
