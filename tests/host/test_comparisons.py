"""The report's answers: environment against environment with an interval and a verdict,
the cards, the optimisation ladder, time and cost to accuracy, and `compare` of two runs."""
from __future__ import annotations

import copy
import math
import random
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import scipy.optimize as scipy_optimize
import scipy.stats as scipy_stats
from report_fixture import make_record, viewed

from bench import result
from envbench.inference import verdicts
from envbench.report import compare, grouping, headtohead, pages, scaling
from envbench.results import store

ROOT = Path(__file__).resolve().parents[2]


def scaled(record: dict, factor: float, rng: random.Random | None = None,
           noise: float = 0.0) -> dict:
    """The same measurement, every epoch `factor` times as long (plus relative noise)."""
    out = copy.deepcopy(record)
    for epoch in out["epochs"]:
        jitter = 1 + (rng.uniform(-noise, noise) if rng else 0.0)
        epoch["wall_s"] = round(epoch["wall_s"] * factor * jitter, 6)
        epoch["samples_per_s"] = round(epoch["samples"] / epoch["wall_s"], 3)
        epoch["phases_s"] = {k: round(v * factor * jitter, 6)
                             for k, v in epoch["phases_s"].items()}
    steady = [e["wall_s"] for e in out["epochs"][1:]]
    out["summary"].update(epoch_s_median=statistics.median(steady),
                          first_epoch_s=out["epochs"][0]["wall_s"],
                          samples_per_s=statistics.median(e["samples_per_s"]
                                                          for e in out["epochs"][1:]))
    return out


def write(folder: Path, records: list[dict]) -> Path:
    for i, record in enumerate(records):
        result.write_atomic(str(folder / ("%03d.json" % i)), record)
    return folder


def two_stacks(rng: random.Random, factor: float) -> list[dict]:
    """The write-up's stack (named so it sorts last) and another, on a GPU and a CPU."""
    records = []
    for target in ("gpu", "cpu"):
        for repeat in range(3):
            seed = make_record("zz-seed", target, 256, repeat, rng, torch="1.12.1+cu116",
                               cuda="11.6")
            other = make_record("newer", target, 256, repeat, rng, torch="2.5.1+cu124",
                                cuda="12.4")
            records += [seed, scaled(other, factor)]
    return records


def _versus_cell(page: str, env: str, column: int) -> str:
    row = re.search(r'<tr data-env="%s">(.*?)</tr>' % re.escape(env), page, flags=re.S).group(1)
    return re.findall(r"<td[^>]*>(.*?)</td>", row, flags=re.S)[column]


def test_two_environments_on_one_target_get_a_ratio_an_interval_and_a_verdict(tmp_path):
    records = two_stacks(random.Random(1), factor=0.66)
    written = pages.render_files([write(tmp_path / "r", records)], tmp_path / "out")
    page = written["html"].read_text()
    # The baseline is the write-up's stack, found by what was measured, not by its name.
    assert re.search(r"against\s+<b>zz-seed</b>", page)
    assert "baseline" in _versus_cell(page, "zz-seed", 0)
    groups = grouping.group(viewed(records))
    # Column 0 is the first target in the report's order: cpu.
    seed = next(g for g in groups if g.environment == "zz-seed" and g.target == "cpu")
    newer = next(g for g in groups if g.environment == "newer" and g.target == "cpu")
    ratio = seed.epoch_s / newer.epoch_s
    cell = _versus_cell(page, "newer", 0)
    low, high = map(float, re.search(r"faster \((\d+\.\d+)–(\d+\.\d+)\)", cell).groups())
    assert "%.2f× faster" % ratio in cell and low <= ratio <= high and low > 1
    # Another baseline on request: the write-up's stack is then slower by seed / newer,
    # worked out from the raw epochs, with an interval above 1 around it, close to the one
    # the other way round.
    other = pages.render_files([tmp_path / "r"], tmp_path / "o2", baseline_env="newer")
    slower = _versus_cell(other["html"].read_text(), "zz-seed", 0)
    cells = _by_cell(records)
    by_hand = _median_epoch(cells[("zz-seed", "cpu")]) / _median_epoch(cells[("newer", "cpu")])
    shown = re.search(r"(\d+\.\d+)× slower \((\d+\.\d+)–(\d+\.\d+)\)", slower)
    assert shown, slower
    point, s_low, s_high = map(float, shown.groups())
    assert point == float("%.2f" % by_hand) and 1 < s_low <= point <= s_high, slower
    assert abs(s_low - low) < 0.05 and abs(s_high - high) < 0.05, (slower, cell)


def test_too_few_repeats_says_how_many_each_side_had(tmp_path):
    """Two repeats of the newer stack against three of the write-up's: a ratio, no interval,
    and the counts in the order (this stack's, the baseline's)."""
    records = two_stacks(random.Random(1), factor=0.66)
    records = [r for r in records if not (r["cell"]["environment"] == "newer"
                                          and r["cell"]["repeat"] == 2)]
    page = pages.render_files([write(tmp_path / "r", records)], tmp_path / "out")[
        "html"].read_text()
    cells = _by_cell(records)
    ratio = _median_epoch(cells[("zz-seed", "cpu")]) / _median_epoch(cells[("newer", "cpu")])
    assert ("%.2f× (too few repeats for an interval: 2 and 3, 3 needed a side)" % ratio
            in _versus_cell(page, "newer", 0))


def test_no_verdict_when_the_interval_holds_one(tmp_path):
    rng = random.Random(2)
    records = [r for r in two_stacks(rng, factor=1.0)]
    written = pages.render_files([write(tmp_path / "r", records)], tmp_path / "out")
    page = written["html"].read_text()
    cell = _versus_cell(page, "newer", 0)
    assert "no difference at this noise" in cell and "faster" not in cell


def _by_cell(records: list[dict]) -> dict[tuple[str, str], list[dict]]:
    cells: dict[tuple[str, str], list[dict]] = {}
    for r in records:
        cells.setdefault((r["cell"]["environment"], r["cell"]["target"]), []).append(r)
    return cells


def _median_epoch(repeats: list[dict]) -> float:
    """From the raw epochs: each repeat's median after its first epoch, then the median."""
    return statistics.median(statistics.median(e["wall_s"] for e in r["epochs"][1:])
                             for r in repeats)


GPU = "NVIDIA GeForce RTX 3060 Laptop GPU"   # the fixture's measured device names
CPU = "11th Gen Intel(R) Core(TM) i7-11800H @ 2.30GHz · 8 threads"


