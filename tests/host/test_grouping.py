"""The report's groups read back against the records they came from: each expected figure is
computed here from the JSON (statistics' median, sums, the records' own fields), never by
calling the grouping code it checks."""
from __future__ import annotations

import math
import random
import re
import statistics

import pytest
from report_fixture import make_record, viewed

from envbench.report import grouping


def _groups(records: list[dict]) -> list[grouping.Group]:
    return grouping.group(viewed(records))


def _retarget(record: dict, target: str) -> dict:
    record["cell"]["target"] = target
    record["cell"]["id"] = record["cell"]["id"].replace(record["cell"]["id"].split("-")[-3],
                                                        target, 1)
    return record


def _steady_median(record: dict) -> float:
    return statistics.median(e["wall_s"] for e in record["epochs"][1:])


def test_the_baseline_is_the_first_cpu_target_even_where_a_gpu_target_sorts_first():
    rng = random.Random(1)
    records = [_retarget(make_record("env", "gpu", 256, 0, rng), "a100"),
               _retarget(make_record("env", "cpu", 256, 0, rng), "zen4"),
               _retarget(make_record("env", "cpu", 256, 0, rng), "zz-cpu")]
    groups = _groups(records)
    assert sorted(g.target for g in groups) == ["a100", "zen4", "zz-cpu"]
    assert grouping.choose_baseline(groups, None) == "zen4"
    # No CPU target: the first target; nothing at all: none.
    assert grouping.choose_baseline([g for g in groups if g.target == "a100"], None) == "a100"
    assert grouping.choose_baseline([], None) is None
    assert grouping.choose_baseline(groups, "a100") == "a100"
    assert grouping.choose_baseline(groups, "tpu") is None


def test_a_memory_peak_is_the_largest_over_the_finished_repeats():
    rng = random.Random(2)
    repeats = [make_record("env", "gpu", 256, i, rng) for i in range(4)]
    peaks = [5 * 2**30, None, 7 * 2**30, 9 * 2**30]
    for record, peak in zip(repeats, peaks):
        record["memory"]["gpu_peak_allocated_bytes"] = peak
    repeats[3]["status"] = "failed"  # a failed repeat's figure is not the group's
    repeats[3]["error"] = {"type": "OutOfMemory", "message": "killed"}
    (g,) = _groups(repeats)
    assert len(g.ok) == 3
    assert g.memory("gpu_peak_allocated_bytes") == 7 * 2**30
    assert g.memory("gpu_peak_reserved_bytes") == max(
        r["memory"]["gpu_peak_reserved_bytes"] for r in repeats[:3])
    (cpu,) = _groups([make_record("env", "cpu", 256, 0, rng)])
    assert cpu.memory("gpu_peak_allocated_bytes") is None


def test_curves_are_per_epoch_medians_over_repeats_skipping_a_missing_value():
    rng = random.Random(3)
    repeats = [make_record("env", "cpu", 256, i, rng) for i in range(3)]
    repeats[1]["epochs"][1]["train_loss"] = None  # not finite: bench writes null
    for record in repeats:
        record["epochs"][2]["train_loss"] = None
    repeats[2]["epochs"].pop()  # one repeat stopped an epoch early
    (g,) = _groups(repeats)
    loss = g.curve("train_loss")
    assert len(loss) == 4  # as long as the shortest repeat
    for i in (0, 1, 3):
        seen = [r["epochs"][i]["train_loss"] for r in repeats
                if r["epochs"][i]["train_loss"] is not None]
        assert loss[i] == statistics.median(seen)
    assert math.isnan(loss[2])  # no repeat has a value there
    assert g.curve("test_acc") == [statistics.median(r["epochs"][i]["test_acc"] for r in repeats)
                                   for i in range(4)]
    failed = make_record("gone", "cpu", 256, 0, rng)
    failed.update(status="failed", error={"type": "BuildFailed", "message": "x"}, epochs=[])
    (nothing,) = _groups([failed])
    assert nothing.curve("train_loss") == []


def test_time_to_accuracy_counts_the_epoch_that_reaches_the_goal_exactly():
    rng = random.Random(4)
    repeats = [make_record("env", "gpu", 256, i, rng) for i in range(3)]
    # The fixture's accuracy climbs 0.36, 0.42, 0.48...: 0.48 is reached at the third epoch.
    assert [e["test_acc"] for e in repeats[0]["epochs"]][2] == 0.48
    (g,) = _groups(repeats)
    expected = statistics.median(sum(e["wall_s"] for e in r["epochs"][:3]) for r in repeats)
    assert g.time_to_accuracy(0.48) == pytest.approx(expected, rel=1e-12)
    price = repeats[0]["cell"]["price_per_hour"]
    assert g.cost_to_accuracy(0.48) == pytest.approx(price * expected / 3600, rel=1e-12)
    assert g.time_to_accuracy(0.99) is None and g.cost_to_accuracy(0.99) is None


