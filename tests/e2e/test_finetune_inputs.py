"""Inputs of your own in real containers: a pretrained transformers model saved with
save_pretrained (in the e2e stack's own image, which has transformers) and a CSV of reviews,
named by examples/finetune.yaml's inputs, mounted read-only and fine-tuned from in a cell
(examples/hf-finetune); a second run finds the cell done; a changed weight file is a new
measurement, run again."""
from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

import pytest
import yaml
from e2e_support import E2E_MATRIX, ROOT, envbench

from envbench.matrix import inputs

pytestmark = pytest.mark.e2e

SAVE = """
import sys
import torch
from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad"] + \\
    ["w%d" % i for i in range(193)]
with open("/tmp/vocab.txt", "w") as f:
    f.write("\\n".join(words) + "\\n")
BertTokenizerFast(vocab_file="/tmp/vocab.txt").save_pretrained("/out/bert-small")
torch.manual_seed(int(sys.argv[1]))
config = BertConfig(vocab_size=len(words), hidden_size=32, num_hidden_layers=1,
                    num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
                    num_labels=2)
BertForSequenceClassification(config).save_pretrained("/out/bert-small")
"""


def _save_pretrained(client, image_id: str, folder: Path, seed: int) -> Path:
    """A small BERT and its tokenizer as save_pretrained writes them, by the stack's own
    transformers (the host has none), owned by the invoking user."""
    folder.mkdir(exist_ok=True)
    (folder / "save.py").write_text(SAVE)
    client.containers.run(image_id, ["/out/save.py", str(seed)], entrypoint=["python3"],
                          remove=True, network_mode="none", user="%d:%d" % (os.getuid(),
                                                                             os.getgid()),
                          environment={"HOME": "/tmp"},
                          volumes={str(folder): {"bind": "/out", "mode": "rw"}})
    (folder / "save.py").unlink()
    return folder / "bert-small"


def _reviews(path: Path) -> None:
    rng = random.Random(0)
    rows = ["text,label"]
    for _ in range(200):
        label = rng.randrange(2)
        words = ["w%d" % rng.randrange(193) for _ in range(rng.randrange(4, 20))]
        words.insert(rng.randrange(len(words)), "good" if label else "bad")
        rows.append("%s,%d" % (" ".join(words), label))
    path.write_text("\n".join(rows) + "\n")


def _matrix(folder: Path) -> Path:
    """examples/finetune.yaml as written, on the e2e pip stack (transformers locked with it)
    and the CI target, kept short."""
    text = yaml.safe_load((ROOT / "examples" / "finetune.yaml").read_text())
    e2e = yaml.safe_load(E2E_MATRIX.read_text())
    text["environments"] = {"torch2.13-cpu": e2e["environments"]["torch2.13-cpu"]}
    text["targets"] = e2e["targets"]
    text["benchmark"].update(epochs=2, repeats=1, batch_size=16)
    shutil.copytree(ROOT / "examples" / "hf-finetune", folder / "hf-finetune",
                    ignore=shutil.ignore_patterns("__pycache__"))
    path = folder / "matrix.yaml"
    path.write_text(yaml.safe_dump(text, sort_keys=False))
    return path


def _records(reports: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((reports / "results").glob("*.json"))]


def test_a_pretrained_model_fine_tunes_from_mounted_inputs_and_new_weights_run_again(
        client, first_run, e2e_env, tmp_path):
    earlier, _ = first_run
    (image_id,) = {r["env"]["image"]["id"] for r in _records(earlier)
                   if r["cell"]["environment"] == "torch2.13-cpu"}
    data = tmp_path / "data"
    weights = _save_pretrained(client, image_id, data, seed=0)
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= \
        {p.name for p in weights.iterdir()}
    _reviews(data / "reviews.csv")
    matrix, reports = _matrix(tmp_path), tmp_path / "reports"
    env = dict(e2e_env, FINETUNE_MODEL=str(weights), FINETUNE_DATA=str(data / "reviews.csv"))

    proc = envbench(env, "bench", "--matrix", matrix, "--reports", reports)
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-4000:]
    (record,) = _records(reports)
    assert record["status"] == "ok", record["error"]
    assert record["config"]["workload"] == "hf-finetune"
    assert record["model"]["unit"] == "tokens" and record["summary"]["final_test_acc"] is not None
    digests = inputs.DigestCache(tmp_path / "own-cache.json")
    model_sha, _, _ = inputs.digest(weights, "model", digests)
    reviews_sha, _, _ = inputs.digest(data / "reviews.csv", "reviews", digests)
    assert record["config"]["inputs"] == {
        "model": {"path": "/inputs/model", "sha256": model_sha},
        "reviews": {"path": "/inputs/reviews/reviews.csv", "sha256": reviews_sha}}

    # The same inputs: the cell is done, nothing runs.
    proc = envbench(env, "bench", "--matrix", matrix, "--reports", reports)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert len(_records(reports)) == 1

    # Other weights in the same folder (another seed): a new measurement, run again.
    _save_pretrained(client, image_id, data, seed=1)
    proc = envbench(env, "bench", "--matrix", matrix, "--reports", reports)
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-4000:]
    records = _records(reports)
    assert len(records) == 2 and all(r["status"] == "ok" for r in records)
    shas = {r["config"]["inputs"]["model"]["sha256"] for r in records}
    assert len(shas) == 2 and model_sha in shas
    assert {r["config"]["inputs"]["reviews"]["sha256"] for r in records} == {reviews_sha}