def test_cards_answer_the_questions(tmp_path):
    """Each card's figure from the raw epochs, by hand: nothing of the report's code."""
    records = two_stacks(random.Random(3), factor=0.66)
    context = pages.build_context(viewed(records), [], None, 0.5)
    cards = {question: (answer, where) for question, answer, where in context["cards"]}
    cells = _by_cell(records)
    title = {"gpu": GPU, "cpu": CPU}
    epoch = {key: _median_epoch(repeats) for key, repeats in cells.items()}
    (env, target), fastest = min(epoch.items(), key=lambda item: item[1])
    assert (env, target) == ("newer", "gpu")  # 0.66 of the write-up's stack, on the GPU
    assert cards["Fastest configuration"] == (
        "%.2f s/epoch" % fastest, "newer · %s · batch_size=256" % GPU)
    # Cost per run: the target's price per hour times the median whole run (every epoch and
    # its evaluation), 0.35 $/h on the GPU, 0.10 on the CPU.
    price = {"gpu": 0.35, "cpu": 0.10}
    cost = {key: price[key[1]] / 3600 * statistics.median(
        sum(e["wall_s"] + e["test_s"] for e in r["epochs"]) for r in repeats)
        for key, repeats in cells.items()}
    cheapest_key = min(cost, key=cost.__getitem__)
    answer, where = cards["Cheapest per run"]
    assert float(answer.lstrip("$")) == pytest.approx(cost[cheapest_key], rel=0.006)
    assert where == "%s · %s · batch_size=256" % (cheapest_key[0], title[cheapest_key[1]])
    # GPU over CPU, per environment: the CPU's median epoch over the GPU's; the larger wins.
    ratios = {e: epoch[(e, "cpu")] / epoch[(e, "gpu")] for e in ("newer", "zz-seed")}
    best = max(ratios, key=ratios.__getitem__)
    assert 7.5 < ratios[best] < 8.7  # the write-up's 189.7 s over 23.4 s is 8.1x
    assert cards["Largest GPU/CPU speedup"] == (
        "%.2f×" % ratios[best], "%s · %s · batch_size=256 over %s" % (best, GPU, CPU))
    # Noisiest: the CV over the three repeat medians (sample sd over mean), the largest.
    def cv(repeats: list[dict]) -> float:
        medians = [statistics.median(e["wall_s"] for e in r["epochs"][1:]) for r in repeats]
        return statistics.stdev(medians) / statistics.mean(medians)
    noisy_key = max(cells, key=lambda key: cv(cells[key]))
    answer, where = cards["Noisiest cell"]
    assert answer == "CV %.1f%%" % (100 * cv(cells[noisy_key]))
    assert where == "%s · %s · batch_size=256" % (noisy_key[0], title[noisy_key[1]])


def test_the_ladder_has_one_row_per_swept_option(tmp_path):
    rng = random.Random(4)
    seconds = {("classic", "off"): 1.0, ("resident", "off"): 0.5,
               ("classic", "bf16"): 0.8, ("resident", "bf16"): 0.4}
    records = []
    for (pipeline, amp), factor in seconds.items():
        for repeat in range(2):
            r = make_record("stack", "cpu", 256, repeat, rng)
            r["cell"]["variant"] = {"pipeline": pipeline, "amp": amp}
            r["config"].update(pipeline=pipeline, amp=amp)
            records.append(scaled(r, factor))
    chains = headtohead.ladder(grouping.group(viewed(records)))
    assert len(chains) == 1
    steps = chains[0]["steps"]
    assert [(s["option"], s["value"]) for s in steps] == [("pipeline", "resident"),
                                                           ("amp", "bf16")]
    start = chains[0]["start"].epoch_s
    assert steps[0]["total"] == pytest.approx(start / steps[0]["group"].epoch_s)
    assert steps[1]["step"] == pytest.approx(steps[0]["group"].epoch_s
                                             / steps[1]["group"].epoch_s)
    assert steps[1]["total"] == pytest.approx(2.5, rel=0.05)  # 1.0 → 0.4
    written = pages.render_files([write(tmp_path / "r", records)], tmp_path / "out")
    page = written["html"].read_text()
    ladder = re.search(r'<table class="ladder">.*?</table>', page, flags=re.S).group(0)
    assert ladder.count("<tr>") == 1 + 1 + 2  # header, start, one row per swept option


def _parallel(record: dict, mode: str, world: int) -> dict:
    out = copy.deepcopy(record)
    out["cell"]["variant"] = {"parallel": mode, "nproc": world}
    out["config"].update(parallel=mode, nproc=None if mode == "none" else world)
    out["parallel"].update(mode=mode, world_size=world, backend=None if mode == "none" else "gloo",
                           global_batch=256 * world)
    return out


def test_the_scaling_table_gives_speedup_and_efficiency_against_one_device(tmp_path):
    rng = random.Random(6)
    records = []
    # One device 1.0; ddp on 2 ranks 0.6 (1.67x, 83%); ddp on 4 ranks 0.5 (2x, 50%).
    for repeat in range(3):
        r = make_record("stack", "cpu", 256, repeat, rng)
        records += [_parallel(r, "none", 1), scaled(_parallel(r, "ddp", 2), 0.6),
                    scaled(_parallel(r, "ddp", 4), 0.5)]
    # A stack with no one-device cell gets no row (there is nothing to scale against).
    lone = _parallel(make_record("lonely", "cpu", 256, 0, rng), "ddp", 2)
    rows = scaling.rows(grouping.group(viewed(records + [lone])))
    assert [(r.group.environment, r.mode, r.world_size) for r in rows] == [
        ("stack", "ddp", 2), ("stack", "ddp", 4)]
    assert rows[0].speedup.ratio == pytest.approx(1 / 0.6, rel=0.03)
    assert rows[0].efficiency == pytest.approx(1 / 0.6 / 2, rel=0.03)
    assert rows[1].efficiency == pytest.approx(0.5, rel=0.03)
    assert rows[0].speedup.ci[0] < rows[0].speedup.ratio < rows[0].speedup.ci[1]
    assert (rows[0].per_device_batch, rows[0].global_batch) == (256, 512)
    written = pages.render_files([write(tmp_path / "r", records + [lone])], tmp_path / "out")
    page = written["html"].read_text()
    summary = written["md"].read_text()
    assert "| stack | " in summary and "| ddp | 2 | " in summary and "| ddp | 4 | " in summary
    table = re.search(r'<table class="scaling">(.*?)</table>', page, flags=re.S).group(1)
    assert table.count("<tr") == 1 + 2 + 1  # header, two measured rows, the write-up's
    assert "%.2f×" % rows[0].speedup.ratio in table and "%.1f%%" % (100 * rows[1].efficiency) \
        in table
    assert 'aria-label="scaling"' in page


