"""Names from results and workloads reach the terminal and Markdown as plain text: operator
names carrying OSC/CSI sequences (retitle the terminal, clear the screen), BEL and a
right-to-left override are printed by compare, and written to compare.md and summary.md,
without them; a workload that prints megabytes puts a bounded amount on the console, and its
log keeps the tail. Real result files through the real CLI and pages."""
from __future__ import annotations

import io
import os
import random
import subprocess
import sys
from pathlib import Path

from report_fixture import make_record

from bench import result
from envbench.cells import progress
from envbench.report import pages

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = ["\x1b]0;owned\x07aten::mm", "aten::conv\x1b[2J\x1b[H", "lenet\u202etxt.exe",
           "bell\x07ringer"]
FORBIDDEN = ("\x1b", "\x07", "\u202e")


def _profiled_run(folder: Path, factor: float) -> Path:
    folder.mkdir(parents=True)
    rng = random.Random(7)
    for repeat in range(3):
        record = make_record("a", "cpu", 256, repeat, rng, factor=factor)
        record["config"]["profile"] = True
        operators = [{"name": name, "calls": 10, "self_cpu_s": 0.01 * factor * (i + 1),
                      "self_device_s": None, "share": 0.2} for i, name in enumerate(HOSTILE)]
        record["profile"] = {"steps": 5, "warmup_steps": 2, "samples": 1280,
                             "window_s": 0.2 * factor, "ranked_by": "self_cpu",
                             "total_s": 0.2 * factor, "operators": operators, "trace": None,
                             "trace_bytes": None, "note": None}
        result.write_atomic(str(folder / ("r%d.json" % repeat)), record)
    return folder


def test_compare_prints_and_writes_hostile_operator_names_as_plain_text(tmp_path):
    old = _profiled_run(tmp_path / "old", 1.0)
    new = _profiled_run(tmp_path / "new", 2.5)
    out = tmp_path / "cmp"
    proc = subprocess.run([sys.executable, "-m", "envbench", "compare", str(old), str(new),
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "regression" in proc.stdout and "operator " in proc.stdout, proc.stdout
    for text in (proc.stdout, proc.stderr, (out / "compare.md").read_text()):
        assert not any(ch in text for ch in FORBIDDEN), repr(text[:2000])
    assert "operator aten::conv: " in proc.stdout  # the name is kept, its escapes are not
    assert "operator lenettxt.exe: " in proc.stdout
    written = pages.render_files([new], tmp_path / "page")
    summary = Path(written["md"]).read_text()
    assert "aten::mm" in summary and not any(ch in summary for ch in FORBIDDEN)


def test_a_cell_that_prints_megabytes_puts_a_bounded_amount_on_the_console():
    out = io.StringIO()
    shown = progress.MatrixProgress(1, out, live=False)
    shown.start(1, "e × cpu")
    line = "x" * 300
    for _ in range(150_000):  # 45 MB, as a workload printing in a loop would
        shown.line(line)
    shown.done("ok", True)
    console = out.getvalue()
    assert len(console) < (progress.LINES_SHOWN + 10) * (len(line) + 10)
    assert "more than %d lines: the rest of this cell's output is in its log" \
        % progress.LINES_SHOWN in console
    # The next cell is shown from its first line again.
    shown.start(2, "e × cpu")
    shown.line("epoch 1/1")
    assert out.getvalue().endswith("    | epoch 1/1\n")


def test_a_requirement_with_a_line_break_is_refused_by_check(tmp_path):
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text('environments:\n  e:\n    torch: "2.13.0"\n    packages: ["einops==0.8.2'
                      '\\n--index-url https://evil.example/simple"]\ntargets: {cpu: {device: '
                      'cpu}}\n')
    proc = subprocess.run([sys.executable, "-m", "envbench", "check", "--matrix", str(matrix),
                           "--synthetic"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env=dict(os.environ))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "is not a package requirement (it holds a line break, a tab or a control " \
           "character)" in proc.stderr, proc.stderr
