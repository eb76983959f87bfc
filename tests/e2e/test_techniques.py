"""The write-up's other techniques in real containers: ddp ranks on the CPU target, the light
models and the quantised test pass, on both stacks; then the report's scaling and model tables."""
from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pytest
import yaml
from e2e_support import E2E_MATRIX, envbench

from envbench.report import formats

pytestmark = pytest.mark.e2e

# The light LeNets' parameters, from their layers (tests/bench/test_flops.py counts them).
PARAMETERS = {"lenet": 62006, "lenet-gap": 3042, "lenet-dws": 59504}


@pytest.fixture(scope="module")
def technique_run(first_run, e2e_env, cifar, tmp_path_factory):
    """The e2e matrix, swept over parallel (none, ddp with 2 ranks) and the three models
    (under the sweep's earlier key, `model`, which reads as `workload`)."""
    folder = tmp_path_factory.mktemp("techniques")
    matrix = yaml.safe_load(Path(E2E_MATRIX).read_text())
    matrix["benchmark"].update({"epochs": 2, "nproc": 2, "quantize_eval": "dynamic",
                                "sweep": {"parallel": ["none", "ddp"],
                                          "model": ["lenet", "lenet-gap", "lenet-dws"]}})
    path = folder / "matrix.yaml"
    path.write_text(yaml.safe_dump(matrix, sort_keys=False))
    reports = folder / "reports"
    # Grouped: the planned repeat of each cell only, however busy the machine is.
    proc = envbench(e2e_env, "bench", "--matrix", path, "--data", cifar, "--reports", reports,
                    "--order", "grouped")
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-4000:]
    return path, reports


def test_ddp_cells_write_one_valid_result_whose_samples_add_up(technique_run):
    _, reports = technique_run
    records = [json.loads(p.read_text()) for p in (reports / "results").glob("*.json")]
    # 2 stacks x 2 parallel modes x 3 models, one result file each (rank 0 writes it).
    assert len(records) == 12 and all(r["status"] == "ok" for r in records)
    ddp = [r for r in records if r["config"]["parallel"] == "ddp"]
    assert len(ddp) == 6
    for r in ddp:
        assert r["parallel"]["world_size"] == 2 and r["parallel"]["backend"] == "gloo"
        # The target's 2 CPUs give 2 threads, split between the ranks.
        assert r["cell"]["resources"]["threads"] == 2 and r["parallel"]["threads_per_rank"] == 1
        for epoch in r["epochs"]:
            assert [x["samples"] for x in epoch["ranks"]] == [300, 300]
            assert epoch["samples"] == 600
    for r in records:
        assert r["model"]["name"] == r["config"]["workload"]
        assert r["model"]["parameters"] == PARAMETERS[r["config"]["workload"]]
        assert r["model"]["flops"]["train"] > 2 * r["model"]["flops_per_image"]
        q = r["quantized_eval"]
        # The float pass of the quantised comparison is the trained net on the same batches
        # on the same CPU: it agrees with the run's own last test pass, image for image.
        assert q["float_test_acc"] == pytest.approx(r["epochs"][-1]["test_acc"], abs=1e-9), q
        assert q["test_s"] > 0 and q["float_test_s"] > 0
        if r["config"]["workload"] == "lenet":  # its Linear layers hold 59k of its 62k weights
            assert q["weight_bytes"] < 0.5 * q["float_weight_bytes"], q


def _cells(row: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", c).strip()
            for c in re.findall(r"<td[^>]*>(.*?)</td>", row, flags=re.S)]


def _median_epoch(records: list[dict]) -> float:
    """From the records, as a reader would: each repeat's median after its warm-up epoch,
    then the median over the repeats."""
    return statistics.median(statistics.median(e["wall_s"] for e in r["epochs"][1:])
                             for r in records if r["status"] == "ok")


def test_the_report_shows_scaling_and_models(technique_run, e2e_env, tmp_path):
    path, reports = technique_run
    out = tmp_path / "report"
    # Every repeat counts (a busy machine may have marked one contended; this is about the
    # report's arithmetic, not about contention).
    proc = envbench(e2e_env, "report", reports / "results", "--out", out, "--keep-contended")
    assert proc.returncode == 0 and "Traceback" not in proc.stdout, proc.stdout
    page = (out / "index.html").read_text()
    records = [json.loads(p.read_text()) for p in (reports / "results").glob("*.json")]

    def cell(env: str, name: str, parallel: str) -> list[dict]:
        return [r for r in records if r["cell"]["environment"] == env
                and r["config"]["workload"] == name and r["config"]["parallel"] == parallel]

    table = re.search(r'<table class="scaling">(.*?)</table>', page, flags=re.S).group(1)
    rows = [_cells(row) for row in re.findall(r"<tr><td>(?:debian-torch1\.13|torch2\.13-cpu)"
                                               r"</td>.*?</tr>", table, flags=re.S)]
    assert len(rows) == 6  # 2 stacks x 3 models, ddp on 2 ranks against one device each
    for env in ("debian-torch1.13", "torch2.13-cpu"):
        for name in PARAMETERS:
            (row,) = [r for r in rows if r[0] == env and r[2] == "workload=%s" % name]
            one, two = _median_epoch(cell(env, name, "none")), _median_epoch(cell(env, name,
                                                                                  "ddp"))
            assert row[3:6] == ["ddp", "2", "64 / 128"], row  # batch 64 a rank, 2 ranks
            assert row[6] == "%.2f" % one and row[7] == "%.2f" % two, (row, one, two)
            assert row[8] == "%.2f×" % (one / two), (row, one / two)
            assert row[10] == "%.1f%%" % (100 * one / two / 2), row
    assert "the write-up (reference)" in table and "1.7–1.9×" in table
    models = re.search(r'<table class="models">(.*?)</table>', page, flags=re.S).group(1)
    for parameters in PARAMETERS.values():
        assert "{:,}".format(parameters) in models
    # The quantised columns: each one-device cell's int8 and float test passes, as recorded
    # (one repeat: its figures are the medians).
    model_rows = [_cells(row) for row in re.findall(r"<tr><td>.*?</tr>", models, flags=re.S)]
    for env in ("debian-torch1.13", "torch2.13-cpu"):
        for name in PARAMETERS:
            (record,) = cell(env, name, "none")
            q = record["quantized_eval"]
            (row,) = [r for r in model_rows if r[0] == env and r[3] == name
                      and "parallel=none" in r[2]]
            assert row[9] == "%.1f%% / %.2f" % (100 * q["float_test_acc"], q["float_test_s"])
            assert row[10] == "%.1f%% / %.2f" % (100 * q["test_acc"], q["test_s"])
            assert row[11] == "%s / %s" % (formats.human_bytes(q["float_weight_bytes"]),
                                           formats.human_bytes(q["weight_bytes"]))
