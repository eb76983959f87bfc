"""A timm ResNet-18 on CIFAR-10: the user's own workload when the model comes from a model
zoo. ``pretrained=False``: random weights, nothing is downloaded (a cell has no network).

timm (and the torchvision it imports) is declared on the environment
(``torchvision:`` and ``packages: ["timm==1.0.31"]``) and locked with the stack.
"""
from __future__ import annotations

import timm
import torch


def build(ctx):
    train, test = ctx.cifar10()  # uint8 N x 3 x 32 x 32 images, int64 labels
    torch.manual_seed(ctx.seed)  # the same random weights in every environment
    model = timm.create_model("resnet18", pretrained=False, num_classes=10)
    return {
        "model": model,
        "train": train,
        "test": test,
        "inputs": "images",  # normalised by bench's pipelines, as the tutorial does
        "unit": "images",
        "optimizer": lambda parameters: torch.optim.SGD(parameters, lr=0.05, momentum=0.9,
                                                        weight_decay=5e-4),
    }