def test_time_and_cost_to_accuracy(tmp_path):
    records = two_stacks(random.Random(5), factor=0.66)
    written = pages.render_files([write(tmp_path / "r", records)], tmp_path / "out")
    page = written["html"].read_text()
    # By hand: the fixture's accuracy climbs 0.36, 0.42, 0.48, 0.54, ...: 50% is first
    # reached after the fourth epoch, so each repeat's time is its first four walls summed
    # (training only), and the cell's is the median over the three repeats.
    repeats = _by_cell(records)[("newer", "cpu")]
    assert all([e["test_acc"] >= 0.5 for e in r["epochs"]].index(True) == 3 for r in repeats)
    seconds = statistics.median(sum(e["wall_s"] for e in r["epochs"][:4]) for r in repeats)
    money = 0.10 * seconds / 3600  # the CPU target's 0.10 $/h
    cell = _versus_cell(page, "newer", 0)
    shown = re.search(r"to 50\.0%: (\d+\.\d+) s, \$(\d+\.\d+)", cell)
    assert shown, cell
    assert float(shown.group(1)) == pytest.approx(seconds, abs=0.005)
    assert float(shown.group(2)) == pytest.approx(money, rel=0.006)


def _run_pair(tmp_path, changes: dict[int, float], noise: float) -> tuple[Path, Path]:
    rng = random.Random(6)
    old = []
    for env in ("a", "b"):
        for target in ("gpu", "cpu"):
            for repeat in range(3):
                old.append(make_record(env, target, 256, repeat, rng))
    new = []
    for i, record in enumerate(old):
        factor = changes.get(i // 3, 1.0)  # cell index: 3 repeats each
        new.append(scaled(record, factor, rng, noise))
    return write(tmp_path / "old", old), write(tmp_path / "new", new)


def test_compare_flags_exactly_the_cell_that_is_twenty_percent_slower(tmp_path):
    old, new = _run_pair(tmp_path, {2: 1.20}, noise=0.01)  # cell 2: b × gpu
    changes = compare.compare(store.load_all([old])[0],
                              store.load_all([new])[0])
    flagged = {c.name: c.flag for c in changes if c.flag in ("regression", "improvement")}
    assert flagged == {"b × gpu × batch_size=256": "regression"}
    proc = subprocess.run([sys.executable, "-m", "envbench", "compare", str(old), str(new),
                           "--out", str(tmp_path / "cmp"), "--fail-on-regression"],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 1 and "1 regression(s)" in proc.stdout, proc.stdout + proc.stderr
    assert subprocess.run([sys.executable, "-m", "envbench", "compare", str(old), str(new),
                           "--out", str(tmp_path / "cmp")], cwd=ROOT,
                          capture_output=True).returncode == 0


def test_compare_flags_nothing_when_the_runs_differ_by_one_percent_noise(tmp_path):
    old, new = _run_pair(tmp_path, {0: 1.01, 1: 0.99, 3: 1.01}, noise=0.01)
    changes = compare.compare(store.load_all([old])[0],
                              store.load_all([new])[0])
    assert len(changes) == 4 and {c.flag for c in changes} == {"no change"}


def _steady_pair(tmp_path, factor: float) -> tuple[Path, Path]:
    """One cell, three repeats a side, epochs within ±0.1% of 10 s in OLD and of 10 × factor
    in NEW: the interval of the ratio is narrow, so the threshold alone decides."""
    rng = random.Random(7)
    runs = []
    for name, scale in (("old", 1.0), ("new", factor)):
        records = []
        for repeat in range(3):
            r = make_record("a", "cpu", 256, repeat, rng)
            for epoch in r["epochs"]:
                wall = 10.0 * scale * (1 + rng.uniform(-0.001, 0.001))
                epoch["phases_s"] = {k: v * wall / epoch["wall_s"]
                                     for k, v in epoch["phases_s"].items()}
                epoch["wall_s"] = wall
            records.append(scaled(r, 1.0))  # rates and the summary follow the epochs
        runs.append(write(tmp_path / name, records))
    return runs[0], runs[1]


def _compare_cli(old: Path, new: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "envbench", "compare", str(old), str(new),
                           "--out", str(out), *extra], cwd=ROOT, capture_output=True, text=True)


def test_the_threshold_decides_a_three_percent_slowdown(tmp_path):
    old, new = _steady_pair(tmp_path, 1.03)
    (change,) = compare.compare(store.load_all([old])[0], store.load_all([new])[0], 0.05)
    assert change.ci is not None and 1.025 < change.ci[0] <= change.ci[1] < 1.035, change.ci
    assert change.flag == "no change"  # 3% is inside the default 5%
    for threshold, flag, code in (("0.05", "no change", 0), ("0.02", "regression", 1),
                                  ("0", "regression", 1), ("0.04", "no change", 0)):
        (again,) = compare.compare(store.load_all([old])[0], store.load_all([new])[0],
                                   float(threshold))
        assert again.flag == flag and again.ratio == pytest.approx(1.03, abs=0.002)
        proc = _compare_cli(old, new, tmp_path / ("cmp" + threshold), "--threshold", threshold,
                            "--fail-on-regression")
        assert proc.returncode == code, (threshold, proc.stdout + proc.stderr)
        assert "a × cpu × batch_size=256  %s" % flag in proc.stdout, proc.stdout
        assert "beyond %g%%" % (100 * float(threshold)) in proc.stdout
    # And the other way: 3% faster is an improvement only under a threshold below 3%.
    (faster,) = compare.compare(*(store.load_all([p])[0] for p in _steady_pair(
        tmp_path / "f", 1 / 1.03)), 0.02)
    assert faster.flag == "improvement"


def test_a_change_is_flagged_only_when_the_whole_interval_is_beyond_the_threshold():
    at = 1.0 + 0.05
    assert compare._flag((at, 1.3), 0.05) == "no change"  # on the line is not beyond it
    assert compare._flag((at + 1e-9, 1.3), 0.05) == "regression"
    assert compare._flag((0.7, 1.0 / at), 0.05) == "no change"
    assert compare._flag((0.7, 1.0 / at - 1e-9), 0.05) == "improvement"
    assert compare._flag((0.9, 1.1), 0.05) == "no change"
    assert compare._flag(None, 0.05) == "no interval (fewer than 3 clean repeats a side)"


def test_the_gate_fails_on_a_cell_the_new_run_lost_and_not_on_one_it_added(tmp_path):
    old, new = _run_pair(tmp_path, {}, noise=0.01)
    broken = sorted(new.glob("*.json"))[:3]  # cell 0 (a × gpu), its three repeats
    for path in broken:
        record = result.json.loads(path.read_text())
        record.update(status="failed", epochs=[],
                      error={"type": "OutOfMemory", "message": "CUDA out of memory"})
        record["summary"].update(epoch_s_median=None, first_epoch_s=None, samples_per_s=None,
                                 final_test_acc=None)
        result.write_atomic(str(path), record)
    flags = {c.name: (c.flag, c.ratio) for c in compare.compare(
        store.load_all([old])[0], store.load_all([new])[0])}
    assert flags["a × gpu × batch_size=256"] == ("failed in the new run", None)
    assert {flag for flag, _ in flags.values()} == {"failed in the new run", "no change"}
    flags = {c.name: c.flag for c in compare.compare(store.load_all([new])[0],
                                                      store.load_all([old])[0])}
    assert flags["a × gpu × batch_size=256"] == "failed in the old run"
    proc = _compare_cli(old, new, tmp_path / "failed", "--fail-on-regression")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "a × gpu × batch_size=256  failed in the new run" in proc.stdout
    assert "0 regression(s), 0 improvement(s) beyond 5%; 1 cell(s) failed or missing in NEW" \
        in proc.stdout
    assert _compare_cli(old, new, tmp_path / "report-only").returncode == 0  # no gate asked
    # Missing from NEW: the same verdict. Added in NEW (OLD lacks it): no failure.
    for path in broken:
        path.unlink()
    lost = {c.name: c for c in compare.compare(store.load_all([old])[0],
                                               store.load_all([new])[0])}
    assert (lost["a × gpu × batch_size=256"].flag, lost["a × gpu × batch_size=256"].new) == (
        "only in the old run", None)
    assert lost["a × gpu × batch_size=256"].old is not None
    added = {c.name: c for c in compare.compare(store.load_all([new])[0],
                                                store.load_all([old])[0])}
    assert (added["a × gpu × batch_size=256"].flag, added["a × gpu × batch_size=256"].old) == (
        "only in the new run", None)
    assert added["a × gpu × batch_size=256"].new is not None
    assert len(lost) == len(added) == 4  # the union of both runs' cells
    proc = _compare_cli(old, new, tmp_path / "missing", "--fail-on-regression")
    assert proc.returncode == 1 and "only in the old run" in proc.stdout, proc.stdout
    proc = _compare_cli(new, old, tmp_path / "added", "--fail-on-regression")
    assert proc.returncode == 0 and "only in the new run" in proc.stdout, proc.stdout


def test_compare_pages_count_what_they_flag_and_land_where_asked(tmp_path):
    old, new = _run_pair(tmp_path, {2: 1.20, 1: 1 / 1.2}, noise=0.01)  # b×gpu, a×cpu
    changes = compare.compare(store.load_all([old])[0], store.load_all([new])[0])
    assert {c.name: c.flag for c in changes if c.flag != "no change"} == {
        "b × gpu × batch_size=256": "regression", "a × cpu × batch_size=256": "improvement"}
    out = tmp_path / "not" / "there" / "yet"
    for _ in range(2):  # a folder that does not exist yet, then the same one again
        written = compare.render(changes, "old", "new", 0.05, out, [])
    assert written == {"html": out / "compare.html", "md": out / "compare.md"}
    assert sorted(p.name for p in out.iterdir()) == ["compare.html", "compare.md"]
    assert "1 regression(s), 1 improvement(s) beyond 5%" in written["md"].read_text()
    page = written["html"].read_text()
    assert '<span class="muted">Regressions</span><b class="bad">1</b>' in page
    assert '<span class="muted">Improvements</span><b class="ok">1</b>' in page


def _contended(record: dict) -> dict:
    record["noise"] = {"host": None, "gpu": None, "unavailable": None, "contended": True,
                       "reasons": ["another process took 40% of the cell's cores"]}
    return record


def test_compare_leaves_contended_repeats_out_unless_asked(tmp_path):
    """One of three new repeats of a × gpu ran contended: without it two clean repeats are
    left, too few for an interval; --keep-contended takes it and has three."""
    old, new = _run_pair(tmp_path, {}, noise=0.01)
    first = sorted(new.glob("*.json"))[0]
    clean = first.read_text()
    result.write_atomic(str(first), _contended(result.json.loads(clean)))
    before, after = store.load_all([old])[0], store.load_all([new])[0]
    left_out = {c.name: c for c in compare.compare(before, after)}["a × gpu × batch_size=256"]
    assert left_out.flag == "no interval (fewer than 3 clean repeats a side)"
    assert left_out.ratio is not None and left_out.ci is None
    kept = {c.name: c for c in compare.compare(before, after, keep_contended=True)}[
        "a × gpu × batch_size=256"]
    assert kept.flag == "no change" and kept.ci is not None
    # The same on the old side: its contended repeat is left out, or kept when asked.
    old_first = sorted(old.glob("*.json"))[0]
    result.write_atomic(str(old_first), _contended(result.json.loads(old_first.read_text())))
    first.write_text(clean)  # NEW clean again
    before, after = store.load_all([old])[0], store.load_all([new])[0]
    changes = {c.name: c for c in compare.compare(before, after)}
    assert changes["a × gpu × batch_size=256"].ci is None
    kept = {c.name: c for c in compare.compare(before, after, keep_contended=True)}
    assert kept["a × gpu × batch_size=256"].ci is not None
    assert all(c.old is not None and c.new is not None for c in kept.values())


def test_compare_names_a_quick_synthetic_cell_with_both_marks(tmp_path):
    rng = random.Random(8)
    records = []
    for repeat in range(3):
        r = make_record("a", "cpu", 256, repeat, rng, quick=True)
        r["config"].update(synthetic=True, data=None)
        r["cell"]["data"] = {"source": "synthetic", "sha256": None}
        records.append(r)
    folder = write(tmp_path / "run", records)
    (change,) = compare.compare(store.load_all([folder])[0], store.load_all([folder])[0])
    assert change.name == "a × cpu × batch_size=256 (quick synthetic data)", change.name


def test_compare_says_which_image_and_lock_changed(tmp_path):
    old, new = _run_pair(tmp_path, {}, noise=0.0)
    for path in new.glob("*.json"):
        record = result.json.loads(path.read_text())
        if record["cell"]["environment"] == "a":
            record["env"]["image"].update(id="sha256:" + "9" * 64, lock_sha256="f" * 64)
        result.write_atomic(str(path), record)
    changes = {c.name: c for c in compare.compare(store.load_all([old])[0],
                                                  store.load_all([new])[0])}
    labels = {label for label, _, _ in changes["a × cpu × batch_size=256"].differences}
    assert labels == {"image", "lock"}
    assert changes["b × cpu × batch_size=256"].differences == ()


def test_compare_shows_each_image_where_a_run_holds_a_cell_in_two(tmp_path):
    """The new run holds a × cpu in its old image and in another one 30% slower: both rows
    are shown, the old image paired with the old run, the other on its own; nothing is
    silently kept in place of the other."""
    old, new = _run_pair(tmp_path, {}, noise=0.0)
    other = "sha256:" + "7" * 64
    extra = []
    for path in sorted(new.glob("*.json")):
        record = result.json.loads(path.read_text())
        if (record["cell"]["environment"], record["cell"]["target"]) == ("a", "cpu"):
            copy_ = scaled(record, 1.3)
            copy_["env"]["image"]["id"] = other
            extra.append(copy_)
    assert len(extra) == 3
    for i, record in enumerate(extra):
        result.write_atomic(str(new / ("other-%d.json" % i)), record)
    old_id = next(r["env"]["image"]["id"] for r in map(result.json.loads, (
        p.read_text() for p in old.glob("*.json"))) if r["cell"]["environment"] == "a")
    changes = {c.name: c for c in compare.compare(store.load_all([old])[0],
                                                  store.load_all([new])[0])}
    same = "a × cpu × batch_size=256 (image %s)" % old_id[7:19]
    assert changes[same].flag == "no change" and changes[same].ratio == pytest.approx(1.0)
    assert changes["a × cpu × batch_size=256 (image 777777777777)"].flag == \
        "only in the new run"
    assert "a × cpu × batch_size=256" not in changes  # no row stands for both
    assert changes["b × cpu × batch_size=256"].flag == "no change"  # one image: as before


def test_compare_shows_each_of_two_runs_of_one_image_with_other_resources(tmp_path):
    """The new run holds b × cpu twice in the same image, once on half the cores: two rows,
    each named by its run; none stands for both."""
    old, new = _run_pair(tmp_path, {}, noise=0.0)
    for path in sorted(new.glob("*.json")):
        record = result.json.loads(path.read_text())
        if (record["cell"]["environment"], record["cell"]["target"]) == ("b", "cpu"):
            half = scaled(record, 1.5)
            half["cell"]["resources"].update(cpus=4, cpuset="0-3", threads=4)
            result.write_atomic(str(new / ("half-%s" % path.name)), half)
    changes = [c for c in compare.compare(store.load_all([old])[0], store.load_all([new])[0])
               if c.name.startswith("b × cpu")]
    assert len(changes) == 2, [c.name for c in changes]
    assert all(re.fullmatch(r"b × cpu × batch_size=256 \(run [0-9a-f]{8}\)", c.name)
               for c in changes), [c.name for c in changes]
    assert len({c.name for c in changes}) == 2
    # The run on all the cores pairs with the old run's; the other is new.
    assert sorted(c.flag for c in changes) == ["no change", "only in the new run"]


def test_compare_shows_what_changed_in_the_stack_and_keeps_the_page_guarantees(tmp_path):
    old, new = _run_pair(tmp_path, {0: 1.3}, noise=0.0)
    for path in new.glob("*.json"):
        record = result.json.loads(path.read_text())
        if record["cell"]["environment"] == "a":
            record["env"]["torch"] = "2.6.0"
            record["cell"]["environment"] = "a"
        result.write_atomic(str(path), record)
    first = compare.render(compare.compare(store.load_all([old])[0],
                                           store.load_all([new])[0]),
                           "<b>old</b>", "new", 0.05, tmp_path / "one", [])
    again = compare.render(compare.compare(store.load_all([old])[0],
                                           store.load_all([new])[0]),
                           "<b>old</b>", "new", 0.05, tmp_path / "two", [])
    for kind in ("html", "md"):
        assert first[kind].read_bytes() == again[kind].read_bytes()
    page = first["html"].read_text()
    assert "torch: <code>2.5.1</code> → <code>2.6.0</code>" in page
    assert "<b>old</b>" not in page and "&lt;b&gt;old&lt;/b&gt;" in page
    assert not re.search(r'(src|href)\s*=\s*["\']?(https?:)?//', page, flags=re.I)
    assert not re.search(r"url\((?!#)|@import|<link|<script|<iframe", page, flags=re.I)
    assert "default-src 'none'" in page


def test_the_compare_page_renders_in_a_browser(tmp_path):
    from browser import assert_drawn, screenshot

    old, new = _run_pair(tmp_path, {2: 1.2}, noise=0.01)
    written = compare.render(compare.compare(store.load_all([old])[0],
                                             store.load_all([new])[0]),
                             str(old), str(new), 0.05, tmp_path / "cmp", [])
    assert_drawn(screenshot(written["html"], tmp_path, height=900))


def _two_groups(repeats_newer: int = 3) -> tuple[grouping.Group, grouping.Group]:
    records = [r for r in two_stacks(random.Random(1), factor=0.66)
               if r["cell"]["target"] == "cpu" and not (
                   r["cell"]["environment"] == "newer" and r["cell"]["repeat"] >= repeats_newer)]
    groups = {g.environment: g for g in grouping.group(viewed(records))}
    return groups["newer"], groups["zz-seed"]


@pytest.mark.parametrize("ratio, ci, text", [
    (1.523, (1.491, 1.554), "1.52× faster (1.49–1.55)"),
    (0.5, (0.4, 0.625), "2.00× slower (1.60–2.50)"),
    # The interval decides, at its very edge: touching 1 is no verdict either way.
    (1.1, (1.0, 1.2), "no difference at this noise (1.00–1.20)"),
    (0.9, (0.8, 1.0), "no difference at this noise (0.80–1.00)"),
    (1.3, (0.99, 1.61), "no difference at this noise (0.99–1.61)"),
])
def test_the_verdict_in_words_is_exactly_what_the_interval_says(ratio, ci, text):
    assert headtohead.in_words(ratio, ci) == text


def test_a_verdict_without_an_interval_or_a_comparison_says_so_exactly():
    newer, seed = _two_groups(repeats_newer=2)
    s = grouping.speedup(newer, seed)
    ratio = seed.epoch_s / newer.epoch_s
    assert s is not None and s.ci is None
    assert headtohead.verdict(s) == (
        "%.2f× (too few repeats for an interval: 2 and 3, 3 needed a side)" % ratio)
    assert headtohead.verdict(None) == "—"


def test_no_difference_says_what_the_repeats_would_have_seen_and_what_five_percent_needs():
    """The figures of "no difference" worked out apart from the kit: Welch's t on the logs
    of the repeats' medians (scipy), the smallest difference with 80% power at the level
    the comparison was tested at, and the repeats a side that would find 5%."""
    rng = random.Random(1)
    records = [make_record(env, "cpu", 256, repeat, rng, factor=1 + rng.gauss(0, 0.05))
               for env in ("zz-seed", "newer") for repeat in range(4)]
    groups = {g.environment: g for g in grouping.group(viewed(records))}
    newer, seed = groups["newer"], groups["zz-seed"]
    s = grouping.speedup(newer, seed)
    assert s is not None and isinstance(s.test, verdicts.Test)
    assert headtohead.verdict(s).startswith("no difference at this noise")
    a = [math.log(statistics.median(e.wall_s for e in r.steady_epochs)) for r in seed.clean]
    b = [math.log(statistics.median(e.wall_s for e in r.steady_epochs)) for r in newer.clean]
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))

    def power(shift, df, alpha=0.05):  # the noncentral t's two tails past the critical value
        crit = scipy_stats.t.isf(alpha / 2, df)
        return scipy_stats.nct.sf(crit, df, shift) + scipy_stats.nct.sf(crit, df, -shift)

    seen = math.expm1(scipy_optimize.brentq(lambda d: power(d, df) - 0.8, 0.1, 12) * se)
    text = headtohead.could_have_seen(s)
    assert seen > 0.05  # so that the repeats a 5% difference needs are stated too
    assert text.startswith("would have seen ≥ %.0f%%;" % (100 * seen)), text
    sa, sb = statistics.variance(a), statistics.variance(b)
    n = next(n for n in range(3, 100000) if power(
        math.log(1.05) / math.sqrt((sa + sb) / n),
        (sa + sb) ** 2 / ((sa ** 2 + sb ** 2) / (n - 1))) >= 0.8)
    assert text.endswith("; 5% would need {:,} repeats a side".format(n)), text


