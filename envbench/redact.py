"""Secrets kept out of everything the kit prints or stores: the credentials a URL may carry
(``https://user:token@host/simple`` from an ``index_url`` given through ``${VAR}``). One
function, called where text leaves the kit: an error's message, a line on the terminal, a
record written to disk (and so the pages made from it)."""
from __future__ import annotations

from typing import Any

from bench.urls import without_credentials


def credentials(text: str) -> str:
    """``text`` with every URL's credentials replaced by ***."""
    return without_credentials(text)


def in_record(value: Any) -> Any:
    """A JSON-shaped value with credentials masked in every string (keys included)."""
    if isinstance(value, str):
        return credentials(value)
    if isinstance(value, dict):
        return {in_record(k): in_record(v) for k, v in value.items()}
    if isinstance(value, list):
        return [in_record(v) for v in value]
    return value
