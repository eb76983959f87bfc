"""compare checks what it is given before it reads anything."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _compare(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "envbench", "compare", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def test_a_missing_old_run_is_said_before_new_is_walked(tmp_path):
    # NEW holds a result that cannot be read: had NEW been walked and read first, its
    # problem would be said (or would be the only thing said), not OLD's.
    (tmp_path / "broken.json").write_text("{not json")
    proc = _compare("/nonexistent-envbench-run", str(tmp_path))
    # Bad input, nothing compared: exit 2 (docs/running.md, "Exit codes").
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == "error: OLD (/nonexistent-envbench-run) does not exist"


@pytest.mark.parametrize("threshold", ["-0.5", "nan", "inf", "1", "1.5"])
def test_a_threshold_outside_0_to_1_is_refused(tmp_path, threshold):
    proc = _compare("--threshold=" + threshold, str(tmp_path), str(tmp_path))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr  # refused by the parser
    assert "argument --threshold: %r is not a fraction from 0 and below 1" % threshold \
        in proc.stderr