def test_the_baseline_environment_is_the_one_asked_else_the_write_ups_else_the_first():
    newer, seed = _two_groups()
    assert headtohead.baseline_environment([newer, seed], "newer") == "newer"
    assert headtohead.baseline_environment([newer, seed], "absent") is None  # not measured
    assert headtohead.baseline_environment([newer, seed], None) == "zz-seed"  # by its stack
    assert headtohead.baseline_environment([newer], None) == "newer"  # no write-up stack
    assert headtohead.baseline_environment([], None) is None


def test_the_head_to_head_table_puts_the_baseline_first_and_names_its_variant_and_marks():
    """Rows: the baseline first even where its name sorts last, then the others by name;
    the table's title parts are the variant's text and the marks, space-separated."""
    rng = random.Random(5)
    records = []
    for env in ("zz-seed", "newer", "aa-older"):
        for repeat in range(3):
            r = make_record(env, "cpu", 256, repeat, rng, quick=True)
            r["cell"]["data"] = {"source": "synthetic", "sha256": None}
            records.append(r)
    tables = headtohead.tables(grouping.group(viewed(records)), "zz-seed")
    assert len(tables) == 1
    (table,) = tables
    assert (table.variant, table.marks) == ("batch_size=256", "quick synthetic data")
    assert [name for name, _ in table.rows] == ["zz-seed", "aa-older", "newer"]
    assert table.targets == [("cpu", CPU)]
    base = table.rows[0][1]["cpu"]
    assert base.is_baseline and base.versus is None and base.verdict == "baseline"
    other = table.rows[1][1]["cpu"]
    assert not other.is_baseline and other.versus.baseline is base.group


