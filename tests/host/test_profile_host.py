"""The host's side of profiles and probes: identity, upgrades, the matrix, taking a trace
across from a cell's folder, and the datasheet table."""
from __future__ import annotations

import copy
import gzip
import json
import os
import random

import pytest
from report_fixture import make_record

from envbench.cells import expansion, traces
from envbench.matrix import models
from envbench.report import pages, peaks
from envbench.results import contract, identity
from envbench.user_errors import MatrixError

MATRIX = """
environments:
  e: {python: "3.11", torch: "2.13.0"}
targets:
  cpu: {device: cpu, cpus: 2}
benchmark:
  repeats: 1
  %s
"""


def _record(**config: object) -> dict:
    record = make_record("env", "cpu", 256, 0, random.Random(1))
    record["config"].update(config)
    return record


def test_a_profiled_cell_is_a_measurement_of_its_own_but_the_probe_is_not():
    plain = identity.of_record(_record())
    assert identity.of_record(_record(profile=True)) != plain
    assert identity.of_record(_record(probe="on")) == plain


def test_schema_4_results_are_unprofiled_unprobed_and_the_same_measurement():
    new = _record()
    old = copy.deepcopy(new)
    old["schema"] = contract.SCHEMA_4
    for key in ("profile", "probe"):
        del old["config"][key]
        old.pop(key, None)
    assert contract.problems(old) != []
    record = contract.check(old)
    assert record["upgraded_from"] == contract.SCHEMA_4
    assert record["config"]["profile"] is False and record["config"]["probe"] == "off"
    assert record["profile"] is None and record["probe"] is None
    assert identity.of_record(record) == identity.of_record(new)


def test_the_matrix_profiles_by_key_by_sweep_or_by_the_command_line():
    m = models.parse(MATRIX % "profile: true")
    (cell,) = expansion.expand(m)
    assert cell.settings["profile"] is True and cell.settings["probe"] is True
    m = models.parse(MATRIX % "sweep: {profile: [false, true]}")
    assert [c.variant for c in expansion.expand(m)] == [{"profile": False}, {"profile": True}]
    # --profile: every cell, and a sweep of it collapses to the profiled cells.
    assert [c.settings["profile"] for c in expansion.expand(m, profile=True)] == [True]
    with pytest.raises(MatrixError, match="profile"):
        models.parse(MATRIX % "profile: sometimes")


def _profiled(name: str) -> dict:
    return {"profile": {"steps": 5, "samples": 320, "window_s": 0.1, "ranked_by": "self_cpu",
                        "total_s": 0.1, "operators": [], "trace": name, "trace_bytes": 3,
                        "note": None}}


def test_a_trace_is_taken_across_beside_its_result(tmp_path):
    folder, results = tmp_path / "cell", tmp_path / "results"
    folder.mkdir()
    with gzip.open(folder / "s.trace.json.gz", "wt") as f:
        f.write('{"traceEvents": []}')
    record = _profiled("s.trace.json.gz")
    traces.take(record, folder, results, "s")
    assert (results / "s.trace.json.gz").read_bytes() == (folder / "s.trace.json.gz").read_bytes()
    assert record["profile"]["trace"] == "s.trace.json.gz" and record["profile"]["note"] is None


@pytest.mark.parametrize("plant, why", [
    ("link", "could not be taken across"),
    ("fifo", "not a regular file"),
    ("name", "not named after the cell's result"),
    ("missing", "could not be taken across"),
])
def test_a_trace_the_container_planted_is_dropped_with_its_reason(tmp_path, plant, why):
    folder, results = tmp_path / "cell", tmp_path / "results"
    folder.mkdir()
    secret = tmp_path / "secret"
    secret.write_text("not yours")
    path = folder / "s.trace.json.gz"
    if plant == "link":
        path.symlink_to(secret)
    elif plant == "fifo":
        os.mkfifo(path)
    record = _profiled("other.trace.json.gz" if plant == "name" else "s.trace.json.gz")
    traces.take(record, folder, results, "s")
    assert record["profile"]["trace"] is None and why in record["profile"]["note"]
    assert not (results / "s.trace.json.gz").exists()


