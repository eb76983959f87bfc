"""The user's workload in the forms people write it (docs/workloads.md, "Your own workload"):
a regression scored by its loss, several inputs as a tuple, a dict of named inputs with the
labels among them and a model that computes its own loss (as a Hugging Face model does),
through both pipelines. Each figure the record gives is worked out again by hand from the
weights the run saved; each misfit ends the cell in one sentence."""
from __future__ import annotations

import gzip
import importlib.util
import json
import os
import sys
import textwrap

import pytest
import torch
from bench_helpers import run_bench

from bench.tracefile import TRACE_SUFFIX

RUN = ("--device", "cpu", "--synthetic", "--epochs", "2", "--batch-size", "16",
       "--limit", "96", "--limit-test", "48", "--workers", "0")

REGRESSION = '''
import torch
from torch import nn
from torch.nn import functional as F


def sets(seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(144, 8, generator=g)
    y = x @ torch.linspace(-1, 1, 8) + 0.1 * torch.randn(144, generator=g)
    return (x[:96], y[:96]), (x[96:], y[96:])


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))

    def forward(self, x):
        return self.net(x).squeeze(-1)   # (N,) against float targets (N,)


def build(ctx):
    train, test = sets(ctx.seed)
    return {"model": Regressor(), "train": train, "test": test, "quality": "loss",
            "loss": F.mse_loss,
            "optimizer": lambda params: torch.optim.Adam(params, lr=0.01)}
'''

TUPLE = '''
import torch
from torch import nn


class TwoInputs(nn.Module):
    """A model of two inputs: features and a side vector, called model(features, side)."""

    def __init__(self):
        super().__init__()
        self.features = nn.Linear(12, 8)
        self.side = nn.Linear(4, 8)
        self.head = nn.Linear(8, 3)

    def forward(self, features, side):
        return self.head(torch.relu(self.features(features) + self.side(side)))


def sets(seed):
    g = torch.Generator().manual_seed(seed)
    features, side = torch.randn(144, 12, generator=g), torch.randn(144, 4, generator=g)
    labels = (features[:, 0] > 0).long() + (side[:, 0] > 0).long()
    return ((features[:96], side[:96]), labels[:96]), ((features[96:], side[96:]), labels[96:])


def build(ctx):
    train, test = sets(ctx.seed)
    return {"model": TwoInputs(), "train": train, "test": test,
            "optimizer": lambda params: torch.optim.Adam(params, lr=0.01)}
'''

NAMED = '''
import torch
from torch import nn
from torch.nn import functional as F


class Output(object):
    """What a Hugging Face model returns: attributes, loss among them when given labels."""

    def __init__(self, loss, logits):
        self.loss = loss
        self.logits = logits


class Classifier(nn.Module):
    """input_ids + attention_mask (+ labels), as a BERT-style classifier is called."""

    def __init__(self, vocab=40, width=16, classes=4):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.head = nn.Linear(width, classes)

    def forward(self, input_ids, attention_mask, labels=None):
        mask = attention_mask.unsqueeze(-1).float()
        pooled = (self.embed(input_ids) * mask).sum(1) / mask.sum(1).clamp(min=1)
        logits = self.head(pooled)
        loss = F.cross_entropy(logits, labels) if labels is not None else None
        return Output(loss, logits)


def sets(seed):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 40, (144, 10), generator=g)
    lengths = torch.randint(3, 11, (144,), generator=g)
    mask = (torch.arange(10)[None, :] < lengths[:, None]).long()
    labels = ids[:, 0] % 4

    def part(rows):
        return {"input_ids": ids[rows], "attention_mask": mask[rows], "labels": labels[rows]}
    return (part(slice(0, 96)), None), (part(slice(96, 144)), None)


def build(ctx):
    train, test = sets(ctx.seed)
    return {"model": Classifier(), "train": train, "test": test, "unit": "samples",
            "optimizer": lambda params: torch.optim.Adam(params, lr=0.02)}
'''


def _write(folder, name, text):
    path = os.path.join(str(folder), name)
    with open(path, "w") as f:
        f.write(textwrap.dedent(text))
    return path


