"""A result whose figures contradict each other is not a measurement: it is left out on read,
with its reason and file, from the report and from compare; a copy of a result is one repeat.
Hostile files are written to disk and read back through the same path as any result."""
from __future__ import annotations

import copy
import json
import math
import random
import shutil
import statistics
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from report_fixture import make_record

from bench import result
from envbench.report import compare, pages
from envbench.results import contract, crossfoot, store
from envbench.results.record import Result


def contradiction(record: dict) -> str | None:
    """Cross-footing as a read applies it: to the typed view of a record the schema passed
    (a perturbation the schema itself refuses would fail here, not count as caught)."""
    return crossfoot.contradiction(Result.of(contract.check(copy.deepcopy(record))))


def consistent(seed: int, target: str = "cpu", quick: bool = False,
               factor: float = 1.0) -> dict:
    record = make_record("a", target, 256, 0, random.Random(seed), quick=quick, factor=factor)
    record["run_s"] = round(sum(e["wall_s"] + e["test_s"] for e in record["epochs"]) + 9.0, 3)
    record["host_s"] = round(record["run_s"] + 0.8, 3)
    return record


def two_sides(folder: Path, factor: float, seed: int = 3) -> list[Path]:
    """Three repeats of one cell on two stacks, `b` taking `factor` times as long."""
    rng = random.Random(seed)
    paths = []
    for env, scale in (("a", 1.0), ("b", factor)):
        for repeat in range(3):
            record = make_record(env, "cpu", 256, repeat, rng, factor=scale)
            path = folder / ("%s-r%d.json" % (env, repeat))
            result.write_atomic(str(path), record)
            paths.append(path)
    return paths


def edit(path: Path, change) -> None:
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record))


def test_a_consistent_result_from_the_fixture_and_from_bench_passes():
    for seed, target, quick in ((1, "cpu", False), (2, "gpu", False), (3, "cpu", True)):
        assert contradiction(consistent(seed, target, quick)) is None


def test_walls_divided_by_ten_give_no_verdict_and_are_named_as_left_out(tmp_path):
    """The review's first example: the page said "18.48x faster (16.48-25.09)"."""
    folder = tmp_path / "results"
    paths = two_sides(folder, 1.0)
    for path in paths[3:]:
        edit(path, lambda r: [e.update(wall_s=e["wall_s"] / 10) for e in r["epochs"]])
    loaded, skipped = store.load_all([folder])
    assert {r.cell.environment for r in loaded} == {"a"}
    assert sorted(Path(f).name for f, _ in skipped) == ["b-r0.json", "b-r1.json", "b-r2.json"]
    for _, why in skipped:
        assert why.startswith("its figures contradict each other: epoch 0: ")
        assert "samples/s, but it says" in why
    written = pages.render_files([folder], tmp_path / "out")
    page, summary = written["html"].read_text(), written["md"].read_text()
    assert "faster" not in summary  # one environment left: no verdict at all
    for text in (page, summary):
        assert "b-r0.json" in text and "contradict each other" in text


def test_a_summary_that_disagrees_with_its_epochs_is_left_out(tmp_path):
    """"3.72x faster (1.22-1.26)": the headline from the summary, the interval from the
    epochs. Now the summary must be the median of the epochs it summarises."""
    folder = tmp_path / "results"
    paths = two_sides(folder, 1.24)
    edit(paths[4], lambda r: r["summary"].update(epoch_s_median=r["summary"]
                                                 ["epoch_s_median"] * 3))
    loaded, skipped = store.load_all([folder])
    ((name, why),) = skipped
    assert Path(name).name == "b-r1.json"
    assert "summary's epoch_s_median is" in why and "median of its steady epochs" in why
    assert sorted(r.path.name for r in loaded if r.path) == [
        "a-r0.json", "a-r1.json", "a-r2.json", "b-r0.json", "b-r2.json"]


def test_phases_summing_to_three_times_the_wall_are_left_out(tmp_path):
    folder = tmp_path / "results"
    paths = two_sides(folder, 1.0)

    def triple(r):
        e = r["epochs"][2]
        e["phases_s"] = {k: v * 3 for k, v in e["phases_s"].items()}
    edit(paths[0], triple)
    _, skipped = store.load_all([folder])
    ((name, why),) = skipped
    assert "epoch 2: its phases add up to" in why and "more than its wall" in why


