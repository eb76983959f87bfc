"""Two runs started together on one reports folder: the second says which pid holds the
folder and waits, then runs only what is missing (nothing); every cell is measured once and
none is lost. A run's clean-up leaves another folder's running cells alone."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest
from e2e_support import E2E_MATRIX, ROOT

from envbench.cells import runlock

pytestmark = pytest.mark.e2e


def _start(env, reports, cifar) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "envbench", "bench", "--matrix",
                             str(E2E_MATRIX), "--data", str(cifar), "--reports", str(reports),
                             "--order", "grouped"], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def test_two_runs_on_one_folder_one_waits_and_no_cell_is_lost(first_run, e2e_env, cifar,
                                                              tmp_path):
    # first_run built both images: these two runs measure, they do not build.
    reports = tmp_path / "reports"
    lock_file = reports / runlock.LOCK_NAME
    first = _start(e2e_env, reports, cifar)
    deadline = time.monotonic() + 120
    while not (lock_file.exists() and lock_file.read_text().strip() == str(first.pid)):
        assert first.poll() is None, first.communicate()[0][-3000:]
        assert time.monotonic() < deadline, "the first run never took the lock"
        time.sleep(0.05)
    second = _start(e2e_env, reports, cifar)
    out_second, _ = second.communicate(timeout=1200)
    out_first, _ = first.communicate(timeout=1200)
    assert first.returncode == 0, out_first[-3000:]
    assert second.returncode == 0, out_second[-3000:]
    assert "another run (pid %d) is using %s: waiting for it to end" % (first.pid, reports) \
        in out_second
    # The first measured both cells; the second found them on disk and ran none.
    ran = [line for line in out_first.splitlines() if line.startswith("[")]
    assert len(ran) == 2 and not any("cached" in line for line in ran), out_first[-3000:]
    resumed = [line for line in out_second.splitlines() if line.startswith("[")]
    assert len(resumed) == 2 and all("cached" in line for line in resumed), out_second[-3000:]
    results = sorted(p.name for p in (reports / "results").glob("*.json"))
    assert len(results) == 2 and {name.split("__")[0] for name in results} == {
        "debian-torch1.13", "torch2.13-cpu"}
    assert "Traceback" not in out_first + out_second


def test_a_run_leaves_another_folders_running_cell_alone(client, base_tag, e2e_env, tmp_path):
    """A container of another reports folder (another run, alive) keeps running while this
    run cleans up; one labelled with this folder (its run is gone) is removed, running or
    not."""
    from envbench.cells import containerrun, matrixrun
    from envbench.engine import connection

    ours, theirs = tmp_path / "ours" / "results", tmp_path / "theirs" / "results"
    ours.mkdir(parents=True)
    theirs.mkdir(parents=True)
    started = {}
    for name, folder in (("orphan", ours), ("alive", theirs)):
        started[name] = client.containers.run(
            base_tag, ["sleep", "300"], detach=True, labels={
                "envbench.cell": "test-%s" % name, "envbench.host": connection.client_host(),
                containerrun.RESULTS_LABEL: str(folder.resolve())})
    try:
        import io
        out = io.StringIO()
        matrixrun.remove_leftovers(client, ours, out)
        assert out.getvalue() == ("removed 1 container(s) left by an earlier run (1 still "
                                  "running: its run had died)\n")
        remaining = {c.id for c in client.containers.list(all=True)}
        assert started["orphan"].id not in remaining
        started["alive"].reload()
        assert started["alive"].status == "running"
    finally:
        for container in started.values():
            try:
                container.remove(force=True)
            except Exception:  # noqa: BLE001 - already removed by the kit
                pass
