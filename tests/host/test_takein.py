"""Taking in a finished cell, one way for every executor: the log kept atomically and capped
at its end, the tail a failed result carries, the engine's own cap the same figure."""
from __future__ import annotations

from envbench.cells import containerrun, takein
from envbench.slurm import run as slurmrun


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
    lines = slurmrun._save_log(step, tmp_path / "logs" / "cell.log")
    assert lines[-1] == "last words"
    assert (tmp_path / "logs" / "cell.log").stat().st_size == takein.LOG_CAP
    # A step's log that is a link (shared_dir is writable from the nodes) is not followed.
    (step / "log").unlink()
    (step / "log").symlink_to(tmp_path / "logs" / "cell.log")
    assert slurmrun._save_log(step, tmp_path / "other.log") == []
    assert not (tmp_path / "other.log").exists()