def test_a_copy_of_a_result_under_another_name_is_one_repeat(tmp_path):
    """One repeat a side copied twice must not make three: no interval, no verdict."""
    old, new = tmp_path / "old", tmp_path / "new"
    rng = random.Random(5)
    for folder, factor in ((old, 1.0), (new, 2.0)):
        record = make_record("a", "cpu", 256, 0, rng, factor=factor)
        result.write_atomic(str(folder / "r0.json"), record)
        for copy_name in ("r0-copy.json", "r1-really.json"):
            shutil.copyfile(folder / "r0.json", folder / copy_name)
    loaded, skipped = store.load_all([new])
    assert len(loaded) == 1 and len(skipped) == 2
    for _, why in skipped:
        assert why.startswith("the same cell and repeat (0) as ")
        assert why.endswith(": one repeat, counted once")
    (change,) = compare.compare(store.load_all([old])[0], loaded)
    assert change.ci is None and change.flag.startswith("no interval")
    page = pages.render_files([new], tmp_path / "out")["html"].read_text()
    assert "one repeat, counted once" in page


def test_compare_names_the_contradicting_file_it_leaves_out(tmp_path):
    import subprocess
    import sys

    old, new = tmp_path / "old", tmp_path / "new"
    two_sides(old, 1.0)
    paths = two_sides(new, 1.0)
    edit(paths[1], lambda r: r["epochs"].pop())  # four epochs where the config ran five
    proc = subprocess.run([sys.executable, "-m", "envbench", "compare", str(old), str(new),
                           "--out", str(tmp_path / "cmp")], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = (tmp_path / "cmp" / "compare.md").read_text()
    assert "a-r1.json" in text and "holds 4 epochs, but its config asked for 5" in text
    assert "Traceback" not in proc.stderr


def test_a_stored_result_that_contradicts_itself_is_run_again_not_reused(tmp_path):
    path = tmp_path / "r.json"
    record = consistent(7)
    record["summary"]["samples_per_s"] *= 2
    result.write_atomic(str(path), record)
    assert store.read(path) is None  # a resume runs the cell again
    with pytest.raises(contract.InvalidResult, match="summary's samples_per_s"):
        contract.load(path)


# --- one field at a time: every perturbation beyond its tolerance is caught -------------

def _scale(path, factor):
    def change(r):
        holder, key = path(r)
        holder[key] = holder[key] * factor
    return change


def _shrunk(value, factor):
    """``value`` made shorter by ``factor`` (below 1) or by its inverse (above 1)."""
    return value * (factor if factor < 1 else 1 / factor)


PERTURBATIONS = {
    "an epoch's wall": lambda i, k: _scale(lambda r: (r["epochs"][i], "wall_s"), k),
    "an epoch's samples/s": lambda i, k: _scale(lambda r: (r["epochs"][i], "samples_per_s"), k),
    "an epoch's samples": lambda i, k: lambda r: r["epochs"][i].update(
        samples=max(1, round(r["epochs"][i]["samples"] * k))),
    "the summary's median": lambda i, k: _scale(lambda r: (r["summary"], "epoch_s_median"), k),
    "the summary's first epoch": lambda i, k: _scale(lambda r: (r["summary"], "first_epoch_s"),
                                                     k),
    "the summary's samples/s": lambda i, k: _scale(lambda r: (r["summary"], "samples_per_s"), k),
    "a phase": lambda i, k: lambda r: r["epochs"][i]["phases_s"].update(
        backward=r["epochs"][i]["phases_s"]["backward"] + r["epochs"][i]["wall_s"] * (1 + k)),
    "the final accuracy": lambda i, k: lambda r: r["summary"].update(
        final_test_acc=round(r["summary"]["final_test_acc"] + 0.001 * k, 6) % 1.0),
    "an epoch's number": lambda i, k: lambda r: r["epochs"][i].update(epoch=i + 1),
    "an epoch dropped": lambda i, k: lambda r: r["epochs"].pop(i),
    "bench's run": lambda i, k: lambda r: r.update(run_s=_shrunk(sum(
        e["wall_s"] + e["test_s"] for e in r["epochs"]), k)),
    "the host's wall": lambda i, k: lambda r: r.update(host_s=r["run_s"] / (1 + k)),
    "the written time": lambda i, k: lambda r: r.update(written_at=(
        datetime.now(timezone.utc) + timedelta(days=2 + k)).isoformat()),
}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), target=st.sampled_from(["cpu", "gpu"]),
       field=st.sampled_from(sorted(PERTURBATIONS)), epoch=st.integers(0, 4),
       factor=st.one_of(st.floats(0.05, 0.95), st.floats(1.05, 20.0)))
