"""Which fan-out a cluster belongs to (envbench.cloud.runid), on real lock files held by real
processes: a live run's clusters are never leftovers, a dead run's are, other machines' and
hand-launched ones are left alone."""
from __future__ import annotations

import subprocess
import sys

import pytest

from envbench.cloud import runid, tasks

HOLD = """
import sys, time
from envbench.cloud import runid
claim = runid.RunClaim()
print(claim.run, flush=True)
time.sleep(600)
"""


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _holder(cache) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLD], stdout=subprocess.PIPE, text=True,
                            env={"ENVBENCH_CACHE": str(cache), "PATH": "/usr/bin:/bin",
                                 "PYTHONPATH": ":".join(sys.path)})
    run = proc.stdout.readline().strip()
    assert len(run) == runid.RUN_CHARS, run
    return proc, run


def test_a_cluster_name_carries_this_machine_and_the_run(cache):
    claim = runid.RunClaim()
    try:
        name = tasks.cluster_name("GPU_A.x", claim.prefix)
        assert name == "envbench-%s-%s-gpu-a-x" % (runid.machine_tag(), claim.run)
        assert runid.owner(name) == (runid.machine_tag(), claim.run)
        assert len(tasks.cluster_name("a" * 200, claim.prefix)) == 60
        assert runid.owner("envbench-h100") is None  # the dry run's, or launched by hand
    finally:
        claim.release()


def test_only_clusters_of_runs_that_died_on_this_machine_are_leftovers(cache):
    me = runid.RunClaim()
    live, live_run = _holder(cache)
    dead, dead_run = _holder(cache)
    try:
        dead.kill()  # kill -9: no teardown, no release; the kernel drops its lock
        dead.wait()
        assert (cache / "cloud-runs" / ("%s.lock" % dead_run)).exists()
        assert runid.is_live(live_run) and not runid.is_live(dead_run)
        tag = runid.machine_tag()
        other_machine = "0000" if tag != "0000" else "ffff"
        names = ["envbench-%s-%s-h100" % (tag, me.run),          # this run's own
                 "envbench-%s-%s-h100" % (tag, live_run),        # a concurrent run's
                 "envbench-%s-%s-h100" % (tag, dead_run),        # a dead run's
                 "envbench-%s-%s-a100" % (tag, dead_run),
                 "envbench-%s-abcdef-l4" % tag,                  # a run with no claim at all
                 "envbench-%s-%s-h100" % (other_machine, dead_run),  # another machine's
                 "envbench-h100", "my-own-cluster"]
        assert runid.leftovers(names, me) == names[2:5]
    finally:
        live.kill()
        live.wait()
        me.release()
    assert not runid.is_live(live_run)  # ended: its clusters are leftovers now


def test_a_run_id_cannot_be_claimed_twice(cache):
    first = runid.RunClaim()
    try:
        with pytest.raises(BlockingIOError):
            runid.RunClaim(first.run)
    finally:
        first.release()
    assert not (cache / "cloud-runs" / ("%s.lock" % first.run)).exists()
