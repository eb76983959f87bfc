"""Taking in a finished cell, one way for every executor: the log kept atomically and capped
at its end, the tail a failed result carries, the engine's own cap the same figure."""
from __future__ import annotations

import random

from report_fixture import make_record

from bench.rules import FailureKind
from bench.tracefile import TRACE_SUFFIX
from envbench.cells import containerrun, expansion, takein
from envbench.cells.expansion import Cell
from envbench.matrix.models import Settings, Target
from envbench.results import store
from envbench.results.identity import SYNTHETIC
from envbench.slurm import jobcells


def test_a_log_replaces_a_planted_link_and_keeps_the_end_within_the_cap(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    log = tmp_path / "logs" / "cell.log"
    log.parent.mkdir()
    log.symlink_to(victim)
    lines = takein.keep_log(b"first\nsecond\n", log)
    assert lines == ["first", "second"] and victim.read_text() == "keep me"
    assert not log.is_symlink() and log.read_text() == "first\nsecond\n"
    # Past the cap, the end is kept (where the error is), and bytes that are not UTF-8,
    # each written as a three-byte replacement, do not take the file past it.
    big = b"\xff" * takein.LOG_CAP + b"\nthe error\n"
    lines = takein.keep_log(big, log)
    assert lines[-1] == "the error" and log.stat().st_size <= takein.LOG_CAP


def test_a_failed_result_carries_the_last_lines():
    record = takein.with_tail({"status": "failed"}, [str(i) for i in range(100)])
    assert record["log_tail"] == [str(i) for i in range(100 - takein.LOG_TAIL_LINES, 100)]


def test_every_executor_keeps_the_same_log(tmp_path):
    """The engine's json-file log, a Slurm step's and a cloud VM's: one cap."""
    assert containerrun.LOG_MAX_SIZE == "%dm" % (takein.LOG_CAP // 2**20)
    # The cloud path reads takein.LOG_CAP itself (test_layout: one assignment of it).
    step = tmp_path / "step"
    step.mkdir()
    (step / "log").write_bytes(b"x" * (takein.LOG_CAP + 10) + b"\nlast words\n")
    lines = jobcells._save_log(step, tmp_path / "logs" / "cell.log")
    assert lines[-1] == "last words"
    assert (tmp_path / "logs" / "cell.log").stat().st_size == takein.LOG_CAP
    # A step's log that is a link (shared_dir is writable from the nodes) is not followed.
    (step / "log").unlink()
    (step / "log").symlink_to(tmp_path / "logs" / "cell.log")
    assert jobcells._save_log(step, tmp_path / "other.log") == []
    assert not (tmp_path / "other.log").exists()


# --- the record an executor's Ending becomes (take_in), the same for every executor -------

def _placed() -> takein.Placed:
    settings = Settings(epochs=1, batch_size=32, pipeline="resident", limit=64,
                        limit_test=32).model_dump()
    target = Target(device="cpu", label="the CPU")
    p = expansion.prepare(Cell("stack", "cpu", 2, {}, settings), target, 2, SYNTHETIC, "sha256:1")
    return takein.Placed(p, target, {"tag": "envbench/stack:1", "id": "sha256:1"}, 0.5,
                         {"mode": "interleaved", "seed": 7, "round": 2, "position": 0})


def _bench_record(run_s: float = 10.0) -> dict:
    record = make_record("stack", "cpu", 32, 2, random.Random(0))
    record["run_s"] = run_s
    return record


def test_a_cell_that_left_no_record_is_the_executors_sentence_with_its_log(tmp_path):
    placed = _placed()
    lines = ["line %d" % i for i in range(60)]
    overheads: list[float] = []
    ending = takein.Ending(None, lines, (FailureKind.TIMEOUT, "it ran past timeout_s=5"),
                           noise={"contended": False, "reasons": [], "host": None, "gpu": None,
                                  "unavailable": "not sensed in this test"},
                           host_s=12.5)
    record = takein.take_in(ending, placed, tmp_path, overheads)
    saved = store.read(store.path_for(tmp_path, placed.p.identity, placed.p.cell.variant))
    assert saved == record  # valid against the result schema, where its identity says
    assert record["status"] == "failed"
    assert record["error"] == {"type": "Timeout", "message": "it ran past timeout_s=5"}
    assert record["log_tail"] == lines[-takein.LOG_TAIL_LINES:]
    assert record["noise"]["contended"] is False and record["host_s"] == 12.5
    assert overheads == []  # bench ran for no time it could say
    assert record["cell"]["target_label"] == "the CPU" and record["cell"]["repeat"] == 2
    assert record["cell"]["order"]["seed"] == 7
    assert record["env"]["image"] == {"tag": "envbench/stack:1", "id": "sha256:1"}
    # No sentence from the executor either: the one every executor gives.
    bare = takein.record_of(takein.Ending(None, []), placed, tmp_path)
    assert bare["error"] == {"type": FailureKind.NO_RESULT, "message": takein.NO_RESULT}


def test_an_executor_that_stopped_the_cell_overrules_benchs_own_record(tmp_path):
    placed = _placed()
    overheads: list[float] = []
    stopped = takein.Ending(_bench_record(), ["epoch 1", "killed"],
                            (FailureKind.OUT_OF_MEMORY, "killed at the memory limit"),
                            overrules=True, host_s=10.75, sections={"slurm": {"node": "n1"}})
    record = takein.record_of(stopped, placed, tmp_path, overheads)
    assert record["status"] == "failed" and record["error"]["type"] == "OutOfMemory"
    assert record["log_tail"] == ["epoch 1", "killed"] and record["slurm"] == {"node": "n1"}
    assert overheads == [0.75]  # the executor's wall time beyond bench's own
    # Where the executor's account does not overrule (an exit code after bench's own
    # record), the record is bench's, its figures and status as bench wrote them.
    kept = takein.record_of(takein.Ending(_bench_record(), ["x"], (FailureKind.CONTAINER_EXITED,
                                                                   "exited 1")), placed, tmp_path)
    assert kept["status"] == "ok" and kept.get("error") is None and "log_tail" not in kept


def test_a_profiled_cells_trace_is_taken_beside_its_result_whatever_ran_it(tmp_path):
    placed = _placed()
    stem = placed.p.file_stem
    folder, results = tmp_path / "cell", tmp_path / "results"
    folder.mkdir()
    (folder / (stem + TRACE_SUFFIX)).write_bytes(b"trace bytes")
    record = _bench_record()
    record["profile"] = {"trace": stem + TRACE_SUFFIX, "trace_bytes": 11, "note": None}
    taken = takein.take_in(takein.Ending(record, [], folder=folder), placed, results)
    assert taken["profile"]["trace"] == stem + TRACE_SUFFIX
    assert (results / (stem + TRACE_SUFFIX)).read_bytes() == b"trace bytes"
