"""Verdicts as the page gives them: each page's verdict is the calibrated test's on the
files it read, the page's comparisons are tested together as Holm says, and the harness's
short run (perf/verdict_calibration.py --short) holds the false-verdict rate to 5%."""
from __future__ import annotations

import importlib.util
import json
import math
import random
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import scipy.stats as scipy_stats
from report_fixture import make_record

from bench import result
from envbench.report import pages
from envbench.report.formats import confidence

ROOT = Path(__file__).resolve().parents[2]


def _harness():
    """perf/verdict_calibration.py as a module (its dataclasses need it registered)."""
    if "verdict_calibration" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "verdict_calibration", ROOT / "perf" / "verdict_calibration.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    return sys.modules["verdict_calibration"]


def _logs_of(folder: Path) -> dict[tuple[str, str], list[float]]:
    """Each cell's log repeat figures, read from the files apart from the kit: the median
    of the epochs after the first, per repeat."""
    out: dict[tuple[str, str], list[float]] = {}
    for path in sorted(folder.glob("*.json")):
        record = json.loads(path.read_text())
        steady = [e["wall_s"] for e in record["epochs"][1:]]
        out.setdefault((record["cell"]["environment"], record["cell"]["target"]), []).append(
            math.log(statistics.median(steady)))
    return out


def _welch(a: list[float], b: list[float]):
    return scipy_stats.ttest_ind(a, b, equal_var=False)


def test_each_pages_verdict_is_the_welch_test_of_the_files_it_read(tmp_path):
    """40 pages through `envbench report`: identical stacks at 3 repeats a side (10% apart:
    "no difference" pages among them) and a stack 20% slower at 6. Each page's words are
    what Welch's t (scipy) at 5% says of the files it was given, nothing else."""
    harness = _harness()
    rng = random.Random(47)
    kinds = [(3, 0.0, harness.lognormal(0.10))] * 30 + [(6, 0.20, harness.lognormal(0.05))] * 10
    said = {"faster": 0, "slower": 0, "no difference": 0}
    for i, (repeats, effect, noise) in enumerate(kinds):
        folder = tmp_path / str(i)
        harness.write_set(folder / "results", rng, noise, repeats, effect)
        verdict = harness.page_verdict(folder / "results", folder / "page")
        logs = _logs_of(folder / "results")
        # The page's row is b-stack against the baseline a-stack: "faster" is a slower.
        test = _welch(logs[("a-stack", "cpu")], logs[("b-stack", "cpu")])
        low, high = test.confidence_interval(0.95)
        expected = "faster" if low > 0 else ("slower" if high < 0 else "no difference")
        assert verdict == expected, (i, verdict, test)
        said[verdict] += 1
    print("pages:", said)
    assert said["no difference"] >= 20 and said["faster"] >= 8


def _three_stacks(rng: random.Random) -> list[dict]:
    """Three stacks on a GPU and a CPU, three repeats each, the repeats 3% apart."""
    records = []
    for target in ("gpu", "cpu"):
        for env, factor in (("zz-seed", 1.0), ("newer", 0.9), ("newest", 0.97)):
            for repeat in range(3):
                records.append(make_record(env, target, 256, repeat, rng, torch="1.12.1+cu116"
                                           if env == "zz-seed" else "2.5.1", cuda="11.6",
                                           factor=factor * math.exp(rng.gauss(0, 0.03))))
    return records


def _holm(pvalues: dict) -> dict:
    """Holm's step-down as its definition says: the level each is tested at."""
    order = sorted(pvalues, key=pvalues.get)
    levels, stopped = {}, None
    for rank, key in enumerate(order):
        level = stopped or 0.05 / (len(order) - rank)
        if stopped is None and not pvalues[key] < level:
            stopped = level
        levels[key] = level
    return levels


def test_the_pages_comparisons_are_tested_together_at_holms_levels(tmp_path):
    folder = tmp_path / "r"
    folder.mkdir()
    for i, record in enumerate(_three_stacks(random.Random(5))):
        result.write_atomic(str(folder / ("%03d.json" % i)), record)
    page = pages.render_files([folder], tmp_path / "out")["html"].read_text()
    logs = _logs_of(folder)
    pvalues = {}
    for target in ("gpu", "cpu"):  # each stack against the write-up's on the same target
        for env in ("newer", "newest"):
            pvalues[(env, target)] = _welch(logs[("zz-seed", target)],
                                            logs[(env, target)]).pvalue
    for env in ("zz-seed", "newer", "newest"):  # each GPU cell over its CPU baseline
        pvalues[(env, "gpu over cpu")] = _welch(logs[(env, "cpu")], logs[(env, "gpu")]).pvalue
    levels = _holm(pvalues)
    assert "7 comparisons, tested together (Holm&#39;s step-down): at most a 5% chance" in page
    for env in ("newer", "newest"):
        row = re.search(r'<tr data-env="%s">(.*?)</tr>' % env, page, flags=re.S).group(1)
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row, flags=re.S)
        for column, target in enumerate(("cpu", "gpu")):  # the page's target order
            assert "; %s interval" % confidence(levels[(env, target)]) in cells[column], (
                env, target, cells[column], levels)
    for env in ("zz-seed", "newer", "newest"):
        table = re.search(r'<table class="headline" data-environment="%s"[^>]*>(.*?)</table>'
                          % env, page, flags=re.S).group(1)
        assert "(%s)" % confidence(levels[(env, "gpu over cpu")]) in table, (env, levels)


