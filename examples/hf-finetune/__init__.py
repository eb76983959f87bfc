"""Fine-tune a pretrained Hugging Face model, offline, on a data set of your own: the user's
own workload when what it starts from lies on this host, not in the workload's folder.

The matrix names two inputs (docs/workloads.md, "Inputs of your own"):

    workload:
      file: hf-finetune
      inputs:
        model: /data/bert-base-uncased     # a folder written by save_pretrained
        reviews: /data/reviews.csv         # text,label rows

Each is mounted read-only into the cell and found at ``ctx.inputs[NAME]``; its digest is part
of the result's identity, so new weights are a new measurement. A cell has no network:
``local_files_only=True`` says so to transformers, which would otherwise try the hub first.
The last fifth of the rows is the test set. transformers is declared on the environment
(``packages: ["transformers==5.25.0"]``) and locked with the stack.
"""
from __future__ import annotations

import csv

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

LENGTH = 64  # tokens per sequence, padding included (what the model computes on)


def _rows(path):
    """The texts and their labels, as the CSV holds them (columns text and label)."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    if not rows or "text" not in rows[0] or "label" not in rows[0]:
        raise ValueError("%s: expected a header line with text and label columns" % path)
    return [r["text"] for r in rows], torch.tensor([int(r["label"]) for r in rows])


def _encoded(tokenizer, texts, labels):
    """The model's inputs by name (input_ids, attention_mask, ...), labels among them: the
    model computes its own loss from them."""
    found = tokenizer(texts, padding="max_length", truncation=True, max_length=LENGTH,
                      return_tensors="pt")
    return dict(found, labels=labels)


def build(ctx):
    folder = ctx.inputs["model"]
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = AutoModelForSequenceClassification.from_pretrained(folder, local_files_only=True)
    texts, labels = _rows(ctx.inputs["reviews"])
    split = len(texts) * 4 // 5
    train = slice(0, min(split, ctx.limit or split))
    test = slice(split, split + min(len(texts) - split, ctx.limit_test or len(texts)))
    return {
        "model": model,
        "train": (_encoded(tokenizer, texts[train], labels[train]), None),
        "test": (_encoded(tokenizer, texts[test], labels[test]), None),
        "unit": "tokens",
        "units_per_sample": LENGTH,
        "quality": "accuracy",
        # Fine-tuning's usual optimizer and a small learning rate: the weights are a start.
        "optimizer": lambda parameters: torch.optim.AdamW(parameters, lr=5e-5,
                                                          weight_decay=0.01),
    }
