"""Hostile input, round 4: compare's gate cannot be bent, no small input costs minutes or
gigabytes, a finished result is never lost, names cannot impersonate, and a parse error is
one sentence. Every case runs on real files (and a real small file system where the disk
must be full)."""
from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from report_fixture import make_record

from bench import result
from envbench.errors import UserError
from envbench.results import store

ROOT = Path(__file__).resolve().parents[2]


def envbench(*args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "envbench", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, **env))


def a_run(folder: Path, seed: int = 1) -> Path:
    rng = random.Random(seed)
    for repeat in range(3):
        result.write_atomic(str(folder / ("r%d.json" % repeat)),
                            make_record("a", "cpu", 256, repeat, rng))
    return folder


# --- compare's gate -------------------------------------------------------------------

@pytest.mark.parametrize("value", ["-0.5", "nan", "inf", "1", "1.5", "five"])
def test_a_threshold_outside_zero_to_one_is_refused_before_anything_is_read(tmp_path, value):
    run = a_run(tmp_path / "run")
    proc = envbench("compare", run, run, "--threshold=" + value, "--out", tmp_path / "c")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "argument --threshold: %r is not a fraction from 0 and below 1" % value \
        in proc.stderr
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("value", ["-1", "0", "1.5", "nan"])
def test_a_target_accuracy_outside_its_range_is_refused(tmp_path, value):
    run = a_run(tmp_path / "run")
    proc = envbench("report", run, "--target-accuracy=" + value, "--out", tmp_path / "o")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "is not a fraction above 0 and up to 1" in proc.stderr, proc.stderr
    assert not (tmp_path / "o").exists()


def test_compare_checks_old_before_walking_new(tmp_path):
    started = time.perf_counter()
    proc = envbench("compare", tmp_path / "nonexistent", "/", timeout=60)
    assert proc.returncode == 1 and time.perf_counter() - started < 30
    assert "OLD (%s) does not exist" % (tmp_path / "nonexistent") in proc.stderr


def test_a_walk_of_the_machine_is_refused_not_read(tmp_path):
    old = a_run(tmp_path / "old")
    for root in ("/proc", "/sys/class"):
        proc = envbench("compare", old, root, timeout=60)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr
        assert "is the kernel's view of the machine, not a folder of results" in proc.stderr
    started = time.perf_counter()
    proc = envbench("compare", old, "/", timeout=120)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "/ holds more than 200000 entries: give the folder of results" in proc.stderr
    assert time.perf_counter() - started < 90


def test_the_walk_is_bounded_by_its_entries(tmp_path, monkeypatch):
    monkeypatch.setattr(store, "MAX_ENTRIES", 50)
    for i in range(60):
        (tmp_path / ("f%d.txt" % i)).write_text("")
    with pytest.raises(UserError, match="holds more than 50 entries"):
        store.result_files([tmp_path])


def test_a_report_over_folders_that_come_and_go_reads_what_stays(tmp_path, monkeypatch):
    """A run's `.cells/cell-*` folders appear and vanish while the report walks the reports
    folder; a folder that vanishes mid-walk is skipped, `.cells` is never entered."""
    reports = tmp_path / "reports"
    a_run(reports / "results")
    churn = reports / ".cells"
    stop = threading.Event()

    def come_and_go() -> None:
        n = 0
        while not stop.is_set():
            folder = churn / ("cell-%d" % n)
            (folder / "deep").mkdir(parents=True, exist_ok=True)
            result.write_atomic(str(folder / "deep" / "x.json"), {"partial": True})
            shutil.rmtree(folder, ignore_errors=True)
            n += 1

    worker = threading.Thread(target=come_and_go)
    worker.start()
    try:
        for _ in range(20):
            loaded, skipped = store.load_all([reports])
            assert len(loaded) == 3 and skipped == []
    finally:
        stop.set()
        worker.join()
    # And a folder that vanishes while it is walked (not .cells): skipped, no traceback.
    other = reports / "scratch"
    paths = []
    for i in range(200):
        paths.append(other / ("d%d" % i))
        paths[-1].mkdir(parents=True)
    original_walk = os.walk

    def walk_that_loses_folders(top, *args, **kwargs):
        for root, dirs, names in original_walk(top, *args, **kwargs):
            if Path(root) == reports:
                shutil.rmtree(other)
            yield root, dirs, names
    monkeypatch.setattr(os, "walk", walk_that_loses_folders)
    loaded, _ = store.load_all([reports])
    assert len(loaded) == 3 and not other.exists()


# --- a finished result, a report, never lost ---------------------------------------------

@pytest.fixture
def small_disk(tmp_path):
    """A real file system of 256 kB (a tmpfs): room for one report, then filled."""
    if os.getuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
                   check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def fill(folder: Path) -> None:
    with (folder / "filler").open("wb", buffering=0) as f:
        try:
            while f.write(b"\0" * 4096):
                pass
        except OSError:
            pass


def test_a_report_onto_a_full_disk_is_one_sentence_and_the_old_report_stays_whole(
        tmp_path, small_disk):
    run = a_run(tmp_path / "run")
    out = small_disk / "report"
    first = envbench("report", run, "--out", out)
    assert first.returncode == 0, first.stderr
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert set(before) == {"index.html", "summary.md", "results.csv"}
    fill(small_disk)
    again = envbench("report", run, "--out", out, "--baseline", "cpu")
    assert again.returncode == 1 and "Traceback" not in again.stderr, again.stderr
    (line,) = again.stderr.strip().splitlines()
    assert line.startswith("error: no space left to write the report into %s (0.0 MB free "
                           "there): the files already there are as they were" % out), line
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # no temporary left
    cmp = envbench("compare", run, run, "--out", small_disk / "cmp")
    assert cmp.returncode == 1 and "no space left to write the comparison" in cmp.stderr


def test_out_naming_a_file_is_one_sentence(tmp_path):
    run = a_run(tmp_path / "run")
    (tmp_path / "a-file").write_text("mine\n")
    for verb in (("report", run), ("compare", run, run)):
        proc = envbench(*verb, "--out", tmp_path / "a-file")
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert "%s is a file, not a folder" % (tmp_path / "a-file") in proc.stderr
    assert (tmp_path / "a-file").read_text() == "mine\n"
