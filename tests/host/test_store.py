"""Which stored results count as done (resume), and host-written failure records."""
from __future__ import annotations

from report_fixture import LENET_MODEL, refoot
from test_matrix import GOOD

from envbench.cells import expansion, records
from envbench.matrix import models
from envbench.results import contract, identity, store
from envbench.results.identity import SYNTHETIC as SYNTHETIC_DATA
from envbench.results.identity import DataIdentity

M = models.parse(GOOD)
CELL = next(c for c in expansion.expand(M) if c.environment == "a")
DATA = SYNTHETIC_DATA


def stored(tmp_path, image_id="sha256:abc", status="ok", host_cpus=2):
    """A record as the runner stores it for CELL, read back from disk."""
    p = expansion.prepare(CELL, M.targets["cpu"], host_cpus, DATA, image_id)
    record = store.host_failure(p.config, "X", "y")
    if status == "ok":
        record.update(status="ok", error=None,
                      model=dict(LENET_MODEL),
                      parallel={"mode": "none", "world_size": 1, "backend": None,
                                "per_device_batch": 64, "global_batch": 64,
                                "threads_per_rank": 2})
        record["epochs"] = [{"epoch": 0, "wall_s": 1.0, "samples": 10, "samples_per_s": 10.0,
                             "phases_s": {"data": 0.1, "h2d": 0.0, "forward": 0.3,
                                          "backward": 0.4, "optimizer": 0.1},
                             "train_loss": 2.3, "test_acc": 0.1, "test_s": 0.1}]
        refoot(record)  # as many epochs as the cell's config runs, and its summary
    records.annotate(record, p, M.targets["cpu"], {"id": image_id, "tag": "t"}, None, price=0.1)
    path = records.save(tmp_path, p, record)
    return p, store.read(path)


def test_a_result_is_current_only_for_the_same_measurement(tmp_path):
    p, record = stored(tmp_path)
    assert contract.problems(record) == []
    assert store.is_current(record, p.identity)
    other_image = expansion.prepare(CELL, M.targets["cpu"], 2, DATA, "sha256:other").identity
    assert not store.is_current(record, other_image)
    real_data = expansion.prepare(CELL, M.targets["cpu"], 2,
                                  DataIdentity("cifar10", "a" * 64), "sha256:abc").identity
    assert not store.is_current(record, real_data)
    # The same target on a bigger host gets more threads: another measurement.
    bigger = expansion.prepare(CELL, M.targets["cpu"], 32, DATA, "sha256:abc").identity
    assert not store.is_current(record, bigger)
    _, failed = stored(tmp_path / "f", status="failed")
    assert not store.is_current(failed, p.identity)
    assert not store.is_current(None, p.identity)


def test_torn_or_foreign_files_read_as_absent(tmp_path):
    (tmp_path / "torn.json").write_text('{"schema": "envbench.result/2", "sta')
    (tmp_path / "other.json").write_text('{"hello": 1}')
    assert store.read(tmp_path / "torn.json") is None
    assert store.read(tmp_path / "other.json") is None
    assert store.read(tmp_path / "missing.json") is None


def test_host_failures_validate_and_explain_themselves(tmp_path):
    p, back = stored(tmp_path, status="failed")
    assert back is not None and back["status"] == "failed"
    assert back["cell"]["target_label"] == M.targets["cpu"].label
    assert back["cell"]["price_per_hour"] == 0.1
    assert back["error"] == {"type": "X", "message": "y"}
    assert back["config"]["device"] == "cpu" and back["config"]["batch_size"] == 32
    assert back["cell"]["resources"]["threads"] == 2 and back["cell"]["id"] == \
        store.path_for(tmp_path, p.identity, CELL.variant).stem
    assert identity.of_record(back) == p.identity
