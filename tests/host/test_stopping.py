"""SIGTERM and SIGHUP take Ctrl-C's path (envbench.stopping), in real processes: a signal
the process was started ignoring (nohup's SIGHUP) stays ignored."""
from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys, time
from envbench import stopping
previous = stopping.as_interrupt()
try:
    print("ready", flush=True)  # inside the try: the signal may come at once
    time.sleep(60)
    print("slept", flush=True)
except KeyboardInterrupt:
    print("took Ctrl-C's path", flush=True)
stopping.restore(previous)
"""


def _start(ignore_hup: bool = False) -> subprocess.Popen:
    def before() -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGHUP, signal.SIG_IGN if ignore_hup else signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

    proc = subprocess.Popen([sys.executable, "-c", SCRIPT], cwd=ROOT, stdout=subprocess.PIPE,
                            text=True, preexec_fn=before)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_stop_signal_becomes_a_keyboard_interrupt(sig):
    proc = _start()
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=30)
    assert "took Ctrl-C's path" in out and proc.returncode == 0


def test_under_nohup_a_closed_terminal_does_not_stop_the_run():
    proc = _start(ignore_hup=True)
    proc.send_signal(signal.SIGHUP)
    try:
        proc.wait(timeout=1)
    except subprocess.TimeoutExpired:
        pass
    assert proc.poll() is None  # still running: SIGHUP stayed ignored
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert "took Ctrl-C's path" in out


def test_the_command_line_ends_a_terminated_verb_as_interrupted(tmp_path):
    """`envbench` itself: SIGTERM during a verb that waits (a download from a server that
    never answers) ends it as Ctrl-C does: one word, exit 130, no traceback."""
    silent = socket.socket()  # a proxy that takes the connection and never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)
    silent.settimeout(60)  # the verb reaches it within a second; never wait forever
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "ENVBENCH_CACHE": str(tmp_path),
           "PYTHONPATH": str(ROOT),
           "https_proxy": "http://127.0.0.1:%d" % silent.getsockname()[1],
           "http_proxy": "http://127.0.0.1:%d" % silent.getsockname()[1]}
    proc = subprocess.Popen([sys.executable, "-m", "envbench", "data"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL))
    try:
        silent.accept()  # it is waiting on the download now
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    finally:
        silent.close()
    assert proc.returncode == 130, out
    assert "interrupted" in out and "Traceback" not in out


DEFERRED = """
import subprocess, sys
from envbench import stopping
stopping.as_interrupt()
try:
    with stopping.deferred():
        print("ready", flush=True)  # the signal comes while the child runs
        # what apt-get is to provision: a child that must not be killed half-way
        subprocess.run([sys.executable, "-c", "import time; time.sleep(1.5)"])
        print("the child finished", flush=True)
    print("not reached", flush=True)
except KeyboardInterrupt:
    print("then Ctrl-C's path", flush=True)
"""


def test_a_stop_during_apt_waits_for_it_then_takes_ctrl_cs_path():
    proc = subprocess.Popen([sys.executable, "-c", DEFERRED], cwd=ROOT, stdout=subprocess.PIPE,
                            text=True, preexec_fn=lambda: signal.signal(signal.SIGTERM,
                                                                        signal.SIG_DFL))
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert out.split() == ["the", "child", "finished", "then", "Ctrl-C's", "path"], out
