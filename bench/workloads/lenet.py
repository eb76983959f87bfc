"""lenet, lenet-gap, lenet-dws on CIFAR-10: the write-up's experiment and its lighter LeNets,
their models and their workload.

lenet      exactly as the PyTorch CIFAR-10 tutorial defines it.
lenet-gap  the same convolutions, then global average pooling and one small linear layer in
           place of the three fully connected layers (which hold 95% of LeNet's parameters).
lenet-dws  the same network with each 5x5 convolution made depthwise separable: a per-channel
           5x5 convolution followed by a 1x1 convolution that mixes the channels.

The loss is the tutorial's cross entropy, the optimizer its SGD(lr 0.001, momentum 0.9) unless
the command line says otherwise: the workload contract's defaults (bench.workloads.interface).
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class LeNetGAP(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(x)


def separable(in_channels, out_channels, kernel):
    return nn.Sequential(nn.Conv2d(in_channels, in_channels, kernel, groups=in_channels),
                         nn.Conv2d(in_channels, out_channels, 1))


class LeNetDWS(LeNet):
    def __init__(self):
        super().__init__()
        self.conv1 = separable(3, 6, 5)
        self.conv2 = separable(6, 16, 5)


MODELS = {"lenet": LeNet, "lenet-gap": LeNetGAP, "lenet-dws": LeNetDWS}


def build(ctx):
    """The data first, then the model: the order in which they draw from the seeded RNG.
    The loss and the optimizer are the contract's defaults, the tutorial's: cross entropy,
    and SGD with the run's lr and momentum."""
    train, test = ctx.cifar10()
    return {"model": MODELS[ctx.workload](), "train": train, "test": test, "inputs": "images",
            "unit": "images"}
