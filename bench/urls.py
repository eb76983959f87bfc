"""A package index URL checked, and any URL shown without its credentials.

Standard library only, Python 3.8 syntax: bench (in every image: torch maybe absent), the
host and ./noxw (bootstrap/noxw.py imports it by path, before anything is installed) share it.
"""
from __future__ import annotations

import re
import urllib.parse


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
