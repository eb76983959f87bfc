"""The cloud fan-out on local "VMs": real sshd containers reached over ssh on 127.0.0.1, the
same SkyPilot task (workdir and data synced with rsync, setup and run script over ssh), results
home over each cluster's ssh alias, one report of every target."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from e2e_support import ROOT, envbench

from envbench.cloud import fanout, local, runid

pytestmark = pytest.mark.e2e

MATRIX = """
environments:
  debian-torch1.13:
    python: "3.11"
    torch: "1.13"
    source: debian
    base: "${ENVBENCH_BASE}"
targets:
  cpu: {device: cpu, cpus: 2, memory: 4g}
  vm-a: {device: cpu, cpus: 1, memory: 2g, price_per_hour: 0.05, timeout_s: 900,
         label: "VM A", cloud: {infra: ssh/local}}
  vm-b: {device: cpu, cpus: 1, memory: 2g, price_per_hour: 0.07, timeout_s: 900,
         label: "VM B", cloud: {infra: ssh/local}}
  vm-gone: {device: cpu, cpus: 1, price_per_hour: 0.09, cloud: {infra: aws}}
benchmark:
  epochs: 1
  batch_size: 64
  pipeline: resident
  repeats: 1
  limit: 600
  limit_test: 200
  profile: true
"""


def _vms(client) -> list:
    return client.containers.list(all=True, filters={"label": local.LABEL})


def _cells_of_vms(client) -> list:
    return [c for c in client.containers.list(all=True, filters={"label": "envbench.host"})
            if runid.owner(c.labels["envbench.host"])]


def _run_prefix(out: str) -> str:
    """What this run's cluster names start with: this machine's tag and the run's id."""
    found = re.search(r"launching cluster (envbench-%s-[0-9a-f]{6}-)vm-a" % runid.machine_tag(),
                      out)
    assert found, out[-3000:]
    return found.group(1)


def test_two_vms_at_once_one_that_cannot_provision_and_one_report(
        client, first_run, e2e_env, cifar, tmp_path):
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(MATRIX)
    reports = tmp_path / "reports"
    started = time.monotonic()
    proc = envbench(e2e_env, "cloud", "--launcher", "local", "--matrix", matrix,
                    "--data", cifar, "--reports", reports, timeout=1500)
    wall = time.monotonic() - started
    out = proc.stdout
    print(out)
    print("fan-out wall time: %.0f s" % wall)
    lines = out.splitlines()
    # One target failing to provision is recorded and the others go on: exit 1, not a crash.
    assert proc.returncode == 1, out[-4000:]
    assert "Traceback" not in out
    run = _run_prefix(out)
    assert "[vm-gone] failed: %svm-gone could not be provisioned: no SSH node pool " \
           "serves infra 'aws'" % run in out
    # Concurrent: both VMs were running their task before either's results came home.
    first_home = min(i for i, line in enumerate(lines) if "results home via" in line)
    for name in ("vm-a", "vm-b"):
        running = lines.index("[%s] running the task" % name)
        assert running < first_home, lines
        assert "[%s] results home via rsync over ssh (%s%s): 1 result (1 ok), job " \
               "exit code 0" % (name, run, name) in out
    # Streamed with a prefix: bench's own epoch line, from inside each VM.
    assert any(line.startswith("[vm-a] ") and "epoch 1/1" in line for line in lines)
    assert "torn down: %svm-a" % run in out and "torn down: %svm-b" % run in out
    assert not _vms(client) and not _cells_of_vms(client)
    # Their homes (the VMs' disks) went with them.
    homes = Path(e2e_env.get("ENVBENCH_CACHE") or Path.home() / ".cache" / "envbench") \
        / "local-vms" / "vms"
    assert not any((homes / (run + name)).exists() for name in ("vm-a", "vm-b"))

    records = [json.loads(p.read_text()) for p in sorted((reports / "results").glob("*.json"))]
    by_target = {r["cell"]["target"]: r for r in records}
    assert sorted(by_target) == ["vm-a", "vm-b", "vm-gone"]
    for name, price in (("vm-a", 0.05), ("vm-b", 0.07)):
        record = by_target[name]
        assert record["status"] == "ok" and record["cell"]["price_per_hour"] == price
        assert record["cell"]["price_source"] == "matrix"
        assert record["env"]["torch"].startswith("1.13")
        # The profile's trace came home too, renamed with its result (named by identity).
        result_file = next(p for p in (reports / "results").glob("*.json")
                           if json.loads(p.read_text())["cell"]["target"] == name)
        trace = result_file.with_name(result_file.stem + ".trace.json.gz")
        assert record["profile"]["trace"] == trace.name and trace.is_file(), record["profile"]
    gone = by_target["vm-gone"]
    assert gone["status"] == "failed" and gone["error"]["type"] == "ProvisionFailed"
    runs = {r["target"]: r for r in json.loads(
        (reports / "cloud" / "runs.json").read_text())["runs"]}
    assert runs["vm-a"]["state"] == "done" and runs["vm-gone"]["state"] == "failed"
    assert runs["vm-a"]["cost_source"] == "estimate (price x wall time)"
    assert 0 < runs["vm-a"]["cost"] < 0.05
    assert runs["vm-gone"]["cost_source"] == "never provisioned"
    # One report with every target.
    page = (reports / "index.html").read_text()
    for label in ("VM A", "VM B", "vm-gone", "ProvisionFailed"):
        assert label in page, label
    assert "report of 3 results from 3 clusters" in out
    summary = (reports / "summary.md").read_text()
    assert "| vm-gone | CPU VM | aws | failed |" in summary
    assert "(estimate (price x wall time)) |" in summary


