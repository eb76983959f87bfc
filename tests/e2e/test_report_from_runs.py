"""The report of real runs: its figures are the result files' medians, rows are named by the
measured hardware, and a --quick run in the same folder never mixes with the full one."""
from __future__ import annotations

import csv
import json
import re
import shutil
import statistics
from pathlib import Path

import pytest
from e2e_support import E2E_MATRIX, envbench

from envbench.images import lock

pytestmark = pytest.mark.e2e


def _records(folder: Path) -> dict[str, dict]:
    return {p.name: json.loads(p.read_text()) for p in folder.glob("*.json")}


def _headline_row(page: str, environment: str) -> str:
    table = re.search(r'<table class="headline" data-environment="%s"[^>]*>(.*?)</table>'
                      % re.escape(environment), page, flags=re.S)
    assert table, "no headline table for %s" % environment
    rows = re.findall(r"<tr data-key=.*?</tr>", table.group(1), flags=re.S)
    assert len(rows) == 1, rows
    return rows[0]


def test_the_report_of_real_runs_shows_their_medians(first_run, e2e_env, tmp_path):
    reports, _ = first_run
    records = _records(reports / "results")
    assert records and all(r["status"] == "ok" for r in records.values())
    out = tmp_path / "report"
    proc = envbench(e2e_env, "report", reports / "results", "--out", out)
    assert proc.returncode == 0 and "Traceback" not in proc.stdout, proc.stdout
    page = (out / "index.html").read_text()
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert len(rows) == len(records)
    for record in records.values():
        env = record["cell"]["environment"]
        walls = [e["wall_s"] for e in record["epochs"]]
        assert len(walls) == 4  # the warm-up epoch and three more
        median = statistics.median(walls[1:])  # the warm-up epoch left out
        row = _headline_row(page, env)
        assert ">%.2f<" % median in row, (median, row)
        # bench's summary is that median, not a mean and not one with the warm-up epoch.
        assert record["summary"]["epoch_s_median"] == pytest.approx(median, abs=1e-6)
        assert record["summary"]["first_epoch_s"] == walls[0]
        for other in (statistics.mean(walls[1:]), statistics.median(walls)):
            if abs(other - median) >= 0.01:  # told apart at the page's two decimals
                assert ">%.2f<" % other not in row, (other, row)
        # Titled by what bench measured in the container, with the threads it used.
        measured = "%s · %d threads" % (record["env"]["cpu_model"], record["env"]["threads"])
        assert measured in row and "label “CI CPU”" in row
        csv_row = next(r for r in rows if r["environment"] == env)
        assert float(csv_row["epoch_s_median"]) == record["summary"]["epoch_s_median"]
        assert csv_row["threads"] == "2" and csv_row["threads_from"] == "cpus"
    # Each environment's lock hash, side by side (the Debian stack has none).
    lock_row = re.search(r"<tr[^>]*><th>lock</th>(.*?)</tr>", page, flags=re.S).group(1)
    locked = lock.read(Path(e2e_env["ENVBENCH_LOCKS"]) / "torch2.13-cpu.pylock.toml")
    assert "<code>%s</code>" % locked.sha256 in lock_row and "—" in lock_row


def test_a_quick_run_never_shares_a_row_with_the_full_run(first_run, e2e_env, cifar, tmp_path):
    reports = tmp_path / "reports"
    shutil.copytree(first_run[0] / "results", reports / "results")
    full = _records(reports / "results")
    proc = envbench(e2e_env, "bench", "--matrix", E2E_MATRIX, "--data", cifar,
                    "--reports", reports, "--quick", "--order", "grouped")  # one repeat each
    assert proc.returncode == 0, proc.stdout[-3000:]
    quick = {name: r for name, r in _records(reports / "results").items() if name not in full}
    assert len(quick) == 2 and all(r["cell"]["quick"] for r in quick.values())
    assert all("__quick__" in name for name in quick)

    # The current matrix, as `./noxw -s report` sees it: the full run, the quick files named.
    proc = envbench(e2e_env, "report", "--matrix", E2E_MATRIX, "--data", cifar,
                    "--reports", reports)
    assert proc.returncode == 0 and "Traceback" not in proc.stdout, proc.stdout
    page = (reports / "index.html").read_text()
    for record in full.values():
        row = _headline_row(page, record["cell"]["environment"])
        assert ">%.2f<" % record["summary"]["epoch_s_median"] in row
        assert "quick" not in row
    left_out = page[page.index("Files left out"):]
    for name in quick:
        assert re.search(re.escape(name) + r"</code>: a --quick run \(report it with --quick\)",
                         left_out), name

    # With --quick, the quick run is reported and the full one is left out.
    proc = envbench(e2e_env, "report", "--matrix", E2E_MATRIX, "--data", cifar,
                    "--reports", reports, "--quick", "--out", tmp_path / "quick")
    assert proc.returncode == 0, proc.stdout
    page = (tmp_path / "quick" / "index.html").read_text()
    for record in quick.values():
        row = _headline_row(page, record["cell"]["environment"])
        assert ">%.2f<" % record["summary"]["epoch_s_median"] in row and "quick" in row
    assert all("%s</code>: a full run" % name in page for name in full)

    # Given the folder itself, the report shows everything: quick rows apart, full unchanged.
    proc = envbench(e2e_env, "report", reports / "results", "--out", tmp_path / "all")
    page = (tmp_path / "all" / "index.html").read_text()
    for record in list(full.values()) + list(quick.values()):
        key = "%s|cpu|—|%s" % (record["cell"]["environment"],
                               "quick" if record["cell"]["quick"] else "")
        row = re.search(r'<tr data-key="%s">(.*?)</tr>' % re.escape(key), page, flags=re.S)
        assert row and ">%.2f<" % record["summary"]["epoch_s_median"] in row.group(1), key
