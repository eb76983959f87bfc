"""A Vision Transformer on CIFAR-10: a user's own workload, the worked example of the contract
in docs/workloads.md ("Your own workload").

envbench mounts this folder read-only into each cell and calls ``build(ctx)`` there; the host
never imports it. It needs einops, which the matrix declares on the environment
(``packages: ["einops==0.8.2"]``), so that it is locked with hashes with the rest of the stack.
"""
from __future__ import annotations

import torch

from .model import ViT


def build(ctx):
    """The model, CIFAR-10 as bench reads it (its seeded stand-in on synthetic data), and the
    optimizer ViTs are trained with."""
    train, test = ctx.cifar10()  # uint8 N x 3 x 32 x 32 images, int64 labels
    model = ViT(image=32, patch=4, classes=10, width=192, depth=6, heads=3, mlp=384)
    return {
        "model": model,
        "train": train,
        "test": test,
        "inputs": "images",  # normalised by bench's pipelines, as the tutorial does
        "unit": "images",
        "quality": "accuracy",
        "optimizer": lambda parameters: torch.optim.AdamW(parameters, lr=1e-3,
                                                          weight_decay=0.05),
    }