def _sensed(record: dict, other_share: float, steal_share: float) -> dict:
    """A clean repeat on which the host sensors saw some other use of the cell's cores."""
    record["noise"] = {"host": {"cores": [0, 1], "samples": 10, "other_cpu_s": 0.1,
                                "steal_s": 0.0, "other_cpu_share": other_share,
                                "steal_share": steal_share},
                       "gpu": None, "unavailable": None, "contended": False, "reasons": []}
    return record


def test_only_a_gpu_over_a_cpu_is_the_largest_gpu_cpu_speedup():
    """A GPU over another GPU, or a CPU over a CPU, is no GPU/CPU speedup, however large."""
    records = two_stacks(random.Random(3), factor=0.66)
    groups = grouping.group(viewed(records))
    on = {(g.environment, g.target): g for g in groups}
    gpu_cpu = grouping.Speedup(on[("newer", "gpu")], on[("newer", "cpu")], 8.2, None)
    noise = {"a": grouping.Speedup(on[("newer", "gpu")], on[("zz-seed", "gpu")], 50.0, None),
             "b": grouping.Speedup(on[("newer", "cpu")], on[("zz-seed", "cpu")], 40.0, None),
             "c": grouping.Speedup(on[("newer", "cpu")], on[("zz-seed", "gpu")], 30.0, None),
             "d": gpu_cpu}
    cards = {q: (a, w) for q, a, w in headtohead.cards(groups, noise)}
    assert cards["Largest GPU/CPU speedup"] == (
        "8.20×", "newer · %s · batch_size=256 over %s" % (GPU, CPU))