def test_every_single_perturbation_beyond_tolerance_is_caught(seed, target, field, epoch,
                                                              factor):
    record = consistent(seed, target)
    assert contradiction(record) is None
    assert contract.problems(record) == []
    changed = copy.deepcopy(record)
    PERTURBATIONS[field](epoch, factor)(changed)
    if changed == record:
        return  # e.g. an accuracy moved by a whole turn: nothing to catch
    assert contradiction(changed) is not None, (field, epoch, factor)


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 10**6), target=st.sampled_from(["cpu", "gpu"]),
       quick=st.booleans(), jitter=st.floats(0.995, 1.005))
def test_every_consistent_result_passes_even_with_rounding_jitter(seed, target, quick, jitter):
    """Within the tolerances: bench's own rounding, a sample rate off by half a percent."""
    record = consistent(seed, target, quick)
    for e in record["epochs"]:
        e["samples_per_s"] = round(e["samples_per_s"] * jitter, 3)
    steady = record["epochs"][1:] or record["epochs"]
    import statistics
    record["summary"]["samples_per_s"] = statistics.median(e["samples_per_s"] for e in steady)
    assert contradiction(record) is None


def test_more_samples_than_the_data_holds_is_caught_even_with_consistent_rates():
    """Every epoch 60,000 CIFAR-10 images, rates and summary made to agree: the data set
    has 50,000, so this run cannot have happened; with --limit 512, more than 512 neither."""
    import statistics

    record = consistent(4)
    for e in record["epochs"]:
        e["samples"] = 60_000
        e["samples_per_s"] = round(60_000 / e["wall_s"], 3)
    steady = record["epochs"][1:]
    record["summary"]["samples_per_s"] = statistics.median(e["samples_per_s"] for e in steady)
    assert contradiction(record) == (
        "each epoch trained 60000 samples, more than its data's 50000")
    record["config"]["limit"] = 512
    assert "more than its data's 512" in contradiction(record)


def test_a_clock_bound_that_is_not_its_marks_times_their_cost_is_caught():
    record = consistent(5)
    assert contradiction(record) is None
    record["clock"]["epoch_s_at_most"] = round(record["clock"]["epoch_s_at_most"] * 10, 6)
    assert "is not its %d marks" % record["clock"]["marks_per_epoch"] in \
        contradiction(record)


def test_a_clock_that_cost_more_than_the_epoch_is_caught():
    record = consistent(6)
    marks = record["clock"]["marks_per_epoch"]
    longest = max(e["wall_s"] for e in record["epochs"])
    record["clock"]["mark_s"] = round(2 * longest / marks, 9)
    record["clock"]["epoch_s_at_most"] = round(marks * record["clock"]["mark_s"], 6)
    assert "more than its longest epoch" in contradiction(record)


def test_the_page_states_the_largest_clock_share_its_cell_and_the_csv_each_bound(tmp_path):
    paths = two_sides(tmp_path / "results", 1.6)
    records = [json.loads(p.read_text()) for p in paths]
    share, worst = max((r["clock"]["epoch_s_at_most"] / r["summary"]["epoch_s_median"], r)
                       for r in records)
    store_records = store.load_all([tmp_path / "results"])[0]
    written = pages.render(store_records, [], tmp_path / "report")
    page = " ".join(written["html"].read_text().split())
    assert "at most %.2f%% of a median epoch" % (100 * share) in page
    assert "the most in %s on" % worst["cell"]["environment"] in page
    assert "(%d marks an epoch at %.2f µs each" % (worst["clock"]["marks_per_epoch"],
                                                   worst["clock"]["mark_s"] * 1e6) in page
    csv_text = written["csv"].read_text()
    assert "clock_epoch_s_at_most" in csv_text.splitlines()[0]
    for r in records:
        assert str(r["clock"]["epoch_s_at_most"]) in csv_text


# --- bench's run against its epochs and tests, and the host's wall around it ---------------

def _with_tests(seed: int, test_s: float | None, factor: float = 1.0) -> dict:
    """A consistent record whose every epoch's test pass took ``test_s`` (None: no test
    pass), bench's run and the host's wall left for the caller to set."""
    record = consistent(seed, factor=factor)
    for e in record["epochs"]:
        e["test_s"] = test_s
    return record


