"""The page with several workloads: grouped by workload, each in its unit, a GPU/CPU speedup
card for each, Lambda's ResNet-50 figures beside the resnet50 cells, a GPT's loss as its
quality. Every expected figure is computed here from the records, not by the report's code."""
from __future__ import annotations

import copy
import csv
import io
import random
import re
import statistics

import pytest
from report_fixture import make_record, viewed

from envbench.report import grouping, pages, reference
from envbench.results.identity import variant_text

# (workload, unit, units per sample, quality, synthetic in every run, GPU and CPU epoch s)
WORKLOADS = [
    ("lenet", "images", 1, "accuracy", False, 23.4, 189.7),
    ("resnet50", "images", 1, "accuracy", True, 2.1, 610.0),
    ("gpt-tiny", "tokens", 128, "loss", True, 0.9, 40.0),
]


def _record(workload, unit, per_sample, quality, synthetic, target, amp, repeat, seconds, rng):
    r = make_record("torch2.14-cu130", target, 256, repeat, rng, torch="2.14.1+cu130",
                    cuda="13.0", device_name="NVIDIA H100 80GB HBM3")
    scale = seconds / r["summary"]["epoch_s_median"]
    for e in r["epochs"]:
        e["wall_s"] = round(e["wall_s"] * scale, 4)
        e["samples_per_s"] = round(e["samples"] / e["wall_s"], 3)
        e["test_loss"] = round(3.0 - 0.2 * e["epoch"], 4)
        e["phases_s"] = {k: round(v * scale, 4) for k, v in e["phases_s"].items()}
    steady = r["epochs"][1:]
    r["summary"].update(epoch_s_median=statistics.median(e["wall_s"] for e in steady),
                        first_epoch_s=r["epochs"][0]["wall_s"],
                        samples_per_s=statistics.median(e["samples_per_s"] for e in steady),
                        final_test_loss=r["epochs"][-1]["test_loss"])
    r["config"].update(workload=workload, amp=amp)
    r["cell"]["variant"] = {"workload": workload, "amp": amp}
    r["model"] = dict(r["model"], name=workload, unit=unit, units_per_sample=per_sample,
                      quality=quality, attention="sdpa" if unit == "tokens" else None)
    if synthetic:
        r["config"].update(synthetic=True, data=None)
        r["cell"]["data"] = {"source": "synthetic", "sha256": None}
    return r


@pytest.fixture(scope="module")
def records():
    rng = random.Random(11)
    out = []
    for workload, unit, per_sample, quality, synthetic, gpu_s, cpu_s in WORKLOADS:
        for target, seconds in (("gpu", gpu_s), ("cpu", cpu_s)):
            for amp in ("off", "fp16") if target == "gpu" else ("off",):
                for repeat in range(3):
                    out.append(_record(workload, unit, per_sample, quality, synthetic, target,
                                       amp, repeat, seconds * (0.5 if amp == "fp16" else 1),
                                       rng))
    return out


def _median_epoch(records, workload, target, amp):
    return statistics.median(r["summary"]["epoch_s_median"] for r in records
                             if r["config"]["workload"] == workload
                             and r["cell"]["target"] == target and r["config"]["amp"] == amp)


def test_each_workload_gets_its_own_gpu_cpu_speedup_card(records):
    groups = grouping.group(viewed(records))
    context = pages.build_context(viewed(records), [], None, None)
    cards = {question: (answer, where) for question, answer, where in context["cards"]}
    for workload, *_ in WORKLOADS:
        # A speedup compares cells that differ only in the target: amp off on both (the GPU's
        # fp16 cells have no CPU counterpart).
        expected = _median_epoch(records, workload, "cpu", "off") / _median_epoch(
            records, workload, "gpu", "off")
        answer, where = cards["Largest GPU/CPU speedup · %s" % workload]
        assert answer == "%.2f×" % expected, (workload, answer)
        assert "amp=off workload=%s" % workload in where
        fastest = cards["Fastest configuration · %s" % workload][0]
        assert fastest.startswith("%.2f s/epoch" % _median_epoch(records, workload, "gpu",
                                                                 "fp16"))
    assert "Largest GPU/CPU speedup" not in cards  # no card without its workload's name
    # A small model gains little from a big GPU, a ResNet-50 a lot: the cards say so.
    assert len(groups) == 3 * 3


