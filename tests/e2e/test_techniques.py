"""The write-up's other techniques in real containers: ddp ranks on the CPU target, the light
models and the quantised test pass, on both stacks; then the report's scaling and model tables."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from conftest import E2E_MATRIX, envbench

from bench import model

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def technique_run(first_run, e2e_env, cifar, tmp_path_factory):
    """The e2e matrix, swept over parallel (none, ddp with 2 ranks) and the three models."""
    folder = tmp_path_factory.mktemp("techniques")
    matrix = yaml.safe_load(Path(E2E_MATRIX).read_text())
    matrix["benchmark"].update({"epochs": 2, "nproc": 2, "quantize_eval": "dynamic",
                                "sweep": {"parallel": ["none", "ddp"],
                                          "model": ["lenet", "lenet-gap", "lenet-dws"]}})
    path = folder / "matrix.yaml"
    path.write_text(yaml.safe_dump(matrix, sort_keys=False))
    reports = folder / "reports"
    proc = envbench(e2e_env, "bench", "--matrix", path, "--data", cifar, "--reports", reports)
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
        assert r["model"] == model.describe(r["config"]["model"])
        q = r["quantized_eval"]
        assert q["method"] == "dynamic" and 0 <= q["test_acc"] <= 1 and q["test_s"] > 0


def test_the_report_shows_scaling_and_models(technique_run, e2e_env, tmp_path):
    path, reports = technique_run
    out = tmp_path / "report"
    proc = envbench(e2e_env, "report", reports / "results", "--out", out)
    assert proc.returncode == 0 and "Traceback" not in proc.stdout, proc.stdout
    page = (out / "index.html").read_text()
    table = re.search(r'<table class="scaling">(.*?)</table>', page, flags=re.S).group(1)
    rows = re.findall(r"<tr><td>(debian-torch1\.13|torch2\.13-cpu)</td>.*?</tr>", table,
                      flags=re.S)
    assert sorted(rows) == ["debian-torch1.13"] * 3 + ["torch2.13-cpu"] * 3
    assert "the write-up (reference)" in table and "1.7–1.9×" in table
    models = re.search(r'<table class="models">(.*?)</table>', page, flags=re.S).group(1)
    for name in model.MODELS:
        assert "{:,}".format(model.describe(name)["parameters"]) in models
