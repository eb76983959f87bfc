"""The one downloader: a dropped connection resumes, a lie about the size is refused, and a
failure that retrying cannot fix is reported at once. A real HTTP server on 127.0.0.1."""
from __future__ import annotations

import http.server
import io
import threading

import pytest

from envbench import download
from envbench.user_errors import UserError

BODY = bytes(range(256)) * (3 * 4096)  # 3 MiB


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, behaviour):
        self.behaviour = behaviour
        self.requests: list[str | None] = []
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def url(self) -> str:
        return "http://127.0.0.1:%d/file.whl" % self.server_address[1]


class _Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        server = self.server
        asked = self.headers.get("Range")
        server.requests.append(asked)
        server.behaviour(self, len(server.requests), asked)


def _serve(behaviour):
    server = _Server(behaviour)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _drop_first_then_resume(handler, number, asked):
    if asked:
        start = int(asked.split("=")[1].rstrip("-"))
        handler.send_response(206)
        handler.send_header("Content-Length", str(len(BODY) - start))
        handler.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(BODY) - 1, len(BODY)))
        handler.end_headers()
        handler.wfile.write(BODY[start:])
        return
    handler.send_response(200)
    handler.send_header("Content-Length", str(len(BODY)))
    handler.end_headers()
    cut = len(BODY) // 3 if number == 1 else len(BODY)
    handler.wfile.write(BODY[:cut])  # the first answer stops a third of the way


@pytest.fixture(autouse=True)
def _no_pause(monkeypatch):
    monkeypatch.setattr(download, "PAUSE_S", 0.0)


def test_a_dropped_connection_resumes_where_it_stopped(tmp_path):
    server = _serve(_drop_first_then_resume)
    out = io.StringIO()
    dest = tmp_path / "file.whl"
    download.fetch(server.url, dest, out, "file.whl", timeout=10, max_bytes=len(BODY))
    server.shutdown()
    assert dest.read_bytes() == BODY
    assert server.requests == [None, "bytes=%d-" % (len(BODY) // 3)]
    assert "trying again (2 of 4)" in out.getvalue() and "100.0%" in out.getvalue()


def test_a_server_that_sends_more_than_declared_is_refused_and_nothing_is_kept(tmp_path):
    def too_much(handler, number, asked):
        handler.send_response(200)
        handler.end_headers()  # no Content-Length: only the declared size can stop it
        handler.wfile.write(BODY)
    server = _serve(too_much)
    dest = tmp_path / "file.whl"
    with pytest.raises(UserError, match="larger than the 1000 bytes it was declared to be"):
        download.fetch(server.url, dest, io.StringIO(), timeout=10, max_bytes=1000)
    server.shutdown()
    assert not dest.exists() and len(server.requests) == 1


def test_a_missing_file_is_reported_at_once_without_retries(tmp_path):
    def missing(handler, number, asked):
        handler.send_error(404)
    server = _serve(missing)
    with pytest.raises(UserError, match=r"downloading http://127.0.0.1:\d+/file.whl failed "
                                        r"\(HTTP Error 404"):
        download.fetch(server.url, tmp_path / "x", io.StringIO(), timeout=10)
    server.shutdown()
    assert len(server.requests) == 1


def test_a_server_error_is_retried_then_named(tmp_path):
    def broken(handler, number, asked):
        handler.send_error(503)
    server = _serve(broken)
    out = io.StringIO()
    with pytest.raises(UserError, match="HTTP Error 503"):
        download.fetch(server.url, tmp_path / "x", out, timeout=10, attempts=3)
    server.shutdown()
    assert len(server.requests) == 3 and out.getvalue().count("trying again") == 2