def _swept(env: str, batch: int, amp: str, factor: float, rng: random.Random) -> dict:
    record = make_record(env, "gpu", batch, 0, rng, factor=factor)
    record["config"]["amp"] = amp
    record["cell"]["variant"] = {"batch_size": batch, "amp": amp}
    record["cell"]["id"] += "-" + amp
    return record


def test_an_optimisations_effect_is_against_the_group_that_differs_only_in_it():
    rng = random.Random(5)
    off = _swept("env", 256, "off", 1.0, rng)
    off_again = _swept("env", 256, "off", 1.0, rng)
    off_again["cell"]["repeat"] = 1
    bf16 = _swept("env", 256, "bf16", 0.6, rng)
    lone = _swept("env", 32, "bf16", 0.6, rng)   # no amp-off run at batch 32: no effect
    early = _swept("a-env", 256, "off", 1.0, rng)  # sorts first, and is a baseline only
    # Another GPU target with the same options: never the baseline of this target's cells.
    elsewhere = _retarget(_swept("env", 256, "off", 0.5, rng), "a100")
    # bf16 with other workers: no amp-off run has those, so no effect.
    other_workers = _swept("env", 256, "bf16", 0.6, rng)
    other_workers["config"]["workers"] = 4
    # Group identities come from the first repeat seen: here off's repeat 1.
    groups = _groups([elsewhere, off_again, off, bf16, lone, early, other_workers])
    by_id = {(g.environment, g.target, g.batch_size, g.config["amp"], g.config["workers"]): g
             for g in groups}
    effects = grouping.effects(groups)
    assert [(o, v, g.key, b.key) for o, v, g, b, _ in effects] == [
        ("amp", "bf16", by_id[("env", "gpu", 256, "bf16", 2)].key,
         by_id[("env", "gpu", 256, "off", 2)].key)]
    off_median = statistics.median([_steady_median(off), _steady_median(off_again)])
    assert effects[0][4] == pytest.approx(off_median / _steady_median(bf16), rel=1e-12)


def test_the_fingerprint_table_lists_each_columns_own_values_and_marks_what_differs():
    rng = random.Random(6)
    old = make_record("old-env", "gpu", 256, 0, rng, torch="1.12.1+cu116", cuda="11.6")
    new = make_record("new-env", "cpu", 256, 0, rng)
    old["env"]["image"]["lock_sha256"] = "1" * 64
    new["env"]["image"]["lock_sha256"] = "2" * 64
    new["env"]["image"]["base_digest"] = "python@sha256:" + "ee" * 32
    old["env"]["packages"] = {"numpy": "1.26.4", "torch": "1.12.1+cu116", "PyYAML": "6.0",
                              "jinja2": "3.1.4"}
    new["env"]["packages"] = {"numpy": "1.26.4", "torch": "2.5.1", "PyYAML": "6.0.2",
                              "jinja2": "3.1.6"}
    # The new stack's math libraries as bench read them; the old record has none (older
    # results): its cell is empty, not a guess.
    new["env"]["math"] = {"blas": "mkl", "lapack": "mkl", "mkl": "2024.2", "onednn": "3.12.0",
                          "cpu_capability": "AVX512"}
    columns, rows, values, differ = grouping.fingerprints(_groups([old, new]))
    assert columns == [("new-env", "cpu"), ("old-env", "gpu")]
    assert values["math libraries"] == [
        "BLAS mkl, LAPACK mkl, MKL 2024.2, oneDNN 3.12.0, CPU kernels AVX512", None]
    assert rows == list(grouping.FINGERPRINT_KEYS) + ["math libraries"] + list(
        grouping.RESOURCE_ROWS) + [
        # Packages in name order whatever the case: jinja2 before PyYAML.
        "image", "base digest", "lock", "bench_sha256", "package jinja2", "package PyYAML",
        "package torch"]
    order = (new, old)
    assert values["image"] == [r["env"]["image"]["id"] for r in order]
    assert values["base digest"] == [r["env"]["image"]["base_digest"] for r in order]
    assert values["lock"] == ["2" * 64, "1" * 64]
    assert values["bench_sha256"] == [r["env"]["bench_sha256"] for r in order]
    assert values["torch"] == ["2.5.1", "1.12.1+cu116"]
    assert values["CPU quota"] == [r["cell"]["resources"]["cpus"] for r in order]
    assert values["package torch"] == ["2.5.1", "1.12.1+cu116"]
    assert "package numpy" not in values  # the same version on both sides
    assert {"image", "base digest", "lock", "torch", "cuda", "CPU quota",
            "package torch"} <= differ
    assert "bench_sha256" not in differ and "cpu_model" not in differ and "python" in differ