def test_cards_break_ties_by_order_and_name_what_the_sensors_saw():
    """Two stacks with identical epochs cost the same and are as noisy: the cards still
    answer (the first in the report's order), and the noisiest says what was sensed."""
    rng = random.Random(8)
    records = []
    for repeat in range(3):
        one = make_record("one", "cpu", 256, repeat, rng)
        two = copy.deepcopy(one)
        two["cell"]["environment"] = "two"
        records += [_sensed(one, 0.02 * (repeat + 1), 0.0), _sensed(two, 0.0, 0.03)]
    groups = grouping.group(viewed(records))
    cards = {q: (a, w) for q, a, w in headtohead.cards(groups, {})}
    assert cards["Cheapest per run"][1] == "one · %s · batch_size=256" % CPU
    answer, where = cards["Noisiest cell"]
    assert where == "one · %s · batch_size=256; sensors: other processes used at most 6%% " \
        "of its cores" % CPU
    # The other one, alone: steal is what its sensors saw.
    alone = [g for g in groups if g.environment == "two"]
    cards = {q: (a, w) for q, a, w in headtohead.cards(alone, {})}
    assert cards["Noisiest cell"][1] == "two · %s · batch_size=256; sensors: other processes " \
        "used at most 0%% of its cores; steal up to 3%%" % CPU


