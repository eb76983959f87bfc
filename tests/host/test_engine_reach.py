"""Why no engine answers, told apart on real sockets: one that accepts connections but never
answers (a hung engine), a stale one nobody listens on, a remote DOCKER_HOST that is down.
The permission-denied and container cases run in tests/e2e/test_noxw_vm.py, as a non-root
user and in an unprivileged container."""
from __future__ import annotations

import io
import socket
import threading
import time
from pathlib import Path

import pytest

from envbench import provision
from envbench.engine import connection, reach
from envbench.user_errors import UserError


@pytest.fixture
def silent_socket(tmp_path, monkeypatch):
    """A unix socket that accepts connections and never says a word."""
    path = tmp_path / "hung.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    monkeypatch.setenv("DOCKER_HOST", "unix://%s" % path)
    yield path
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


def test_a_hung_engine_is_named_as_one_within_the_ping_timeout(silent_socket, monkeypatch):
    monkeypatch.setattr(connection, "PING_TIMEOUT_S", 1)
    started = time.monotonic()
    with pytest.raises(UserError) as refused:
        connection.connect()
    assert time.monotonic() - started < 20
    message = str(refused.value)
    assert message.startswith("a Docker engine is there (its socket %s accepts connections"
                              % silent_socket)
    assert "but does not answer; fix: see `systemctl status docker`" in message


def test_the_demo_starts_no_second_dockerd_beside_an_engine_that_does_not_answer(
        silent_socket, monkeypatch):
    monkeypatch.setattr(provision, "ANSWER_TIMEOUT_S", 1)
    before = reach.dockerd_pids()
    out = io.StringIO()
    with pytest.raises(UserError, match="accepts connections.* but does not answer"):
        provision.ensure_engine(out)
    assert reach.dockerd_pids() == before
    assert "starting" not in out.getvalue()


def test_a_stale_socket_named_by_docker_host_is_not_taken_for_an_engine(tmp_path,
                                                                       monkeypatch):
    path = tmp_path / "stale.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))
    dead.close()  # the file stays; nobody listens: what a killed dockerd leaves
    monkeypatch.setenv("DOCKER_HOST", "unix://%s" % path)
    assert reach.probe_socket(path) != 0
    found = reach.diagnose()
    assert found.sentence.startswith("DOCKER_HOST=unix://%s: no engine listens there" % path)
    assert found.fix.startswith("unset DOCKER_HOST") and not found.may_start_engine
    if reach.dockerd_pids():  # this machine's own dockerd is named, not blamed
        assert "(a dockerd runs here, pid" in found.sentence


def test_a_remote_engine_that_is_down_is_named_by_its_address(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:9")
    monkeypatch.setattr(connection, "PING_TIMEOUT_S", 2)
    with pytest.raises(UserError) as refused:
        connection.connect()
    assert str(refused.value).startswith("DOCKER_HOST=tcp://127.0.0.1:9 does not answer")


def test_bench_reaches_for_the_engine_before_any_download(tmp_path, monkeypatch):
    """On a machine where nothing can run, the first message is why, not a data download."""
    import subprocess
    import sys
    root = Path(__file__).resolve().parents[2]
    env = {"DOCKER_HOST": "unix://%s" % (tmp_path / "none.sock"), "PATH": "/usr/bin:/bin",
           "ENVBENCH_CACHE": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "envbench", "bench", "--kind", "cpu",
                           "--reports", str(tmp_path / "reports")], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: DOCKER_HOST=unix://%s: no engine listens there"
                                  % (tmp_path / "none.sock")), proc.stderr
    assert "cifar" not in (proc.stdout + proc.stderr).lower()
    assert not (tmp_path / "cache" / "cifar10").exists() and "Traceback" not in proc.stderr


def _docker_cli(config: Path, *args: str) -> None:
    import shutil
    import subprocess

    docker = shutil.which("docker")
    assert docker, "the docker CLI (installed with the engine) makes the contexts here"
    subprocess.run([docker, *args], env={"DOCKER_CONFIG": str(config), "PATH": "/usr/bin:/bin"},
                   check=True, capture_output=True, timeout=60)


def test_the_current_docker_context_names_the_engine_when_docker_host_is_unset(tmp_path,
                                                                              monkeypatch):
    """Rootless Docker and Docker Desktop point the CLI at their engine with a context, not
    DOCKER_HOST: the kit asks the engine the CLI would, and says so when it is down. The
    context is made by the real docker CLI, in a config folder of the test's own."""
    config = tmp_path / "docker-config"
    stale = tmp_path / "rootless.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(stale))
    dead.close()
    _docker_cli(config, "context", "create", "rootless", "--docker", "host=unix://%s" % stale)
    _docker_cli(config, "context", "use", "rootless")
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.delenv("DOCKER_CONTEXT", raising=False)
    monkeypatch.setenv("DOCKER_CONFIG", str(config))
    assert reach.engine_host() == ("unix://%s" % stale, "the Docker context rootless "
                                         "(unix://%s)" % stale)
    assert reach.socket_path() == stale
    monkeypatch.setattr(connection, "PING_TIMEOUT_S", 2)
    with pytest.raises(UserError) as refused:
        connection.connect()
    assert str(refused.value).startswith(
        "the Docker context rootless (unix://%s): no engine listens there" % stale)
    assert "fix: `docker context use default` to use this machine's engine" \
        in str(refused.value)
    # DOCKER_CONTEXT names another context, as for the CLI; "default" is the machine's own.
    monkeypatch.setenv("DOCKER_CONTEXT", "default")
    assert reach.engine_host() == ("", "")
    assert reach.socket_path() == reach.DEFAULT_SOCKET
    # DOCKER_HOST comes first.
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:9")
    monkeypatch.setenv("DOCKER_CONTEXT", "rootless")
    assert reach.engine_host()[0] == "tcp://127.0.0.1:9"