@pytest.mark.parametrize("how", ["ctrl-c", "ctrl-c twice", "sigterm"])
def test_ctrl_c_mid_run_tears_every_vm_down_and_says_which(
        client, first_run, e2e_env, cifar, tmp_path, how):
    """Ctrl-C; Ctrl-C again while the teardown runs (it used to escape `except Exception`
    and leave clusters up); SIGTERM from a supervisor, which used to end the kit at once."""
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(MATRIX.replace("epochs: 1", "epochs: 50"))
    reports = tmp_path / "reports"
    proc = subprocess.Popen([sys.executable, "-m", "envbench", "cloud", "--launcher", "local",
                             "--matrix", str(matrix), "--target", "vm-a", "--target", "vm-b",
                             "--data", str(cifar), "--reports", str(reports)],
                            cwd=ROOT, env=e2e_env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    seen: list[str] = []
    reader = threading.Thread(target=lambda: seen.extend(iter(proc.stdout.readline, "")),
                              daemon=True)
    reader.start()
    deadline = time.monotonic() + 900
    # Interrupt once both VMs run their cells (an epoch line from each).
    while not all(any(line.startswith("[%s] " % n) and "epoch 1/50" in line for line in seen)
                  for n in ("vm-a", "vm-b")):
        assert proc.poll() is None, "".join(seen)[-4000:]
        assert time.monotonic() < deadline, "".join(seen)[-4000:]
        time.sleep(0.5)
    assert len(_vms(client)) == 2 and _cells_of_vms(client)
    if how == "sigterm":  # to the kit only, as `timeout` or a supervisor sends it
        os.kill(proc.pid, signal.SIGTERM)
    else:  # as a Ctrl-C at a terminal: SIGINT to the whole foreground process group
        os.killpg(proc.pid, signal.SIGINT)
    if how == "ctrl-c twice":
        deadline = time.monotonic() + 60
        while not any(line.startswith("interrupted: tearing down") for line in seen):
            assert time.monotonic() < deadline, "".join(seen)[-4000:]
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)  # while the teardown runs
    proc.wait(timeout=300)
    reader.join(timeout=30)
    out = "".join(seen)
    print(out)
    assert proc.returncode == 130, out[-4000:]
    assert "Traceback" not in out
    stopped = [line for line in out.splitlines() if line.startswith("stopped clusters: ")]
    run = _run_prefix(out)
    assert stopped and sorted(stopped[-1][len("stopped clusters: "):].split(", ")) == [
        run + "vm-a", run + "vm-b"], out[-2000:]
    assert not _vms(client) and not _cells_of_vms(client)
    # An interrupted target is not a failed one: no failed cells were recorded for it.
    assert not list((reports / "results").glob("*.json"))
    # What the interrupted clusters ran for, and cost, is still written down.
    runs = json.loads((reports / "cloud" / "runs.json").read_text())["runs"]
    assert [r["state"] for r in runs] == ["interrupted", "interrupted"]
    assert all(r["wall_s"] > 0 and r["cost"] > 0 for r in runs), runs


def test_vms_of_a_launcher_that_died_are_swept_and_a_live_ones_are_left(client, base_tag,
                                                                         tmp_path, monkeypatch):
    """A fan-out killed before its teardown leaves its VMs; the next one removes them, with
    their homes, but never the VMs of a fan-out that still runs. Two ways to tell: the local
    launcher's own (the launcher's pid on each VM), and every launcher's (the run id in the
    cluster's name, whose claim a live run holds: envbench.cloud.runid)."""
    import io

    monkeypatch.setenv("ENVBENCH_CACHE", str(tmp_path / "cache"))
    dead = subprocess.Popen(["true"])
    dead.wait()
    me = runid.RunClaim()
    tag = runid.machine_tag()
    launcher = local.LocalLauncher(client, base_tag, tmp_path / "state", tmp_path,
                                   out=io.StringIO())
    vms = {}
    for name, owner in (("envbench-test-orphan", dead.pid), ("envbench-test-live", os.getpid()),
                        ("envbench-%s-dead00-vm-x" % tag, os.getpid()),
                        ("%svm-y" % me.prefix, os.getpid())):
        launcher.home(name).mkdir(parents=True)
        vms[name] = client.containers.run(base_tag, ["sleep", "300"], detach=True, labels={
            local.LABEL: name, local.OWNER_LABEL: str(owner)})
    try:
        assert launcher.sweep() == ["envbench-test-orphan"]
        assert "removed 1 local VM(s) left by an earlier run: envbench-test-orphan" \
            in launcher.out.getvalue()
        remaining = {c.id for c in client.containers.list(all=True)}
        assert vms["envbench-test-orphan"].id not in remaining
        assert vms["envbench-test-live"].id in remaining
        assert not launcher.home("envbench-test-orphan").exists()
        assert launcher.home("envbench-test-live").exists()
        # The fan-out's sweep at start: run dead00 holds no claim, this run holds its own.
        said = io.StringIO()
        fan = fanout.FanOut([], launcher, None, tmp_path / "reports", None, said)
        assert fan.sweep(me) == ["envbench-%s-dead00-vm-x" % tag]
        assert "taking down envbench-%s-dead00-vm-x: an earlier run on this machine started " \
               "it and is no longer running" % tag in said.getvalue()
        remaining = {c.id for c in client.containers.list(all=True)}
        assert vms["envbench-%s-dead00-vm-x" % tag].id not in remaining
        assert vms["%svm-y" % me.prefix].id in remaining
        assert vms["envbench-test-live"].id in remaining  # not named by a run: never swept
    finally:
        me.release()
        for vm in vms.values():
            try:
                vm.remove(force=True)
            except Exception:  # noqa: BLE001 - the sweep removed it
                pass