def test_a_run_shorter_than_its_epochs_and_tests_together_is_caught_by_both_sums():
    """Five epochs and five test passes of 100 s each: bench's run cannot be shorter than
    the two together, though it is longer than the epochs alone."""
    record = _with_tests(8, 100.0)
    walls = sum(e["wall_s"] for e in record["epochs"])
    inside = walls + 500.0
    record["run_s"] = round(walls + 400.0, 6)  # longer than the epochs, shorter than both
    record["host_s"] = record["run_s"] + 0.5
    assert contradiction(record) == (
        "its epochs and tests take %.6g s, more than bench's whole run of %.6g s"
        % (inside, record["run_s"]))
    record["run_s"] = round(inside, 6)
    record["host_s"] = record["run_s"] + 0.5
    assert contradiction(record) is None


def test_an_epoch_without_a_test_pass_adds_no_time_to_the_run():
    """Short epochs (5 of about 1 s), so that a second counted for each missing test pass
    would be past the slack."""
    record = _with_tests(9, None, factor=0.005)
    assert sum(e["wall_s"] for e in record["epochs"]) < 10
    record["run_s"] = round(sum(e["wall_s"] for e in record["epochs"]) * 1.001, 6)
    record["host_s"] = record["run_s"] + 0.5
    assert contradiction(record) is None


def test_the_runs_slack_is_two_percent_and_ten_milliseconds_over_what_it_holds():
    """Inside the slack, within rounding of both parts: passed; just past it: caught."""
    record = _with_tests(10, 0.5)
    inside = sum(e["wall_s"] + 0.5 for e in record["epochs"])
    record["host_s"] = round(inside + 5.0, 6)
    record["run_s"] = round((inside - 0.009) / 1.02, 6)   # the 10 ms still covers it
    assert contradiction(record) is None
    record["run_s"] = round((inside - 0.011) / 1.02, 6)
    assert contradiction(record).startswith("its epochs and tests take")


def test_a_run_longer_than_the_hosts_wall_by_more_than_a_second_is_caught():
    record = _with_tests(11, 0.5)
    record["run_s"] = round(sum(e["wall_s"] + 0.5 for e in record["epochs"]) + 3.0, 6)
    record["host_s"] = round(record["run_s"] - 0.999, 6)
    assert contradiction(record) is None
    record["host_s"] = round(record["run_s"] - 1.001, 6)
    assert contradiction(record) == (
        "bench's run of %.6g s is longer than the host's wall of %.6g s around its container"
        % (record["run_s"], record["host_s"]))


def test_at_the_runs_bound_to_the_last_bit_it_is_not_past_it():
    """Epochs and tests that add up to bench's run times 1.02 plus 10 ms exactly (the last
    test pass found bit by bit): at the bound is within it."""
    record = _with_tests(12, 0.0)
    record["run_s"] = 1100.0
    record["host_s"] = 1100.5
    bound = 1100.0 * (1 + crossfoot.PHASE_SLACK) + crossfoot.PHASE_SLACK_S
    last = record["epochs"][-1]
    last["test_s"] = bound - sum(e["wall_s"] for e in record["epochs"])
    for _ in range(64):
        inside = sum(e["wall_s"] + (e["test_s"] or 0.0) for e in record["epochs"])
        if inside == bound:
            break
        last["test_s"] = math.nextafter(last["test_s"], math.inf if inside < bound else 0.0)
    assert inside == bound
    assert contradiction(record) is None
    while inside == bound:  # the next sum above it: one ulp of the sum, not of the test
        last["test_s"] = math.nextafter(last["test_s"], math.inf)
        inside = sum(e["wall_s"] + (e["test_s"] or 0.0) for e in record["epochs"])
    assert contradiction(record).startswith("its epochs and tests take")


def test_a_run_a_second_longer_than_the_hosts_wall_exactly_is_within_it():
    record = _with_tests(13, 0.5)
    record["run_s"], record["host_s"] = 1100.0, 1099.0
    assert contradiction(record) is None


NOW = datetime(2026, 12, 6, 12, 0, tzinfo=timezone.utc)


def said_of_written_at(written_at: str) -> str | None:
    """What the check of times says of a consistent record written at ``written_at``, at
    NOW."""
    record = consistent(15)
    record["written_at"] = written_at
    return crossfoot._times(Result.of(contract.check(record)), NOW)


