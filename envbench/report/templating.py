"""The report's Jinja2: HTML with autoescape, Markdown as plain text (nothing a name or a
message carries becomes markup, a link or a ping)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jinja2

from envbench import terminal
from envbench.report.formats import (
    DASH,
    confidence,
    flop_rate,
    human_bytes,
    money,
    na,
    share,
    step_time,
)
from envbench.results.identity import variant_text

TEMPLATES = Path(__file__).resolve().parent / "templates"

# Markdown that a name or message could carry: emphasis, code, links and images ([ ] !),
# tables (|), strikethrough (~), math ($, which GitHub renders), headings and lists only at
# a line start (newlines folded).
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]|~#!$])")


def html_env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)),
                             autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters.update(secs=na("%.2f"), pct=share, times=na("%.2f×"), nbytes=human_bytes,
                       money=money, num=na("%.0f"), flops=flop_rate, step=step_time,
                       dash=lambda v: DASH if v in (None, "") else v, variant=variant_text,
                       confidence=confidence)
    return env


def markdown_env() -> jinja2.Environment:
    env = html_env()
    env.autoescape = False
    env.finalize = markdown_safe
    return env


def markdown_safe(value: Any) -> Any:
    """Text from result files as plain text in summary.md: one line, no Markdown, no HTML,
    no autolink (GitHub turns bare http:// and www. into links)."""
    if not isinstance(value, str):
        return value
    # Newlines fold to spaces first (a name must stay on its table row), then the terminal's
    # sanitiser: no ESC, BEL or bidirectional override reaches the file.
    text = terminal.safe(" ".join(value.split()))
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _MARKDOWN_SPECIAL.sub(r"\\\1", text)
    text = re.sub(r"(?i)(://|www\.)", lambda m: m.group(1)[0] + "&#8203;" + m.group(1)[1:],
                  text)
    # "@someone" pasted into a pull request would notify them: a zero-width space after @.
    return text.replace("@", "@&#8203;")
