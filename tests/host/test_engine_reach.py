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

from envbench import enginereach, provision
from envbench.engine import connection
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
    before = enginereach.dockerd_pids()
    out = io.StringIO()
    with pytest.raises(UserError, match="accepts connections.* but does not answer"):
        provision.ensure_engine(out)
    assert enginereach.dockerd_pids() == before
    assert "starting" not in out.getvalue()


def test_a_stale_socket_named_by_docker_host_is_not_taken_for_an_engine(tmp_path,
                                                                       monkeypatch):
    path = tmp_path / "stale.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))
    dead.close()  # the file stays; nobody listens: what a killed dockerd leaves
    monkeypatch.setenv("DOCKER_HOST", "unix://%s" % path)
    assert enginereach.probe_socket(path) != 0
    reach = enginereach.diagnose()
    assert reach.sentence.startswith("DOCKER_HOST=unix://%s: no engine listens there" % path)
    assert reach.fix.startswith("unset DOCKER_HOST") and not reach.may_start_engine
    if enginereach.dockerd_pids():  # this machine's own dockerd is named, not blamed
        assert "(a dockerd runs here, pid" in reach.sentence


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