def test_a_written_at_that_is_not_a_time_is_named():
    record = consistent(14)
    record["written_at"] = "yesterday, around noon"
    assert contradiction(record) == "its written_at 'yesterday, around noon' is not a time"
    record["written_at"] = "x" * 60
    assert contradiction(record) == "its written_at %r is not a time" % ("x" * 40)
    # ISO 8601's UTC designator is a capital Z (what Python reads); bench writes +00:00.
    record["written_at"] = "2026-12-01T10:00:00z"
    assert contradiction(record) == "its written_at '2026-12-01T10:00:00z' is not a time"


def test_a_written_at_a_day_ahead_is_the_clocks_slack_and_past_it_the_future():
    assert said_of_written_at("2026-12-07T12:00:00+00:00") is None
    assert said_of_written_at("2026-12-07T12:00:01+00:00") == (
        "it was written at 2026-12-07T12:00:01+00:00, in the future")
    assert said_of_written_at("2026-12-06T12:00:00Z") is None  # now: not in the future
    # ISO's longest form (an offset to the microsecond) is quoted to 40 characters.
    assert said_of_written_at("2026-12-08T12:00:00.000000+00:00:00.000000") == (
        "it was written at 2026-12-08T12:00:00.000000+00:00:00.0000, in the future")


def test_a_written_at_without_a_zone_is_read_as_utc():
    assert said_of_written_at("2026-12-07T12:00:00") is None
    assert said_of_written_at("2026-12-08T12:00:00") == (
        "it was written at 2026-12-08T12:00:00, in the future")


# --- memory peaks against what holds them, and the final figures against the last epoch -----

def test_gpu_memory_allocated_beyond_what_was_reserved_is_caught():
    record = consistent(17, "gpu")
    memory = record["memory"]
    memory["gpu_peak_allocated_bytes"] = memory["gpu_peak_reserved_bytes"]  # all of it: fine
    assert contradiction(record) is None
    memory["gpu_peak_allocated_bytes"] = memory["gpu_peak_reserved_bytes"] + 1
    assert contradiction(record) == (
        "its GPU memory peak allocated (%d bytes) exceeds the peak reserved (%d), which holds "
        "it" % (memory["gpu_peak_allocated_bytes"], memory["gpu_peak_reserved_bytes"]))


@pytest.mark.parametrize("limit, peak, problem", [
    ("1g", 2**30, None),                    # the whole limit
    ("1g", int(2**30 * 1.0099), None),      # a page cache's worth over: the 1% slack
    ("100m", 105_906_176, None),            # 100m and 1% exactly: at the slack is within it
    ("1g", None, None),                     # no cgroup peak measured: nothing to hold
    ("1g", int(2**30 * 1.02) + 1, "its container's memory peak (%d bytes) exceeds the "
                                  "container's limit of 1g"),
    # The limit as the matrix gave it, quoted to 20 characters.
    ("000000000000000000001g", 2 * 2**30, "its container's memory peak (%d bytes) exceeds the "
                                          "container's limit of 00000000000000000000"),
])
def test_a_containers_memory_peak_past_its_limit_is_caught(limit, peak, problem):
    record = consistent(18)
    record["cell"]["resources"]["memory"] = limit
    record["memory"]["cgroup_peak_bytes"] = peak
    assert contradiction(record) == (problem % peak if problem else None)


def test_a_summary_without_the_accuracy_its_last_epoch_has_is_caught():
    record = consistent(19)
    acc = record["epochs"][-1]["test_acc"]
    record["summary"]["final_test_acc"] = None
    assert contradiction(record) == (
        "its summary's final_test_acc is None, but its last epoch's test_acc is %s" % acc)
    record["summary"]["final_test_acc"] = acc
    record["epochs"][-1]["test_acc"] = None
    assert contradiction(record) == (
        "its summary's final_test_acc is %s, but its last epoch's test_acc is None" % acc)


# --- each check's sentence, exactly, and the edges of what it lets through -----------------

def _phases_summing_to(epoch: dict, total: float, cuda: bool = False) -> None:
    """The epoch's phases made to add up to ``total`` (its device phases on CUDA)."""
    counted = [k for k in epoch["phases_s"] if not (cuda and k == "data")]
    others = sum(epoch["phases_s"][k] for k in counted if k != "backward")
    epoch["phases_s"]["backward"] = total - others
    assert epoch["phases_s"]["backward"] >= 0