def test_the_contended_card_counts_what_was_left_out_and_why_and_the_noisiest_its_cv():
    rng = random.Random(9)
    records = []
    for repeat, factor in enumerate((1.0, 1.5, 2.0)):  # repeat medians m, 1.5 m, 2 m
        records.append(scaled(make_record("wide", "cpu", 256, repeat, rng), factor))
    long_reason = "a throttling GPU " + "x" * 250  # a reason is 300 characters at most
    for repeat in range(5):
        r = make_record("calm", "cpu", 256, repeat, rng)
        if repeat == 3:
            _contended(r)
        if repeat == 4:  # another share, said with the first as one range
            _contended(r)["noise"]["reasons"] = ["another process took 47% of the cell's cores"]
        records.append(r)
    extra = make_record("calm", "gpu", 256, 0, rng)
    extra["noise"] = {"host": None, "gpu": None, "unavailable": None, "contended": True,
                      "reasons": [long_reason]}
    records.append(extra)
    cards = {q: (a, w) for q, a, w in headtohead.cards(grouping.group(viewed(records)), {})}
    # Nine finished repeats, three of them contended; the reasons sorted, those that differ
    # only in their share said once with the range, joined, cut at 300.
    assert cards["Contended repeats"] == (
        "3 of 9 left out",
        ("a throttling GPU " + "x" * 250 + "; another process took 40–47% of the cell's "
         "cores")[:300])
    # CV over the repeat medians, about m, 1.5 m, 2 m (sd 0.5 m over mean 1.5 m, a third),
    # worked out from the raw epochs with the standard library.
    medians = [statistics.median(e["wall_s"] for e in r["epochs"][1:]) for r in records[:3]]
    cv = statistics.stdev(medians) / statistics.mean(medians)
    assert 0.3 < cv < 0.37 and cards["Noisiest cell"][0] == "CV %.1f%%" % (100 * cv)


def test_a_cell_without_a_variant_is_named_by_stack_and_target_alone():
    records = []
    for repeat in range(3):
        r = make_record("plain", "cpu", 256, repeat, random.Random(repeat))
        r["cell"]["variant"] = {}
        records.append(r)
    cards = {q: (a, w) for q, a, w in headtohead.cards(grouping.group(viewed(records)), {})}
    assert cards["Fastest configuration"][1] == "plain · %s" % CPU


def _failed_repeat(record: dict) -> dict:
    """The same cell, failed: an error, no epochs, no figures."""
    record["status"] = "failed"
    record["error"] = {"type": "OutOfMemory", "message": "killed"}
    record["summary"] = dict.fromkeys(result.REQUIRED["summary"])
    record["epochs"] = []
    return record


def test_the_ladder_steps_past_an_option_that_failed_and_shows_a_slower_one_as_slower():
    """pipeline=resident failed in every repeat: the ladder goes on with amp, whose two
    values were both slower than off; the faster of them is the step, below 1×. A start
    whose every repeat failed has no ladder, though the steps from it ran."""
    rng = random.Random(10)
    seconds = {("classic", "off"): 1.0, ("classic", "bf16"): 1.25, ("classic", "fp16"): 1.6,
               ("resident", "off"): None}
    records = []
    for batch in (256, 32):
        for (pipeline, amp), factor in seconds.items():
            for repeat in range(2):
                r = make_record("stack", "cpu", batch, repeat, rng)
                r["cell"]["variant"] = {"batch_size": batch, "pipeline": pipeline, "amp": amp}
                r["config"].update(pipeline=pipeline, amp=amp)
                if factor is None or (batch, pipeline, amp) == (32, "classic", "off"):
                    records.append(_failed_repeat(r))  # batch 32: its start failed
                else:
                    records.append(scaled(r, factor))
    chains = headtohead.ladder(grouping.group(viewed(records)))
    assert len(chains) == 1 and chains[0]["start"].batch_size == 256
    (step,) = chains[0]["steps"]
    assert (step["option"], step["value"]) == ("amp", "bf16")
    cells = _by_cell_variant(records)
    start = _median_epoch(cells[(256, "classic", "off")])
    bf16 = _median_epoch(cells[(256, "classic", "bf16")])
    assert step["step"] == pytest.approx(start / bf16) and step["step"] < 1
    assert step["total"] == pytest.approx(start / bf16)


def _by_cell_variant(records: list[dict]) -> dict[tuple, list[dict]]:
    cells: dict[tuple, list[dict]] = {}
    for r in records:
        v = r["cell"]["variant"]
        cells.setdefault((v["batch_size"], v["pipeline"], v["amp"]), []).append(r)
    return cells


def _model(record: dict, name: str, parameters: int, flops: int,
           quantised: tuple | None = None) -> dict:
    out = copy.deepcopy(record)
    out["cell"]["variant"] = {"workload": name}
    out["config"].update(workload=name, quantize_eval="off" if quantised is None else "dynamic")
    out["model"] = dict(out["model"], name=name, parameters=parameters, flops_per_image=flops,
                        flops={"forward": flops, "train": 3 * flops, "method": "hooks",
                               "note": None})
    if quantised is not None:
        keys = ("float_test_acc", "float_test_s", "test_acc", "test_s", "float_weight_bytes",
                "weight_bytes")
        out["quantized_eval"] = dict({"method": "dynamic", "device": "cpu"},
                                     **{k: v for k, v in zip(keys, quantised)})
    return out