@pytest.mark.parametrize("driver_name, entry, bf16", [
    ("NVIDIA H200", "H200 SXM", 989.4),
    ("NVIDIA H100 80GB HBM3", "H100 SXM", 989.4),
    ("NVIDIA H100 PCIe", "H100 PCIe", 756.0),
    ("NVIDIA A100-SXM4-80GB", "A100", 312.0),
    ("NVIDIA L4", "L4", 121.0),
    ("Tesla T4", "T4", None),
    ("NVIDIA A10G", "A10G", 125.0),
    ("Tesla V100-SXM2-16GB", "V100 SXM2", None),
    ("NVIDIA GeForce RTX 3060 Laptop GPU", "RTX 3060", 25.5),
])
def test_the_datasheet_table_finds_gpus_by_the_drivers_name(driver_name, entry, bf16):
    peak = peaks.find(driver_name)
    assert peak is not None and peak.name == entry and peak.tflops("bf16") == bf16
    assert peak.source
    assert peaks.find("NVIDIA GeForce RTX 3060 Ti") is None and peaks.find(None) is None


def test_a_gpu_cell_is_set_against_its_probe_and_its_datasheet_peak(tmp_path):
    """By hand from the records: train FLOPs per sample times the median samples/s, over the
    median probe rate and over the H200's dense bf16 peak (989.4 TFLOP/s)."""
    rng = random.Random(5)
    records = []
    for repeat, probe in enumerate((700e12, 720e12, 690e12)):
        r = make_record("env", "gpu", 256, repeat, rng, device_name="NVIDIA H200")
        r["model"]["flops"] = dict(r["model"]["flops"], train=24_300_000_000)
        r["config"]["amp"] = "bf16"
        r["probe"] = {"dtype": "bfloat16", "flops_per_s": probe, "n": 8192,
                      "sizes": [1024, 2048, 4096, 8192], "seconds": 1.2, "tf32": False,
                      "threads": 8, "note": None}
        records.append(r)
    achieved = 24_300_000_000 * sorted(r["summary"]["samples_per_s"] for r in records)[1]
    folder = tmp_path / "results"
    folder.mkdir()
    for i, r in enumerate(records):
        (folder / ("r%d.json" % i)).write_text(json.dumps(r))
    html = pages.render_files([folder], tmp_path / "page")["html"].read_text()
    section = html[html.index('id="efficiency"'):html.index('id="environments"')]
    assert "%.1f%%" % (100 * achieved / 700e12) in section
    assert "%.1f%%" % (100 * achieved / 989.4e12) in section
    assert "H200 SXM" in section and "bf16, matmul n=8192" in section
    assert "Datasheet sources: H200 SXM: NVIDIA H100/H200" in section


def test_a_cpu_cell_of_a_cuda_image_is_given_no_gpu_by_an_nvidia_default_runtime(tmp_path):
    from types import SimpleNamespace

    from envbench.cells import containerrun, resources
    from envbench.matrix.models import Target

    image = SimpleNamespace(id="sha256:" + "a" * 64, tags=["envbench/x:1"])
    mounts = containerrun.Mounts(tmp_path, tmp_path, None, tmp_path)
    cpu = containerrun.container_options(["--device", "cpu"], resources.plan(
        Target(device="cpu"), 4), image, mounts, "c", tmp_path)
    assert cpu["environment"]["NVIDIA_VISIBLE_DEVICES"] == "void"
    assert "device_requests" not in cpu
    gpu = containerrun.container_options(["--device", "cuda"], resources.plan(
        Target(device="cuda", gpus=2), 4), image, mounts, "c", tmp_path)
    assert "NVIDIA_VISIBLE_DEVICES" not in gpu["environment"]
    assert [r.count for r in gpu["device_requests"]] == [1]  # gpus: 2, one device trains


def test_the_page_links_a_trace_beside_its_result_but_not_a_link_planted_there(tmp_path):
    from envbench.report import operators
    from envbench.results import store

    record = _record(profile=True)
    record["profile"] = dict(_profiled("r.trace.json.gz")["profile"], operators=[
        {"name": "aten::mm", "calls": 5, "self_cpu_s": 0.1, "self_device_s": None,
         "share": 1.0}])
    (tmp_path / "r.json").write_text(json.dumps(record))
    [r], _ = store.load_all([tmp_path / "r.json"])
    trace = tmp_path / "r.trace.json.gz"
    trace.write_bytes(b"x")
    assert operators.trace_file(r) == trace
    trace.unlink()
    trace.symlink_to("/etc/passwd")
    assert operators.trace_file(r) is None
