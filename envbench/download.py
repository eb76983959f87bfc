"""One downloader for everything the kit fetches (CIFAR-10, locked wheels): a progress line,
retries that resume where a dropped connection stopped, and a size that is enforced.

A 3 GB CUDA stack is many large wheels: one reset connection must not cost the whole
download, so a transient failure is retried (up to ATTEMPTS times, with a pause that
grows) and resumes with an HTTP Range request where the server honours it. A failure that
retrying cannot fix (404, no such file) is reported at once.
"""
from __future__ import annotations

import http.client
import ssl
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import TextIO

from envbench.user_errors import UserError

BLOCK = 1 << 20
ATTEMPTS = 4
PAUSE_S = 2.0


class _TooLarge(Exception):
    pass


def _transient(exc: BaseException) -> bool:
    """Worth another try: a timeout, a reset or refused connection, a cut body, a 5xx."""
    if isinstance(exc, urllib.error.HTTPError):
        return exc.code >= 500 or exc.code == 429
    if isinstance(exc, urllib.error.URLError):
        return isinstance(exc.reason, (TimeoutError, ConnectionError))
    return isinstance(exc, (TimeoutError, ConnectionError, http.client.IncompleteRead))


def answers(url: str, timeout: float = 10, cafile: str | None = None,
            proxy: str | None = None) -> str | None:
    """None where ``url`` answers within ``timeout`` (the body is not read); else why not, in
    a few words. One try, no retries: a caller asks before handing the URL to a client that
    retries for minutes (pip: 5 retries a package) on a host that cannot reach it.
    ``cafile`` and ``proxy``: that client's own (pip's `cert` and `proxy`), so that the
    question goes the way the fetch will."""
    handlers: list[urllib.request.BaseHandler] = []
    if cafile:
        handlers.append(urllib.request.HTTPSHandler(
            context=ssl.create_default_context(cafile=cafile)))
    if proxy:
        handlers.append(urllib.request.ProxyHandler({"http": proxy, "https": proxy}))
    try:
        with urllib.request.build_opener(*handlers).open(url, timeout=timeout):
            return None
    except Exception as exc:  # noqa: BLE001 - any failure is "does not answer"
        return str(getattr(exc, "reason", exc))[:120]


def progress_line(label: str, done: int, total: int | None) -> str:
    if total:
        return "  %s %5.1f%%  %.1f / %.1f MB" % (label, 100.0 * min(done, total) / total,
                                                done / 1e6, total / 1e6)
    return "  %s %.1f MB" % (label, done / 1e6)


def _show(out: TextIO, label: str, done: int, total: int | None, final: bool) -> None:
    """Live on a terminal; elsewhere (CI logs, pipes) one line when the file is complete."""
    text = progress_line(label, done, total)
    live = out.isatty() if hasattr(out, "isatty") else False
    if live:
        out.write("\r" + text + ("\n" if final else ""))
    elif final:
        out.write(text + "\n")
    out.flush()


def _attempt(url: str, dest: Path, label: str, out: TextIO, timeout: float,
             max_bytes: int | None) -> None:
    """One try: resume from dest's size when the server answers a Range request with 206."""
    have = dest.stat().st_size if dest.exists() else 0
    request = urllib.request.Request(url)
    if have and url.startswith(("http://", "https://")):
        request.add_header("Range", "bytes=%d-" % have)
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
        resumed = getattr(response, "status", None) == 206
        if not resumed:
            have = 0
        length = int(response.headers.get("Content-Length") or 0)
        total = (have + length) if length else max_bytes
        done = have
        shown = 0
        with dest.open("ab" if resumed else "wb") as f:
            for block in iter(lambda: response.read(BLOCK), b""):
                done += len(block)
                if max_bytes is not None and done > max_bytes:
                    raise _TooLarge()
                f.write(block)
                if done - shown >= 64 * BLOCK:
                    shown = done
                    _show(out, label, done, total, False)
        if length and done != have + length:
            raise http.client.IncompleteRead(b"", have + length - done)
        _show(out, label, done, total, True)


def fetch(url: str, dest: Path, out: TextIO, label: str | None = None, timeout: float = 60,
          max_bytes: int | None = None, attempts: int = ATTEMPTS) -> None:
    """Download ``url`` into ``dest`` (created or overwritten), at most ``max_bytes`` long;
    a UserError names the URL and the reason when it cannot be had."""
    label = label or url.rsplit("/", 1)[-1][:60]
    dest.unlink(missing_ok=True)
    for attempt in range(1, attempts + 1):
        try:
            _attempt(url, dest, label, out, timeout, max_bytes)
            return
        except _TooLarge:
            dest.unlink(missing_ok=True)
            raise UserError("downloading %s failed (it is larger than the %d bytes it was "
                            "declared to be)" % (url, max_bytes or 0))
        except (OSError, http.client.HTTPException) as exc:
            if attempt == attempts or not _transient(exc):
                raise UserError("downloading %s failed (%s)" % (url, exc))
            print("  %s: %s; trying again (%d of %d)" % (label, exc, attempt + 1, attempts),
                  file=out, flush=True)
            time.sleep(PAUSE_S * attempt)