def test_contended_repeats_that_differ_only_in_a_share_are_said_once_with_the_range():
    rng = random.Random(7)
    repeats = [make_record("env", "cpu", 256, i, rng) for i in range(4)]
    shares = [0.51, 0.53, 0.52, None]
    for record, share in zip(repeats, shares):
        reasons = [] if share is None else [
            "other processes used %.0f%% of the cell's CPU time on cores 0,1" % (100 * share)]
        if share == 0.53:
            reasons.append("the GPU throttled (hw_slowdown)")
        record["noise"] = {"host": {"cores": [0, 1], "samples": 10, "other_cpu_s": 0.1,
                                    "steal_s": 0.0, "other_cpu_share": share or 0.01,
                                    "steal_share": 0.0},
                           "gpu": None, "unavailable": None, "contended": bool(reasons),
                           "reasons": reasons}
    (g,) = _groups(repeats)
    assert len(g.contended) == 3
    # By default the contended repeats are left out of the figures: the clean one stands.
    assert len(g.left_out) == 3 and [r.cell.repeat for r in g.clean] == [3]
    assert g.noise_seen == ("other processes used 51–53% of the cell's CPU time on cores 0,1; "
                            "the GPU throttled (hw_slowdown)")


def test_groups_that_share_a_row_are_told_apart_by_image_data_or_run():
    rng = random.Random(8)
    lone = make_record("alone", "cpu", 256, 0, rng)  # sorts nowhere near the others
    base = make_record("env", "cpu", 256, 0, rng)
    other_image = make_record("env", "cpu", 256, 0, rng)
    other_image["env"]["image"]["id"] = "sha256:" + "ab12" * 16
    no_image = make_record("env", "cpu", 256, 0, rng)
    no_image["env"]["image"]["id"] = None
    other_data = make_record("env", "gpu", 256, 0, rng)
    twin_data = make_record("env", "gpu", 256, 0, rng)
    twin_data["cell"]["data"] = dict(twin_data["cell"]["data"], sha256="9f" * 32)
    unknown_data = make_record("env", "gpu", 256, 0, rng)
    unknown_data["cell"]["data"] = dict(unknown_data["cell"]["data"], sha256=None)
    other_run = make_record("env", "gpu", 32, 0, rng)
    twin_run = make_record("env", "gpu", 32, 0, rng)
    twin_run["cell"]["resources"] = dict(twin_run["cell"]["resources"], memory="8g")
    groups = _groups([lone, base, other_image, no_image, other_data, twin_data, unknown_data,
                      other_run, twin_run])
    marks = sorted(((g.target, g.batch_size, g.marks) for g in groups), key=str)
    own_id = base["env"]["image"]["id"]
    assert ("cpu", 256, ()) in marks  # alone in its row: nothing to tell apart
    assert ("cpu", 256, ("image %s" % own_id[7:19],)) in marks
    assert ("cpu", 256, ("image %s" % ("ab12" * 3),)) in marks
    assert ("cpu", 256, ("image none",)) in marks
    assert ("gpu", 256, ("data %s" % base["cell"]["data"]["sha256"][:8],)) in marks
    assert ("gpu", 256, ("data 9f9f9f9f",)) in marks
    assert ("gpu", 256, ("data ?",)) in marks
    runs = [m for t, b, m in marks if b == 32]
    assert len(runs) == 2 and runs[0] != runs[1]
    assert all(len(m) == 1 and re.fullmatch(r"run [0-9a-f]{8}", m[0]) for m in runs), runs


def test_a_speedup_needs_a_finished_repeat_on_both_sides():
    rng = random.Random(9)
    done = make_record("env", "cpu", 256, 0, rng)
    failed = make_record("env", "gpu", 256, 0, rng)
    failed.update(status="failed", error={"type": "BuildFailed", "message": "x"}, epochs=[])
    ok, gone = sorted(_groups([done, failed]), key=lambda g: g.target)
    assert grouping.speedup(ok, gone) is None and grouping.speedup(gone, ok) is None
    with pytest.raises(AssertionError) as refused:
        grouping.seconds(gone)
    assert str(refused.value) == "('env', 'gpu', 'batch_size=256', '') has no finished repeat"


