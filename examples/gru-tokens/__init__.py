"""A GRU over token sequences, as a folder: the user's own workload when the model lives in
several files (``__init__.py`` defines ``build``, ``model.py`` the network; they import each
other as a package does). Needs nothing beyond torch.

The task is seeded and synthetic: sequences of 32 tokens from a vocabulary of 64, each holding one
of 4 "marker" tokens somewhere in its second half, classed by which one. A recurrent model has
to carry that to the sequence's end.
"""
from __future__ import annotations

import torch

from .model import GRUClassifier

LENGTH, VOCABULARY, CLASSES = 32, 64, 4
TRAIN, TEST = 4096, 1024


def _sequences(count, seed):
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(CLASSES, VOCABULARY, (count, LENGTH), generator=generator)
    labels = torch.randint(0, CLASSES, (count,), generator=generator)
    where = torch.randint(LENGTH // 2, LENGTH, (count,), generator=generator)
    tokens[torch.arange(count), where] = labels  # tokens 0-3 are the markers
    return tokens, labels


def build(ctx):
    torch.manual_seed(ctx.seed)
    return {
        "model": GRUClassifier(VOCABULARY, width=128, classes=CLASSES),
        "train": _sequences(min(TRAIN, ctx.limit or TRAIN), ctx.seed),
        "test": _sequences(min(TEST, ctx.limit_test or TEST), ctx.seed + 1),
        "unit": "tokens",
        "units_per_sample": LENGTH,
        "optimizer": lambda parameters: torch.optim.Adam(parameters, lr=2e-3),
    }
