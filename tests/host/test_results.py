"""Which stored results count as done (resume), and host-written failure records."""
from __future__ import annotations

from bench import result
from envbench import results
from envbench.cells import Cell
from envbench.matrix import Settings

SETTINGS = Settings(epochs=1, batch_size=32).model_dump()
CELL = Cell("env", "cpu", 0, {}, SETTINGS)


def ok_record(image_id: str = "sha256:abc") -> dict:
    record = results.host_failure(CELL, "cpu", False, "X", "y")
    record.update(status="ok", error=None)
    record["env"]["image"] = {"id": image_id, "tag": "t"}
    record["epochs"] = [{k: 0 for k in result.EPOCH_KEYS}]
    record["epochs"][0]["phases_s"] = dict.fromkeys(result.PHASES, 0.0)
    return record


def test_a_result_is_current_only_for_the_same_image_and_config():
    record = ok_record()
    assert result.validate(record) == []
    assert results.is_current(record, CELL, "sha256:abc", synthetic=False)
    assert not results.is_current(record, CELL, "sha256:other", synthetic=False)
    assert not results.is_current(record, CELL, "sha256:abc", synthetic=True)
    changed = Cell("env", "cpu", 0, {}, dict(SETTINGS, batch_size=64))
    assert not results.is_current(record, changed, "sha256:abc", synthetic=False)
    assert not results.is_current(dict(record, status="failed"), CELL, "sha256:abc", False)
    assert not results.is_current(None, CELL, "sha256:abc", False)


def test_torn_or_foreign_files_read_as_absent(tmp_path):
    (tmp_path / "torn.json").write_text('{"schema": "envbench.result/1", "sta')
    (tmp_path / "other.json").write_text('{"hello": 1}')
    assert results.read(tmp_path / "torn.json") is None
    assert results.read(tmp_path / "other.json") is None
    assert results.read(tmp_path / "missing.json") is None


def test_host_failures_validate_and_explain_themselves(tmp_path):
    record = results.host_failure(CELL, "cuda", True, "GpuUnavailable", "no runtime")
    results.annotate(record, CELL, "RTX", 0.35, {"id": "i", "tag": "t"}, {"quick": False})
    results.write(tmp_path / "r.json", record)
    back = results.read(tmp_path / "r.json")
    assert back is not None and back["status"] == "failed"
    assert back["cell"]["target_label"] == "RTX" and back["cell"]["price_per_hour"] == 0.35
    assert back["error"] == {"type": "GpuUnavailable", "message": "no runtime"}
    assert back["config"]["device"] == "cuda" and back["config"]["batch_size"] == 32
