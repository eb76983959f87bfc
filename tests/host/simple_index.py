"""A package index on 127.0.0.1 for the tests (PEP 503 HTML pages): a project's page at any
path ending in its name (/simple/uv/, /whl/cpu/torch/), its files under /files/. Asked as a
proxy (a whole URL in the request line) it answers the same. With ``authorization`` it
answers 401 to a request without that header."""
from __future__ import annotations

import http.server
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class SimpleIndex(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, files: dict[str, Path | list[Path]],
                 authorization: str | None = None) -> None:
        # project name -> its file, or its files (several wheels of one version)
        self.files = {name: f if isinstance(f, list) else [f] for name, f in files.items()}
        self.authorization = authorization
        self.asked: list[str] = []  # request paths, in order
        self.headers_seen: list[str | None] = []  # each request's Authorization header
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def port(self) -> int:
        return self.server_address[1]


class _Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        server = self.server
        server.asked.append(self.path)
        given = self.headers.get("Authorization")
        server.headers_seen.append(given)
        if server.authorization is not None and given != server.authorization:
            self.send_error(401)
            return
        # Asked as a proxy, the path is a whole URL: what follows the host is the same.
        parts = [p for p in urllib.parse.urlsplit(self.path).path.split("/") if p]
        names = {f.name: f for project in server.files.values() for f in project}
        if len(parts) == 2 and parts[0] == "files" and parts[1] in names:
            body, kind = names[parts[1]].read_bytes(), "application/octet-stream"
        elif parts and parts[-1] in server.files:
            links = "".join('<a href="/files/%s">%s</a>' % (f.name, f.name)
                            for f in server.files[parts[-1]])
            body = ("<html><body>%s</body></html>" % links).encode()
            kind = "text/html"
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@contextmanager
def serving(files: dict[str, Path], authorization: str | None = None) -> Iterator[SimpleIndex]:
    index = SimpleIndex(files, authorization)
    threading.Thread(target=index.serve_forever, daemon=True).start()
    try:
        yield index
    finally:
        index.shutdown()