def test_the_numbering_and_rate_of_an_epoch_are_named_exactly():
    record = consistent(20)
    record["epochs"][1]["epoch"] = 7
    assert contradiction(record) == "epoch 1 is numbered 7: epochs run 0, 1, 2, ... in order"
    record = consistent(20)
    record["epochs"][0]["epoch"] = 10**22   # quoted to 20 characters
    assert contradiction(record) == (
        "epoch 0 is numbered %s: epochs run 0, 1, 2, ... in order" % str(10**22)[:20])
    record = consistent(20)
    e = record["epochs"][0]
    e["samples_per_s"] *= 2
    assert contradiction(record) == (
        "epoch 0: %d samples in %.6g s is %.6g samples/s, but it says %.6g"
        % (e["samples"], e["wall_s"], e["samples"] / e["wall_s"], e["samples_per_s"]))


def test_an_epoch_that_saw_other_data_than_the_first_is_named_against_the_first():
    record = consistent(21)
    first, second = record["epochs"][0], record["epochs"][1]
    second["samples"] = first["samples"] - 10
    second["samples_per_s"] = second["samples"] / second["wall_s"]
    assert contradiction(record) == (
        "epoch 1 trained %d samples and epoch 0 %d: every epoch of a run sees the same data"
        % (second["samples"], first["samples"]))


def test_phases_within_two_percent_and_ten_milliseconds_of_the_wall_pass_and_past_it_not():
    record = consistent(22)
    e = record["epochs"][2]
    _phases_summing_to(e, e["wall_s"] * 1.02 + 0.009)
    assert contradiction(record) is None
    _phases_summing_to(e, e["wall_s"] * 1.02 + 0.011)
    assert contradiction(record) == (
        "epoch 2: its phases add up to %.6g s, more than its wall of %.6g s"
        % (sum(e["phases_s"].values()), e["wall_s"]))


def test_on_cuda_the_data_phase_overlaps_the_device_phases_and_is_bounded_alone():
    """CUDA's phases are event spans on the device; `data` is host time beside them. Each
    at 90% of the wall passes on CUDA (on the CPU, where they partition the wall, not)."""
    gpu, cpu = consistent(23, "gpu"), consistent(23, "cpu")
    for record in (gpu, cpu):
        e = record["epochs"][2]
        e["phases_s"]["data"] = 0.9 * e["wall_s"]
        _phases_summing_to(e, 0.9 * e["wall_s"], cuda=True)
    assert contradiction(gpu) is None
    assert contradiction(cpu).startswith("epoch 2: its phases add up to")
    e = gpu["epochs"][2]
    e["phases_s"]["data"] = e["wall_s"] * 1.02 + 0.011
    assert contradiction(gpu) == (
        "epoch 2: its data phase of %.6g s is longer than its wall of %.6g s"
        % (e["phases_s"]["data"], e["wall_s"]))


def _failed(record: dict) -> dict:
    record["status"] = "failed"
    record["error"] = {"type": "RuntimeError", "message": "stopped"}
    return record


def test_a_failed_run_may_hold_fewer_epochs_than_asked_but_never_more():
    record = consistent(24)
    record["epochs"].pop()
    assert contradiction(record) == "it holds 4 epochs, but its config asked for 5"
    assert contradiction(_failed(record)) is None
    record = _failed(consistent(24))
    record["epochs"].append(dict(record["epochs"][-1], epoch=5))
    assert contradiction(record) == "it holds 6 epochs, but its config asked for 5"


def test_a_failed_runs_summary_is_not_held_to_its_epochs():
    record = _failed(consistent(25))
    record["summary"]["epoch_s_median"] *= 3
    assert contradiction(record) is None


def _trained(record: dict, samples: int) -> dict:
    for e in record["epochs"]:
        e["samples"] = samples
        e["samples_per_s"] = samples / e["wall_s"]
    steady = record["epochs"][1:]
    record["summary"]["samples_per_s"] = statistics.median(e["samples_per_s"] for e in steady)
    return record