def test_the_harness_short_run_holds_false_verdicts_to_five_percent():
    proc = subprocess.run([sys.executable, "perf/verdict_calibration.py", "--short",
                           "--trials", "3000"], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    table = re.findall(r"^\| (\d repeats|auto, up to \d+) \| (\d+\.\d)% ± (\d+\.\d) \|$",
                       proc.stdout, flags=re.M)
    assert [row[0] for row in table] == ["%d repeats" % n for n in range(3, 9)] + [
        "auto, up to 6", "auto, up to 10"]


@pytest.mark.parametrize("hits, expected", [(150, 0), (173, 0), (174, 1), (260, 1)])
def test_the_harness_fails_where_the_lower_bound_passes_five_percent(hits, expected):
    """Its gate, at its edge: of 3000, 173 (5.77%) has a lower bound of 4.99%, 174 of
    5.02%."""
    rate = _harness().Rate(hits, 3000)
    low, _ = rate.wilson()
    assert (low > 0.05) == bool(expected)
    ci = scipy_stats.binomtest(hits, 3000).proportion_ci(method="wilson")
    assert low == pytest.approx(ci.low, abs=1e-9)


def test_compares_cells_are_tested_together_on_their_change_beyond_the_threshold(tmp_path):
    """Four cells, two made 8% and 25% slower: each cell's level is Holm's over the p-values
    of a change beyond 5%, worked out with scipy from the files (the shifted Welch
    statistic), and each flag is its interval at that level against the threshold."""
    from envbench.report import compare
    from envbench.results import store
    rng = random.Random(11)
    folders = {"old": tmp_path / "old", "new": tmp_path / "new"}
    for folder in folders.values():
        folder.mkdir()
    slower = {("b", "gpu"): 1.08, ("b", "cpu"): 1.25}
    for env in ("a", "b"):
        for target in ("gpu", "cpu"):
            for repeat in range(4):
                for name, folder in folders.items():
                    factor = slower.get((env, target), 1.0) if name == "new" else 1.0
                    record = make_record(env, target, 256, repeat, rng,
                                         factor=factor * math.exp(rng.gauss(0, 0.02)))
                    result.write_atomic(str(folder / ("%s-%s-%d.json" % (env, target, repeat))),
                                        record)
    old, new = (_logs_of(folders[k]) for k in ("old", "new"))
    margin = math.log(1.05)
    pvalues, tests = {}, {}
    for cell in old:
        a, b = new[cell], old[cell]
        va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
        se = math.sqrt(va + vb)
        df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
        d = statistics.fmean(a) - statistics.fmean(b)
        beyond = abs(d) - margin
        pvalues[cell] = 1.0 if beyond <= 0 else 2 * scipy_stats.t.sf(beyond / se, df)
        tests[cell] = (d, se, df)
    levels = _holm(pvalues)
    changes = compare.compare(store.load_all([folders["old"]])[0],
                              store.load_all([folders["new"]])[0], 0.05)
    assert len(changes) == 4
    for change in changes:
        env, target = change.key[0], change.key[1]
        d, se, df = tests[(env, target)]
        half = scipy_stats.t.isf(levels[(env, target)] / 2, df) * se
        assert change.level == pytest.approx(levels[(env, target)], rel=1e-12)
        assert change.ci == pytest.approx((math.exp(d - half), math.exp(d + half)), rel=1e-9)
        expected = ("regression" if d - half > margin else
                    "improvement" if d + half < -margin else "no change")
        assert change.flag == expected, (env, target, change.ci, levels)
    flags = {(c.key[0], c.key[1]): c.flag for c in changes}
    assert flags[("b", "cpu")] == "regression" and flags[("a", "gpu")] == "no change"
    sentence = compare.family_sentence(changes)
    assert sentence == ("4 cells tested together (Holm's step-down): at most a 5% chance that "
                        "any of these flags is false.")
