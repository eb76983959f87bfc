"""The engine stops mid-run: the cells that needed it fail with one sentence, the run ends
without a traceback, and once the engine is back the same command finishes the matrix."""
from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import docker
import pytest
from e2e_support import E2E_MATRIX, ROOT, envbench

from bench.cli import STOPPED

pytestmark = pytest.mark.e2e


class Engine:
    """The one dockerd here, stopped and started the way it is run: by systemd where systemd
    manages it (docker.socket too, or a connection would start it again), else by a signal
    and its own command line."""

    def __init__(self) -> None:
        if os.getuid() != 0:
            pytest.skip("only root can stop and start dockerd")
        pids = subprocess.run(["pgrep", "-x", "dockerd"], capture_output=True,
                              text=True).stdout.split()
        if len(pids) != 1:
            pytest.skip("not one dockerd process here (%d): cannot stop and restart it"
                        % len(pids))
        self.pid = int(pids[0])
        cmdline = Path("/proc/%d/cmdline" % self.pid).read_bytes().split(b"\0")
        self.command = [part.decode() for part in cmdline if part]
        self.systemd = bool(shutil.which("systemctl")) and subprocess.run(
            ["systemctl", "is-active", "--quiet", "docker.service"]).returncode == 0

    def stop(self) -> None:
        if self.systemd:
            subprocess.run(["systemctl", "stop", "docker.socket", "docker.service"],
                           check=True, timeout=120)
        else:
            os.kill(self.pid, signal.SIGTERM)

    def start(self, log) -> None:
        if self.systemd:
            subprocess.run(["systemctl", "start", "docker.service"], check=True, timeout=120)
        else:
            subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True)


def _wait_for(predicate, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting for " + what
        time.sleep(0.05)


def _answers() -> bool:
    try:
        docker.from_env(timeout=5).ping()
        return True
    except Exception:  # noqa: BLE001 - any failure means "not yet"
        return False


def test_the_engine_stopping_mid_run_fails_cells_clearly_and_a_rerun_finishes(
        client, first_run, e2e_env, cifar, tmp_path):
    client = docker.from_env(timeout=600)  # the session's client outlives this engine
    engine = Engine()
    reports = tmp_path / "reports"
    # Cells long enough (a few seconds) for the engine to stop while the first one runs.
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(E2E_MATRIX.read_text().replace("epochs: 4", "epochs: 30")
                      .replace("  limit: 600\n", ""))
    # --order grouped: the planned repeats only. Interleaved, a repeat sensed as contended on
    # a busy machine adds a re-run line, and the count below would say 3.
    run = subprocess.Popen([sys.executable, "-m", "envbench", "bench", "--matrix",
                            str(matrix), "--data", str(cifar), "--reports", str(reports),
                            "--order", "grouped"],
                           cwd=ROOT, env=e2e_env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    log = tempfile.NamedTemporaryFile(prefix="dockerd-", suffix=".log", delete=False)
    try:
        _wait_for(lambda: client.containers.list(filters={"label": "envbench.cell"}), 300,
                  "the first cell's container")
        engine.stop()
        _wait_for(lambda: not Path("/proc/%d" % engine.pid).exists(), 60, "dockerd to stop")
        out, _ = run.communicate(timeout=300)
    finally:
        if not _answers():
            engine.start(log)
            _wait_for(_answers, 90, "dockerd to come back")
        if run.poll() is None:
            run.kill()
    assert run.returncode == 1, out
    assert "Traceback" not in out, out
    cell_lines = [line for line in out.splitlines() if line.startswith("[")]
    assert len(cell_lines) == 2
    # The running cell was stopped with its engine and says so (bench records the SIGTERM,
    # or, when the engine's shutdown kills it first, the host records its exit and the engine
    # going away); the next cell found no engine.
    # Which of the three depends on who is quicker, the engine's shutdown or bench.
    assert "failed: Interrupted: %s" % STOPPED in cell_lines[0] or re.search(
            r"failed: (ContainerExited: bench exited with code \d+, and then the Docker engine "
            r"stopped answering|ContainerError: the Docker engine stopped answering)",
            cell_lines[0]), cell_lines
    # Refused once it is gone, or lost while it is still going away.
    assert re.search(r"failed: ContainerError: the Docker engine stopped answering "
                     r"\(connection (refused|lost)\)", cell_lines[1]), cell_lines

    # A container an engine crash could leave behind: the next run removes it, and only it
    # (another machine sharing the engine, as the local cloud launcher's VMs do, keeps its own).
    image = client.images.list(filters={"label": "envbench.environment"})[0]
    client.containers.create(image.id, labels={"envbench.cell": "left-behind",
                                               "envbench.host": socket.gethostname()})
    other = client.containers.create(image.id, labels={"envbench.cell": "another-machine's",
                                                       "envbench.host": "another-machine"})
    stale = client.containers.list(all=True, filters={"label": ["envbench.cell",
                                                                "envbench.host=%s"
                                                                % socket.gethostname()]})
    again = envbench(e2e_env, "bench", "--matrix", matrix, "--data", cifar,
                     "--reports", reports, "--order", "grouped")  # the planned repeat only
    assert again.returncode == 0, again.stdout[-3000:]
    assert "removed %d container(s) left by an earlier run" % len(stale) in again.stdout
    left = client.containers.list(all=True, filters={"label": "envbench.cell"})
    assert [c.id for c in left] == [other.id]
    other.remove(force=True)
    lines = [line for line in again.stdout.splitlines() if line.startswith("[")]
    assert len(lines) == 2 and all("s/epoch" in line and "cached" not in line for line in lines)