def test_a_context_that_does_not_exist_is_refused_not_replaced_by_the_default(tmp_path,
                                                                           monkeypatch):
    """DOCKER_CONTEXT=nosuch (a typo, a context removed since) stops the docker CLI; the kit
    had fallen back to this machine's socket without a word and run on another engine than
    the one asked for. Now it refuses in one sentence, in connect, doctor and bench alike."""
    import subprocess
    import sys

    config = tmp_path / "docker-config"
    _docker_cli(config, "context", "create", "gone", "--docker", "host=unix:///nowhere.sock")
    _docker_cli(config, "context", "use", "gone")
    _docker_cli(config, "context", "use", "default")
    _docker_cli(config, "context", "rm", "gone")
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setenv("DOCKER_CONFIG", str(config))
    monkeypatch.setenv("DOCKER_CONTEXT", "nosuch")
    with pytest.raises(reach.MissingContext) as missing:
        reach.engine_host()
    assert str(missing.value) == (
        "the Docker context nosuch (named by DOCKER_CONTEXT) does not exist here; fix: "
        "`docker context ls` lists the contexts; unset DOCKER_CONTEXT to use this machine's "
        "engine")
    with pytest.raises(UserError, match="context nosuch .named by DOCKER_CONTEXT"):
        connection.connect()
    found = reach.diagnose()
    assert (found.kind, found.may_start_engine) == ("context", False)
    # The config file's current context, removed behind the CLI's back, is refused the same.
    monkeypatch.delenv("DOCKER_CONTEXT")
    (config / "config.json").write_text('{"currentContext": "gone"}')
    with pytest.raises(reach.MissingContext) as missing:
        reach.socket_path()
    assert "the Docker context gone (named by currentContext in %s)" % (
        config / "config.json") in str(missing.value)
    assert "`docker context use default`" in str(missing.value)
    # DOCKER_HOST comes first, as for the CLI; "default" is the machine's own.
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:9")
    assert reach.engine_host() == ("tcp://127.0.0.1:9", "DOCKER_HOST=tcp://127.0.0.1:9")
    monkeypatch.delenv("DOCKER_HOST")
    monkeypatch.setenv("DOCKER_CONTEXT", "default")
    assert reach.engine_host() == ("", "")
    # As a user meets it: one line, exit 1, nothing downloaded, no traceback.
    root = Path(__file__).resolve().parents[2]
    env = {"DOCKER_CONTEXT": "nosuch", "DOCKER_CONFIG": str(config), "PATH": "/usr/bin:/bin",
           "ENVBENCH_CACHE": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    for command in (["bench", "--kind", "cpu", "--reports", str(tmp_path / "reports")],
                    ["doctor"]):
        proc = subprocess.run([sys.executable, "-m", "envbench", *command], cwd=root, env=env,
                              capture_output=True, text=True, timeout=120)
        said = proc.stdout + proc.stderr
        assert proc.returncode == 1, said
        assert "the Docker context nosuch (named by DOCKER_CONTEXT) does not exist" in said
        assert "Traceback" not in said and not (tmp_path / "cache" / "cifar10").exists()


def test_an_engine_at_the_contexts_socket_is_the_one_connected_to(tmp_path, monkeypatch):
    """An engine's API at the context's socket (the two calls a connection makes: the API
    version, then a ping) is the one the kit connects to, though nothing else names it."""
    import http.server
    import socketserver

    asked: list[str] = []

    class Engine(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            asked.append(self.path)
            body = b'{"ApiVersion": "1.41", "Version": "20.10.24"}' if "version" in self.path \
                else b"OK"
            self.send_response(200)
            self.send_header("Content-Type", "application/json" if body != b"OK"
                             else "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
        daemon_threads = True

        def get_request(self):  # BaseHTTPRequestHandler wants a (host, port) address
            request, _ = super().get_request()
            return request, ("local", 0)

    path = tmp_path / "desktop.sock"
    server = Server(str(path), Engine)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        config = tmp_path / "docker-config"
        _docker_cli(config, "context", "create", "desktop-linux", "--docker",
                    "host=unix://%s" % path)
        monkeypatch.delenv("DOCKER_HOST", raising=False)
        monkeypatch.setenv("DOCKER_CONFIG", str(config))
        monkeypatch.setenv("DOCKER_CONTEXT", "desktop-linux")
        connection.connect()
        assert any(p.endswith("/_ping") for p in asked), asked
    finally:
        server.shutdown()
        server.server_close()
