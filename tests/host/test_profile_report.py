"""Profiled cells on the page and in compare, from real bench runs on this CPU.

Six LeNet runs, interleaved: three with both cores and three made slower on purpose: one
thread, and twice the samples per step and per epoch. The doubled work alone makes each step
and each epoch about twice as long whatever else the machine is doing (one thread alone was
not enough: a busy CI machine once left a 1.7x slowdown's interval reaching 0.98). Their
records get the cell section the host runner gives them and are read through the contract,
as any result is.
"""
from __future__ import annotations

import csv
import gzip
import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from report_fixture import as_cpu_cell

from envbench.command_options import Options
from envbench.report import compare, pages
from envbench.results import contract, store

ROOT = Path(__file__).resolve().parents[2]
# The slower runs must read as slower: nothing else may run beside them (noxfile.py).
pytestmark = pytest.mark.alone
torch = pytest.importorskip("torch", reason="bench runs natively here: the tests venv has torch")
LENET = ["--device", "cpu", "--synthetic", "--epochs", "3", "--pipeline", "resident",
         "--limit-test", "256", "--profile"]
FAST = ["--threads", "2", "--batch-size", "256", "--limit", "4096"]
SLOW = ["--threads", "1", "--batch-size", "512", "--limit", "8192"]


def _run(folder: Path, stem: str, how: list[str], environment: str, repeat: int) -> Path:
    out = folder / ("%s.json" % stem)
    subprocess.run([sys.executable, "-m", "bench", *LENET, *how, "--out", str(out)],
                   cwd=ROOT, check=True, capture_output=True, timeout=300)
    record = json.loads(out.read_text())
    threads = int(how[how.index("--threads") + 1])
    store.write(out, as_cpu_cell(record, environment, repeat, threads))
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("profiled")
    folders = {"old": root / "old" / "results", "new": root / "new" / "results"}
    for folder in folders.values():
        folder.mkdir(parents=True)
    for repeat in range(3):  # interleaved: drift falls on both alike
        _run(folders["old"], "lenet-r%d" % repeat, FAST, "torch", repeat)
        _run(folders["new"], "lenet-r%d" % repeat, SLOW, "torch", repeat)
    return folders


def test_achieved_flops_are_the_recorded_flops_times_the_measured_rate(runs, tmp_path):
    records = [json.loads(p.read_text()) for p in sorted(runs["old"].glob("*.json"))]
    for r in records:
        assert contract.problems(r) == []
        assert math.isfinite(r["probe"]["flops_per_s"]) and r["probe"]["flops_per_s"] > 0
    # By hand: train-step FLOPs per sample times samples per second, per repeat.
    by_hand = [r["model"]["flops"]["train"] * r["summary"]["samples_per_s"] for r in records]
    written = pages.render_files([runs["old"]], tmp_path)
    rows = list(csv.DictReader(written["csv"].open()))
    assert sorted(float(row["achieved_flops_per_s"]) for row in rows) == pytest.approx(
        sorted(by_hand), rel=1e-6)
    assert sorted(float(row["probe_flops_per_s"]) for row in rows) == pytest.approx(
        sorted(r["probe"]["flops_per_s"] for r in records))
    # The page's cell figure: the median over repeats, against the median better probe.
    achieved = statistics.median(by_hand)
    achievable = statistics.median(max(r["probe"]["matmul_flops_per_s"],
                                       r["probe"]["conv_flops_per_s"]) for r in records)
    html = written["html"].read_text()
    section = html[html.index('id="efficiency"'):html.index('id="environments"')]
    assert "%.1f%%" % (100 * achieved / achievable) in section
    kinds = [r["probe"]["kind"] for r in records]
    assert ("fp32, conv" if max(set(kinds), key=kinds.count) == "conv" else "fp32, matmul n=") \
        in section


def test_the_page_lists_each_profiled_cells_operators_and_links_its_traces(runs, tmp_path):
    written = pages.render_files([runs["old"]], tmp_path)
    html = written["html"].read_text()
    section = html[html.index('id="operators"'):html.index('id="environments"')]
    assert "<code>aten::mkldnn_convolution</code>" in section or "convolution" in section
    links = [part.split('"')[0] for part in section.split('<a href="')[1:]
             if part.startswith(("../", "results", "/"))]
    assert len(links) == 3  # one trace per profiled repeat
    for link in links:
        trace = (tmp_path / link).resolve()
        with gzip.open(trace, "rt") as f:
            assert json.load(f)["traceEvents"]
    assert 'href="#operators"' in html and 'href="#efficiency"' in html


def test_compare_names_the_operators_behind_a_run_made_slower_on_purpose(runs, tmp_path):
    old, _ = store.load_all([runs["old"]])
    new, _ = store.load_all([runs["new"]])
    [change] = compare.compare(old, new)
    print("new / old %.3f, interval %s" % (change.ratio, change.ci))
    assert change.flag == "regression", (change.ratio, change.ci)
    assert change.operators, "a regression of two profiled runs names its operators"
    top = change.operators[0]
    assert top.new_s is not None and top.old_s is not None and top.new_s > top.old_s
    # The operator named is one that takes a large share of the step in either run.
    shares = {o.name: o.share for r in old for o in (r.profile.operators if r.profile else ())}
    assert shares.get(top.name, 0) > 0.05, (top.name, shares)
    import io

    from envbench.commands import compare as command
    printed = io.StringIO()
    assert command.run(Options(old=runs["old"], new=runs["new"], out=tmp_path / "cmp"),
                       printed) == 0
    assert "operator %s:" % top.name in printed.getvalue()
    assert top.name in (tmp_path / "cmp" / "compare.html").read_text()


def test_the_page_shows_what_moved_against_the_baseline_environment(runs, tmp_path):
    """The same cells under a second environment's name (as a second stack on the same target
    would give them): its operators are set beside the baseline's, old and new per step."""
    both = tmp_path / "both"
    both.mkdir()
    for path in sorted(runs["old"].glob("*.json")):
        record = json.loads(path.read_text())
        for env in ("torch", "torch-next"):
            record["cell"]["environment"] = env
            store.write(both / ("%s-%s" % (env, path.name)), record)
    html = pages.render_files([both], tmp_path / "page", baseline_env="torch")["html"] \
        .read_text()
    section = html[html.index('id="operators"'):html.index('id="environments"')]
    assert "What moved: torch-next against torch" in section
    table = section[section.index("What moved"):section.index("</table>")]
    rows = table.count("<tr>") - 1
    assert 1 <= rows <= 8 and "+0 ms" in table  # the same records: nothing moved