def test_the_page_groups_by_workload_counts_in_its_unit_and_leads_with_its_quality(
        records, tmp_path):
    html = pages.render(viewed(records), [], tmp_path)["html"].read_text()
    tables = re.findall(r'<table class="headline" data-environment="torch2.14-cu130" '
                        r'data-workload="([^"]+)">(.*?)</table>', html, flags=re.S)
    assert [name for name, _ in tables] == ["gpt-tiny", "lenet", "resnet50"]
    gpt = dict(tables)["gpt-tiny"]
    assert "<th>tokens/s</th>" in gpt and "workload=lenet" not in gpt
    gpt_rate = statistics.median(r["summary"]["samples_per_s"] * 128 for r in records
                                 if r["config"]["workload"] == "gpt-tiny"
                                 and r["cell"]["target"] == "cpu")
    assert "%.0f" % gpt_rate in gpt  # the page's number format
    assert "<th>images/s</th>" in dict(tables)["resnet50"]
    # Every cell: a GPT's quality is its loss, and it has no time to an image accuracy.
    cells = re.search(r'<table class="cells sticky">(.*?)</table>', html, flags=re.S).group(1)
    row = next(r for r in cells.split("<tr") if "amp=off workload=gpt-tiny" in r
               and "(cpu" in r)
    loss = statistics.median(r["summary"]["final_test_loss"] for r in records
                             if r["config"]["workload"] == "gpt-tiny"
                             and r["cell"]["target"] == "cpu")
    assert "loss %.3f" % loss in row and "not reached" not in row and "tokens/s" in row
    lenet = next(r for r in cells.split("<tr") if "amp=off workload=lenet" in r and "(cpu" in r)
    assert "images/s" in lenet and "loss" not in lenet
    # Seeded data is what resnet50 and the GPT train on in every run: not a mark, no flag.
    assert "synthetic data" not in cells and "Every result here ran on synthetic" not in html


def test_lambdas_resnet50_figures_sit_beside_the_resnet50_gpu_cells(records, tmp_path):
    html = pages.render(viewed(records), [], tmp_path)["html"].read_text()
    table = re.search(r'<table class="reference lambda">(.*?)</table>', html, flags=re.S)
    assert table is not None and reference.LAMBDA_URL in html
    rows = table.group(1).split("<tr>")[2:]
    assert len(rows) == len(reference.LAMBDA_RESNET50) == 4
    for row, (gpu, precision, value) in zip(rows, reference.LAMBDA_RESNET50):
        amp = "fp16" if precision == "fp16" else "off"
        rate = statistics.median(r["summary"]["samples_per_s"] for r in records
                                 if r["config"]["workload"] == "resnet50"
                                 and r["cell"]["target"] == "gpu"
                                 and r["config"]["amp"] == amp)
        assert gpu in row and "{:,}".format(value) in row and "%.0f" % rate in row
    # Without resnet50 cells, no Lambda table.
    lenet = [r for r in records if r["config"]["workload"] == "lenet"]
    page = pages.render(viewed(lenet), [], tmp_path / "lenet")["html"].read_text()
    assert 'class="reference lambda"' not in page


def test_workloads_are_not_optimisations_of_lenet_but_the_lighter_lenets_are(records):
    effects = grouping.effects(grouping.group(viewed(records)))
    assert {(option, value) for option, value, *_ in effects} == {("amp", "fp16")}
    rng = random.Random(2)
    gap = []
    for repeat in range(2):
        for name, seconds in (("lenet", 189.7), ("lenet-gap", 120.0)):
            gap.append(_record(name, "images", 1, "accuracy", False, "cpu", "off", repeat,
                               seconds, rng))
    (found,) = grouping.effects(grouping.group(viewed(gap)))
    assert found[:2] == ("workload", "lenet-gap")
    assert found[4] == pytest.approx(_median_epoch(gap, "lenet", "cpu", "off")
                                     / _median_epoch(gap, "lenet-gap", "cpu", "off"))


def test_the_csv_and_the_summary_name_each_workload_and_its_unit(records, tmp_path):
    written = pages.render(viewed(records), [], tmp_path)
    rows = list(csv.DictReader(io.StringIO(written["csv"].read_text())))
    assert len(rows) == len(records)
    gpt = [r for r in rows if r["workload"] == "gpt-tiny"]
    assert gpt and all(r["unit"] == "tokens" for r in gpt)
    first = next(r for r in records if r["config"]["workload"] == "gpt-tiny")
    row = next(r for r in gpt if r["variant"] == variant_text(first["cell"]["variant"])
               and r["target"] == first["cell"]["target"] and r["repeat"] == "0")
    assert float(row["units_per_s"]) == pytest.approx(first["summary"]["samples_per_s"] * 128)
    summary = written["md"].read_text()
    assert "Largest GPU/CPU speedup · resnet50" in summary


def test_an_old_lenet_result_and_a_new_one_are_one_measurement(records):
    """Read through the upgrade, a schema-3 LeNet result groups with schema 4's."""
    new = copy.deepcopy(next(r for r in records if r["config"]["workload"] == "lenet"))
    old = copy.deepcopy(new)
    old["schema"] = "envbench.result/3"
    old["config"]["model"] = old["config"].pop("workload")
    for key in ("workload_file", "workload_function", "workload_sha256"):
        old["config"].pop(key)
    old["cell"]["variant"] = {"model": "lenet", "amp": old["cell"]["variant"]["amp"]}
    old["cell"]["repeat"] = 5
    old["model"] = {k: old["model"][k] for k in ("name", "parameters", "flops_per_image")}
    (g,) = grouping.group(viewed([new, old]))
    assert len(g.records) == 2 and g.variant == new["cell"]["variant"]
