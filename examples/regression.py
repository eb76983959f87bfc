"""A regression MLP: the user's own workload when the targets are numbers, not classes.

``quality: "loss"``: no accuracy is computed (the page leads with the test loss), the outputs
are one number per sample, and the loss is the mean squared error the model is trained on.
The data are seeded: 16 features, and a target that is a fixed smooth function of them plus
noise, so the test loss falls as the model learns it. Needs nothing beyond torch.
"""
from __future__ import annotations

import torch
from torch import nn

FEATURES = 16
TRAIN, TEST = 8192, 2048  # samples, unless the matrix's limits ask for fewer


def _samples(count, seed):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(count, FEATURES, generator=generator)
    weights = torch.linspace(-1.0, 1.0, FEATURES)
    y = torch.sin(x @ weights) + 0.1 * (x[:, 0] * x[:, 1])
    return x, y + 0.05 * torch.randn(count, generator=generator)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(FEATURES, 256), nn.ReLU(), nn.Linear(256, 256),
                                    nn.ReLU(), nn.Linear(256, 1))

    def forward(self, x):
        return self.layers(x).squeeze(-1)  # one number per sample, as the targets are


def build(ctx):
    torch.manual_seed(ctx.seed)
    return {
        "model": MLP(),
        "train": _samples(min(TRAIN, ctx.limit or TRAIN), ctx.seed),
        "test": _samples(min(TEST, ctx.limit_test or TEST), ctx.seed + 1),
        "quality": "loss",
        "loss": nn.functional.mse_loss,
        "optimizer": lambda parameters: torch.optim.Adam(parameters, lr=1e-3),
    }