def test_the_models_table_gives_each_groups_model_and_its_median_quantised_pass(tmp_path):
    rng = random.Random(8)
    # Per repeat: float acc, float s, int8 acc, int8 s, float weight bytes, int8 weight bytes.
    passes = [(0.60, 2.0, 0.58, 1.2, None, 70_000),
              (0.62, 2.4, 0.59, 1.0, None, 69_000),
              (0.61, 2.2, 0.57, 1.1, None, None)]
    records = []
    for repeat in range(3):
        r = make_record("stack", "cpu", 256, repeat, rng)
        records += [_model(r, "lenet", 62006, 1303440),
                    _model(r, "lenet-dws", 9_000, 400_000, passes[repeat])]
    # LeNet alone, quantised nowhere: there is nothing to compare, so no table.
    assert scaling.model_rows(grouping.group(viewed(records[::2]))) == []
    rows = scaling.model_rows(grouping.group(viewed(records)))
    by_model = {row.model.name: row for row in rows}
    assert sorted(by_model) == ["lenet", "lenet-dws"]
    assert (by_model["lenet"].model.parameters, by_model["lenet"].model.flops_per_image,
            by_model["lenet"].quantized) == (62006, 1303440, None)
    assert by_model["lenet-dws"].group.variant == {"workload": "lenet-dws"}
    # Medians over the repeats, each figure on its own; a figure no repeat has stays None,
    # and one two repeats have is the median of those two.
    assert by_model["lenet-dws"].quantized == {
        "float_test_acc": 0.61, "float_test_s": 2.2, "test_acc": 0.58, "test_s": 1.1,
        "float_weight_bytes": None, "weight_bytes": 69_500}
    page = pages.render_files([write(tmp_path / "r", records)], tmp_path / "out")["html"] \
        .read_text()
    table = re.search(r'<table class="models">(.*?)</table>', page, flags=re.S).group(1)
    dws = next(row for row in table.split("<tr>") if "<td>lenet-dws</td>" in row)
    assert "9,000" in dws and "0.0004 · 0.0012" in dws  # parameters; GFLOPs per image
    assert "61.0% / 2.20<" in dws and "58.0% / 1.10<" in dws, dws
    assert "— / 67.87 KiB" in dws  # 69,500 bytes; the float weights' size is unknown


def test_a_quantised_pass_alone_makes_the_models_table(tmp_path):
    rng = random.Random(9)
    records = [_model(make_record("stack", "cpu", 256, repeat, rng), "lenet", 62006, 1303440,
                      (0.6, 2.0, 0.59, 1.0, 247_000, 70_000)) for repeat in range(2)]
    # One finished repeat is enough; a group before it that never finished does not end
    # the table.
    never = copy.deepcopy(records[1])
    never["cell"]["environment"] = "a-first"
    never.update(status="failed", error={"type": "BuildFailed", "message": "x"}, epochs=[])
    (row,) = scaling.model_rows(grouping.group(viewed([never, records[0]])))
    assert row.quantized["weight_bytes"] == 70_000 and row.model.name == "lenet"
    # A group none of whose repeats ran has no row (it has no model to show).
    for r in records:
        r.update(status="failed", error={"type": "BuildFailed", "message": "x"}, epochs=[])
    assert scaling.model_rows(grouping.group(viewed(records))) == []


def test_one_device_is_the_plain_loop_else_the_same_mode_with_one_rank():
    """Each dp/ddp group is scaled against the plain loop where it ran, else the one-rank run
    of its own mode; a group without a finished repeat is neither a row nor a baseline."""
    rng = random.Random(10)
    records = []
    seconds = {("with-none", "none", 1): 1.0, ("with-none", "ddp", 1): 0.9,
               ("with-none", "dp", 1): 0.95, ("with-none", "ddp", 2): 0.6,
               ("no-none", "ddp", 1): 0.9, ("no-none", "dp", 1): 0.8,
               ("no-none", "dp", 2): 0.5}
    for (env, mode, world), factor in seconds.items():
        for repeat in range(3):
            r = make_record(env, "cpu", 256, repeat, rng)
            records.append(scaled(_parallel(r, mode, world), factor))
    # A failed plain loop in the second stack: not what dp is scaled against.
    failed = _parallel(make_record("no-none", "cpu", 256, 0, rng), "none", 1)
    failed.update(status="failed", error={"type": "ContainerError", "message": "x"}, epochs=[])
    groups = grouping.group(viewed(records + [failed]))
    rows = {(r.group.environment, r.mode, r.world_size): r for r in scaling.rows(groups)}
    against = {key: (parallel_of.mode, parallel_of.world_size) for key, parallel_of in (
        (key, scaling.parallel_of(row.one_device)) for key, row in rows.items())}
    assert against == {("no-none", "ddp", 1): ("dp", 1), ("no-none", "dp", 1): ("ddp", 1),
                       ("no-none", "dp", 2): ("dp", 1),
                       ("with-none", "ddp", 1): ("none", 1),
                       ("with-none", "ddp", 2): ("none", 1),
                       ("with-none", "dp", 1): ("none", 1)}
    by_hand = statistics.median(
        statistics.median(e["wall_s"] for e in r["epochs"][1:]) for r in records
        if r["cell"]["environment"] == "no-none" and r["parallel"]["mode"] == "dp"
        and r["parallel"]["world_size"] == 1)
    assert rows[("no-none", "dp", 2)].one_device.epoch_s == pytest.approx(by_hand)


def test_a_group_that_never_finished_reports_the_parallel_layout_it_asked_for():
    rng = random.Random(11)
    asked = _parallel(make_record("stack", "cpu", 64, 0, rng), "ddp", 2)
    asked["config"]["batch_size"] = 64
    asked.update(status="failed", error={"type": "ContainerError", "message": "x"}, epochs=[],
                 parallel=None)
    (group,) = grouping.group(viewed([asked]))
    got = scaling.parallel_of(group)
    assert (got.mode, got.world_size, got.backend, got.per_device_batch, got.global_batch) == (
        "ddp", 2, None, 64, 128)
    # A failed run that recorded its layout (it started, then failed) is read as it says.
    started = copy.deepcopy(asked)
    started["parallel"] = dict(_parallel(make_record("stack", "cpu", 64, 0, rng), "ddp", 2)
                               ["parallel"], per_device_batch=64, global_batch=128)
    (group,) = grouping.group(viewed([started]))
    assert scaling.parallel_of(group).backend == "gloo"
    plain = copy.deepcopy(asked)
    plain["config"].update(parallel="none", nproc=None)
    (group,) = grouping.group(viewed([plain]))
    got = scaling.parallel_of(group)
    assert (got.mode, got.world_size, got.global_batch) == ("none", 1, 64)