def test_rows_of_one_environment_and_target_go_by_batch_size_as_numbers():
    rng = random.Random(11)
    groups = _groups([make_record("env", "cpu", b, 0, rng) for b in (256, 32, 64)])
    assert [g.batch_size for g in groups] == [32, 64, 256]


def test_a_range_is_made_of_reasons_with_one_percentage_only():
    assert grouping.ranges(["a GPU throttled", "b used 1%", "b used 2.5%"]) == [
        "a GPU throttled", "b used 1–2.5%"]
    assert grouping.ranges(["b used 51%"]) == ["b used 51%"]
    # Two percentages in one reason: left as they are, one sentence each.
    assert grouping.ranges(["x 1% of 5%", "x 2% of 5%"]) == ["x 1% of 5%", "x 2% of 5%"]
    # Numbers as the reasons wrote them, ordered as numbers (9 < 10; 51 and 51.0 are one).
    assert grouping.ranges(["u 10%", "u 9%", "u 1000000%"]) == ["u 9–1000000%"]
    assert grouping.ranges(["u 51%", "u 51.0%"]) == ["u 51%"]
    # A reason without a percentage is never merged into one that ends in a percentage and
    # begins with the same words; the same reason twice is said once.
    assert grouping.ranges(["cpu busy", "cpu busy", "cpu busy51%", "cpu busy52%"]) == [
        "cpu busy", "cpu busy51–52%"]


def test_reproducibility_spreads_accuracy_across_stacks_and_checks_identical_weights():
    rng = random.Random(10)
    a = [make_record("a-env", "cpu", 256, i, rng) for i in range(2)]
    b = [make_record("b-env", "cpu", 256, i, rng) for i in range(3)]
    for record, acc in zip(b, (0.41, 0.45, 0.43)):
        record["summary"]["final_test_acc"] = acc
    for record in a:
        record["summary"]["weights_sha256"] = "1" * 64
    b[2]["summary"]["weights_sha256"] = "2" * 64
    single = make_record("c-env", "gpu", 256, 0, rng)  # alone at its point, one repeat
    loose = [make_record("d-env", "gpu", 32, i, rng) for i in range(2)]
    for record in loose:
        record["config"]["deterministic"] = False
    out = grouping.reproducibility(_groups(a + b + [single] + loose))
    a_acc = statistics.median(r["summary"]["final_test_acc"] for r in a)
    assert out["accuracy_spread"] == [("cpu", "batch_size=256", min(a_acc, 0.43),
                                       max(a_acc, 0.43), pytest.approx(abs(a_acc - 0.43)))]
    # a's two repeats wrote one digest, b's three two: only deterministic multi-repeat groups.
    assert [(g.environment, same) for g, same in out["weights"]] == [("a-env", True),
                                                                     ("b-env", False)]
    assert out["bench_hashes"] == sorted({r["env"]["bench_sha256"] for r in a + b})


def test_groups_sort_numbers_numerically_and_before_words_in_one_swept_key():
    """A swept key may mix numbers and words; numbers sort as numbers (4 < 16, not '16' <
    '4'), then the rest (a boolean is a word here) in text order; keys in name order."""
    rng = random.Random(12)
    records = []
    for seed, (threads, amp) in enumerate(((16, "off"), ("max", "off"), (4, "off"),
                                           ("auto", "off"), (4, "bf16"), (True, "off"),
                                           (2.5, "off"))):
        r = make_record("env", "cpu", 256, 0, rng)
        r["cell"]["variant"] = {"threads": threads, "amp": amp}
        r["config"]["seed"] = seed  # another measurement each (the variant alone is words)
        records.append(r)
    order = [(g.variant["amp"], g.variant["threads"]) for g in _groups(records)]
    assert order == [("bf16", 4), ("off", 2.5), ("off", 4), ("off", 16), ("off", True),
                     ("off", "auto"), ("off", "max")]


def test_a_runs_time_is_its_epochs_and_the_test_passes_they_had():
    """An epoch without a test pass (an older bench wrote none) adds its wall alone."""
    rng = random.Random(5)
    record = make_record("env", "cpu", 256, 0, rng)
    for epoch in record["epochs"]:
        epoch["test_s"] = None
    record["epochs"][0]["test_s"] = 0.5
    (g,) = _groups([record])
    assert g.run_s == pytest.approx(sum(e["wall_s"] for e in record["epochs"]) + 0.5)
