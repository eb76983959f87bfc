"""`./noxw -s clean`: what the kit keeps here, its size and the command that removes it; a
part removed on request and nothing else (the engine's images are only counted here: the
other tests' images live in the same engine)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def clean(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "envbench", "clean", "--reports",
                           str(tmp_path / "reports"), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120,
                          env=dict(os.environ, ENVBENCH_CACHE=str(tmp_path / "cache")))


def _fill(tmp_path: Path) -> None:
    (tmp_path / "cache" / "wheels").mkdir(parents=True)
    (tmp_path / "cache" / "wheels" / "w.whl").write_bytes(b"\0" * 3_000_000)
    (tmp_path / "reports" / "results").mkdir(parents=True)
    (tmp_path / "reports" / "results" / "r.json").write_bytes(b"{}" * 1_000_000)
    (tmp_path / "reports" / "README.md").write_text("kept\n")
    # --reports and ENVBENCH_CACHE may name folders that hold other things too.
    (tmp_path / "reports" / "notes.txt").write_text("mine\n")
    (tmp_path / "reports" / "src").mkdir()
    (tmp_path / "cache" / "someone-elses").mkdir()


def test_clean_lists_each_part_with_its_size_and_the_command_and_removes_nothing(tmp_path):
    _fill(tmp_path)
    proc = clean(tmp_path)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.split()[0] for line in lines if not line.startswith(" ")][:5] == [
        "images", "bases", "cache", "reports", ".nox"]
    cache_line = next(line for line in lines if line.startswith("cache "))
    assert "3 MB" in cache_line and str(tmp_path / "cache") in cache_line
    assert "2 MB" in next(line for line in lines if line.startswith("reports "))
    assert "         remove: ./noxw -s clean -- --remove cache" in lines
    assert "         remove: rm -rf .nox" in lines
    assert (tmp_path / "cache" / "wheels" / "w.whl").exists()
    assert (tmp_path / "reports" / "results" / "r.json").exists()


def test_clean_removes_what_it_is_asked_and_keeps_the_reports_readme(tmp_path):
    _fill(tmp_path)
    images_before = next(line for line in clean(tmp_path).stdout.splitlines()
                         if line.startswith("images "))
    proc = clean(tmp_path, "--remove", "cache", "--remove", "reports")
    assert proc.returncode == 0, proc.stderr
    assert "removed cache (3 MB): %s" % (tmp_path / "cache") in proc.stdout
    assert "removed reports (2 MB)" in proc.stdout
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == [
        ".envbench-run.lock", "README.md", "notes.txt", "src"]
    assert [p.name for p in (tmp_path / "cache").iterdir()] == ["someone-elses"]
    # Not asked: the engine's images are as they were.
    assert next(line for line in proc.stdout.splitlines()
                if line.startswith("images ")) == images_before


def test_clean_refuses_a_part_it_does_not_know(tmp_path):
    proc = clean(tmp_path, "--remove", "everything")
    assert proc.returncode == 2 and "invalid choice: 'everything'" in proc.stderr


def test_clean_does_not_remove_through_a_link(tmp_path):
    (tmp_path / "elsewhere" / "wheels").mkdir(parents=True)
    (tmp_path / "cache").symlink_to(tmp_path / "elsewhere")
    proc = clean(tmp_path, "--remove", "cache")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "is a symbolic link: not removed" in proc.stderr
    assert (tmp_path / "elsewhere" / "wheels").is_dir()