def test_samples_past_the_limit_are_allowed_only_what_a_distributed_sampler_repeats():
    record = _trained(consistent(26), 516)
    record["config"]["limit"] = 512
    assert "repeated_samples_per_epoch" not in record["parallel"]
    record["parallel"]["repeated_samples_per_epoch"] = 4
    assert contradiction(record) is None
    record["parallel"]["repeated_samples_per_epoch"] = 3
    assert contradiction(record) == ("each epoch trained 516 samples, more than its data's "
                                     "512 and the 3 a distributed sampler repeats")
    del record["parallel"]["repeated_samples_per_epoch"]   # none repeated: no allowance
    record["config"]["limit"] = 515
    assert contradiction(record) == "each epoch trained 516 samples, more than its data's 515"


def test_only_cifar10_read_as_itself_bounds_an_epoch_by_its_50000_images():
    for change in (lambda r: r["cell"].update(data=None),
                   lambda r: r["config"].update(synthetic=True)):
        record = _trained(consistent(27), 60_000)
        change(record)
        assert contradiction(record) is None


@pytest.mark.parametrize("key, scale, what", [
    ("epoch_s_median", 3, "the median of its steady epochs' walls"),
    ("first_epoch_s", 2, "its first epoch's wall"),
    ("samples_per_s", 2, "the median of its steady epochs' samples/s"),
])
def test_a_summary_figure_that_is_not_its_epochs_is_named_exactly(key, scale, what):
    record = consistent(28)
    expected = record["summary"][key]
    record["summary"][key] = expected * scale
    walls = [e["wall_s"] for e in record["epochs"]]
    rates = [e["samples_per_s"] for e in record["epochs"]]
    truth = {"epoch_s_median": statistics.median(walls[1:]), "first_epoch_s": walls[0],
             "samples_per_s": statistics.median(rates[1:])}[key]
    assert contradiction(record) == "its summary's %s is %.6g, but %s is %.6g" % (
        key, expected * scale, what, truth)


def test_a_final_test_loss_that_is_not_the_last_epochs_is_named():
    record = consistent(29)
    record["epochs"][-1]["test_loss"] = 1.25
    record["summary"]["final_test_loss"] = 1.5
    assert contradiction(record) == (
        "its summary's final_test_loss is 1.5, but its last epoch's test_loss is 1.25")


def test_the_clocks_sentences_and_edges():
    record = consistent(30, factor=0.004)   # epochs under a second: a mark may be that long
    longest = max(e["wall_s"] for e in record["epochs"])
    record["clock"] = {"marks_per_epoch": 1, "mark_s": longest, "epoch_s_at_most": longest}
    assert contradiction(record) is None    # as long as the longest epoch: not more
    record["clock"] = {"marks_per_epoch": 2, "mark_s": 0.25, "epoch_s_at_most": 0.125}
    assert contradiction(record) == (
        "its clock's bound (0.125 s an epoch) is not its 2 marks times 0.25 s a mark")
    record["clock"] = {"marks_per_epoch": 4, "mark_s": 0.5, "epoch_s_at_most": 2.0}
    assert contradiction(record) == (
        "its clock's cost (2 s an epoch) is more than its longest epoch (%.3g s)" % longest)
    record = _failed(consistent(30))
    record["epochs"] = []
    assert contradiction(record) is None    # a clock, and no epoch to hold it to


def test_a_failed_run_without_a_parallel_section_gets_no_sampler_allowance():
    record = _failed(_trained(consistent(31), 516))
    record["parallel"] = None
    record["config"]["limit"] = 515
    assert contradiction(record) == "each epoch trained 516 samples, more than its data's 515"


def test_a_clock_bound_of_marks_over_their_cost_is_not_marks_times_it():
    record = consistent(32)
    record["clock"] = {"marks_per_epoch": 2, "mark_s": 0.5, "epoch_s_at_most": 4.0}
    assert contradiction(record) == (
        "its clock's bound (4 s an epoch) is not its 2 marks times 0.5 s a mark")


def test_a_hidden_character_or_a_name_not_in_nfkc_is_named_with_its_key():
    record = consistent(33)
    record["cell"]["environment"] = None  # a cell without one is passed over, not the rest
    record["cell"]["target"] = "cpu\u200b"
    assert contradiction(record) == (
        "its cell's target holds U+200B ZERO WIDTH SPACE, which shows nothing or reorders "
        "the text")
    record = consistent(33)
    record["cell"]["environment"] = "ｔｏｒｃｈ" + "x" * 70   # fullwidth letters, quoted to 60
    assert contradiction(record) == (
        "its cell's environment %r is not in NFKC form: it would look like another name"
        % record["cell"]["environment"][:60])