def _module(path):
    spec = importlib.util.spec_from_file_location("form_%d" % abs(hash(path)), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(tmp_path, source, pipeline, *extra):
    path = _write(tmp_path, "workload.py", source)
    weights = os.path.join(str(tmp_path), "weights.pt")
    code, record, out = run_bench(tmp_path, *RUN, "--pipeline", pipeline, "--workload",
                                  "mine", "--workload-file", path, "--save-weights", weights,
                                  *extra)
    assert code == 0 and record["status"] == "ok", out[-3000:]
    module = _module(path)
    model = module.build(type("Ctx", (), {"seed": 0})())["model"]
    model.load_state_dict(torch.load(weights))
    return record, module, model.eval()


@pytest.mark.parametrize("pipeline", ["resident", "classic"])
def test_a_regression_is_scored_by_its_loss_and_has_no_accuracy(tmp_path, pipeline):
    record, module, model = _run(tmp_path, REGRESSION, pipeline)
    assert record["model"]["quality"] == "loss"
    last = record["epochs"][-1]
    assert last["test_acc"] is None and record["summary"]["final_test_acc"] is None
    # The test loss by hand: the mean squared error of the saved weights on the test set.
    _, (x, y) = module.sets(0)
    with torch.no_grad():
        by_hand = torch.nn.functional.mse_loss(model(x), y).item()
    assert last["test_loss"] == pytest.approx(by_hand, rel=1e-4)
    assert record["epochs"][0]["samples"] == 96
    # Two linear layers: 2 FLOPs per multiply-add, 8x16 + 16x1 of them per sample.
    assert record["model"]["flops"]["forward"] == 2 * (8 * 16 + 16 * 1)


@pytest.mark.parametrize("pipeline", ["resident", "classic"])
def test_a_tuple_of_inputs_is_given_to_the_model_as_arguments(tmp_path, pipeline):
    record, module, model = _run(tmp_path, TUPLE, pipeline)
    _, ((features, side), labels) = module.sets(0)
    with torch.no_grad():
        logits = model(features, side)
    accuracy = (logits.argmax(-1) == labels).float().mean().item()
    assert record["epochs"][-1]["test_acc"] == pytest.approx(accuracy)
    assert record["epochs"][-1]["test_loss"] == pytest.approx(
        torch.nn.functional.cross_entropy(logits, labels).item(), rel=1e-4)
    assert record["epochs"][0]["samples"] == 96 and record["model"]["quality"] == "accuracy"
    assert record["model"]["flops"]["forward"] == 2 * (12 * 8 + 4 * 8 + 8 * 3)


@pytest.mark.parametrize("pipeline", ["resident", "classic"])
def test_named_inputs_with_their_labels_and_the_models_own_loss(tmp_path, pipeline):
    record, module, model = _run(tmp_path, NAMED, pipeline)
    _, (inputs, _) = module.sets(0)
    with torch.no_grad():
        output = model(**inputs)
    # Accuracy reads the outputs' logits against the inputs' labels (there are no targets);
    # the loss is the one the model computed.
    accuracy = (output.logits.argmax(-1) == inputs["labels"]).float().mean().item()
    last = record["epochs"][-1]
    assert last["test_acc"] == pytest.approx(accuracy)
    assert last["test_loss"] == pytest.approx(output.loss.item(), rel=1e-4)
    assert record["epochs"][0]["samples"] == 96
    assert record["summary"]["forward_dtype"] == "float32"
    # The embedding is a lookup (no FLOPs); the head is 16 x 4 multiply-adds a sample.
    assert record["model"]["flops"]["forward"] == 2 * 16 * 4


def test_named_inputs_are_profiled_like_any_other(tmp_path):
    record, _, _ = _run(tmp_path, NAMED, "resident", "--profile")
    assert record["profile"]["samples"] > 0 and record["profile"]["operators"]
    # The embedding ran in the profiled steps: the trace holds every operator (the record's
    # top 15 by self time hold it only when the clock favours it, which a busy machine's
    # does not: it fell out once with both cores taken).
    traces = list(tmp_path.glob("*" + TRACE_SUFFIX))
    assert len(traces) == 1, traces
    with gzip.open(str(traces[0]), "rt") as f:
        events = {e.get("name") for e in json.load(f)["traceEvents"]}
    assert "aten::embedding" in events or "aten::embedding_dense_backward" in events


def _fails(tmp_path, source):
    path = _write(tmp_path, "broken.py", source)
    code, record, out = run_bench(tmp_path, *RUN, "--pipeline", "resident", "--workload",
                                  "mine", "--workload-file", path)
    assert code == 1 and record["status"] == "failed", out[-3000:]
    assert record["error"]["type"] == "WorkloadError", record["error"]
    message = record["error"]["message"]
    assert "\n" not in message
    return message


@pytest.mark.parametrize("change,said", [
    # Outputs a tuple, scored by accuracy: nothing to take the argmax of.
    (("return Output(loss, logits)", "return loss, logits"),
     "the model returned a tuple"),
    # No labels among the inputs and no targets: nothing to score accuracy against.
    (('"labels": labels[rows]}', '}'),
     "accuracy needs targets, or inputs that hold labels"),
    # Rows that do not agree, named by key.
    (('"attention_mask": mask[rows]', '"attention_mask": mask[:5]'),
     "attention_mask 5 rows"),
    # A list of numbers is no form of inputs.
    (('return (part(slice(0, 96)), None)', 'return ([1, 2], None)'),
     "inputs are a list"),
])
def test_each_misfit_of_a_form_is_one_sentence(tmp_path, change, said):
    message = _fails(tmp_path, NAMED.replace(*change))
    assert said in message, message


def test_a_tensor_without_targets_or_loss_is_told_what_is_missing(tmp_path):
    source = REGRESSION.replace('"loss": F.mse_loss,', '').replace(
        "return (x[:96], y[:96]), (x[96:], y[96:])", "return (x[:96], None), (x[96:], None)")
    message = _fails(tmp_path, source)
    assert "no targets and no loss" in message, message


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))


NORMALISED = '''
import torch
from torch import nn


def build(ctx):
    g = torch.Generator().manual_seed(ctx.seed)
    x = torch.randn(96, 8, generator=g)
    y = torch.randint(0, 3, (96,), generator=g)
    model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 3))
    return {"model": model, "train": (x, y), "test": (x[:48], y[:48])}
'''


def test_a_model_with_batch_norm_has_its_flops_counted(tmp_path):
    """Batch norm in training mode refuses a batch of one sample (a timm ResNet-18's 1x1
    feature maps did): counted on two, per sample. By hand: 8x16 + 16x3 multiply-adds
    forward; the train step adds the weight gradients of both layers and the input gradient
    of the second (the data needs none)."""
    record, _, _ = _run(tmp_path, NORMALISED, "resident")
    forward_macs = 8 * 16 + 16 * 3
    assert record["model"]["flops"]["forward"] == 2 * forward_macs, record["model"]["flops"]
    assert record["model"]["flops"]["train"] == 2 * (forward_macs + 8 * 16 + 2 * 16 * 3)
