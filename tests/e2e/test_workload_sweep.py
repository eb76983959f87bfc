"""Every kind of workload in real containers: a sweep of the built-in ones and the example
user workloads (examples/: a ViT needing einops; a regression MLP scored by its loss; a GRU
package over tokens; a transformers BERT given a dict of inputs and computing its own loss,
transformers locked with the stack), on the CPU target, in interleaved rounds; each cell ok,
each on the page in its own unit with its quality, each profiled: its operators on the page
and its trace taken across from the container beside its result."""
from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
from browser import assert_drawn, screenshot
from e2e_support import E2E_MATRIX, ROOT, envbench

from bench import workloads

pytestmark = pytest.mark.e2e

SWEEP = [
    "lenet",
    {"name": "resnet18-cifar", "batch_size": 32},
    {"name": "resnet50", "batch_size": 4, "limit": 8, "limit_test": 4},
    {"name": "gpt-tiny", "batch_size": 8, "limit": 32, "limit_test": 8},
    # The matrix's folder holds a copy of each example.
    {"file": "vit", "batch_size": 32},
    {"file": "regression.py", "batch_size": 32},
    {"file": "gru-tokens", "batch_size": 32},
    {"file": "hf-bert", "batch_size": 32},
]
EXAMPLES = ("vit", "regression.py", "gru-tokens", "hf-bert")
UNITS = {"lenet": "images", "resnet18-cifar": "images", "resnet50": "images",
         "gpt-tiny": "tokens", "vit": "images", "regression": "samples",
         "gru-tokens": "tokens", "hf-bert": "tokens"}


def _matrix(folder: Path) -> Path:
    """The e2e pip stack as it is (its lock and image are the first run's), the sweep."""
    text = yaml.safe_load(E2E_MATRIX.read_text())
    text["environments"] = {"torch2.13-cpu": text["environments"]["torch2.13-cpu"]}
    text["benchmark"] = {"epochs": 2, "repeats": 2, "pipeline": "resident", "limit": 128,
                         "limit_test": 64, "target_accuracy": 0.3, "profile": True,
                         "sweep": {"workload": SWEEP}}
    for example in EXAMPLES:
        source = ROOT / "examples" / example
        if source.is_dir():
            shutil.copytree(source, folder / example,
                            ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, folder / example)
    # Bytecode beside the source, as running the model on the host leaves it: the cell
    # hides it (an empty tmpfs), or bench would refuse to import where it could be loaded.
    (folder / "vit" / "__pycache__").mkdir()
    (folder / "vit" / "__pycache__" / "model.cpython-311.pyc").write_bytes(b"not bytecode")
    path = folder / "matrix.yaml"
    path.write_text(yaml.safe_dump(text, sort_keys=False))
    return path


def test_a_sweep_of_workloads_and_a_users_own_run_and_report(e2e_env, cifar, tmp_path):
    matrix = _matrix(tmp_path)
    reports = tmp_path / "reports"
    proc = envbench(e2e_env, "bench", "--matrix", matrix, "--data", cifar, "--reports",
                    reports)
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "order: interleaved" in proc.stdout
    records = [json.loads(p.read_text()) for p in (reports / "results").glob("*.json")]
    by_workload: dict[str, list[dict]] = {}
    for r in records:
        assert r["status"] == "ok", (r["cell"]["variant"], r["error"])
        by_workload.setdefault(r["config"]["workload"], []).append(r)
    assert sorted(by_workload) == sorted(UNITS)
    assert all(len(found) >= 2 for found in by_workload.values())
    # Interleaved: the first round holds one repeat of every workload, then the second.
    rounds = {(r["cell"]["order"]["round"], r["config"]["workload"]) for r in records}
    assert {w for rnd, w in rounds if rnd == 0} == set(UNITS)
    for name, found in by_workload.items():
        model = found[0]["model"]
        assert model["unit"] == UNITS[name] and model["flops"]["train"] > 0, name
    # The user's workload ran from its read-only mount, checked against the host's digest.
    vit = by_workload["vit"][0]
    digest = workloads.digest(str(tmp_path / "vit"))
    assert vit["config"]["workload_sha256"] == vit["model"]["sha256"] == digest
    assert vit["model"]["source"] == "file" and vit["config"]["workload_file"] == "/workload/vit"
    assert vit["env"]["packages"].get("einops") == "0.8.2"
    # The regression is scored by its loss alone: no accuracy, a finite test loss.
    for r in by_workload["regression"]:
        assert r["summary"]["final_test_acc"] is None and r["model"]["quality"] == "loss"
        assert all(e["test_acc"] is None and e["test_loss"] >= 0 for e in r["epochs"])
    # The BERT took a dict of inputs and trained on its own loss; accuracy read its logits
    # against the labels among its inputs.
    bert = by_workload["hf-bert"][0]
    assert bert["env"]["packages"].get("transformers") == "5.25.0"
    assert 0.0 <= bert["summary"]["final_test_acc"] <= 1.0
    # resnet50 and the GPT ran on seeded data; the CIFAR workloads on the data set.
    assert by_workload["resnet50"][0]["cell"]["data"]["source"] == "synthetic"
    assert by_workload["lenet"][0]["cell"]["data"]["source"] == "cifar10"
    # Every cell profiled and probed after its epochs; the trace came out of the container
    # and lies beside the result, named after it.
    for path in (reports / "results").glob("*.json"):
        r = json.loads(path.read_text())
        assert r["config"]["profile"] is True and r["profile"]["operators"], path.name
        assert r["probe"]["flops_per_s"] > 0 and r["probe"]["dtype"] == "float32"
        trace = path.with_name(path.name[:-len(".json")] + ".trace.json.gz")
        assert r["profile"]["trace"] == trace.name
        with gzip.open(trace, "rt") as f:
            assert json.load(f)["traceEvents"]
    assert not list((reports / ".cells").glob("cell-*"))  # each cell's folder is gone

    proc = envbench(e2e_env, "report", "--matrix", matrix, "--reports", reports)
    assert proc.returncode == 0, proc.stdout
    page = reports / "index.html"
    html = page.read_text()
    for name, unit in UNITS.items():
        table = re.search(r'data-workload="%s">(.*?)</table>' % re.escape(name), html, re.S)
        assert table is not None and "<th>%s/s</th>" % unit in table.group(1), name
    assert "your own" in html and digest[:12] in html
    # The regression's quality on the page is its test loss, not an accuracy.
    models = html[html.index('id="models"'):]
    rows = [row for row in models.split("<tr>") if "<td>regression <span" in row]
    assert rows and all(re.search(r'<td class="n">loss \d', row) for row in rows), rows
    assert 'class="reference lambda"' in html  # Lambda's rows beside the resnet50 cell
    operators = html[html.index('id="operators"'):html.index('id="environments"')]
    assert operators.count("<details") == len(UNITS)
    links = re.findall(r'<a href="(results/[^"]+\.trace\.json\.gz)"', operators)
    assert len(links) == len(records) and all((reports / href).is_file() for href in links)
    assert 'id="efficiency"' in html
    assert_drawn(screenshot(page, tmp_path, height=4000))
