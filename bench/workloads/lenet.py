"""lenet, lenet-gap, lenet-dws on CIFAR-10: the write-up's experiment and its lighter LeNets.

The models are bench.model's (the tutorial's LeNet as it defines it); the loss is the
tutorial's nn.CrossEntropyLoss, the optimizer its SGD(lr 0.001, momentum 0.9) unless the
command line says otherwise.
"""
from __future__ import annotations

import torch
from torch import nn

from bench import model as lenets
from bench.workloads.base import Workload


class LeNetWorkload(Workload):
    def __init__(self, info, config):
        super().__init__(info, config)
        self.criterion = nn.CrossEntropyLoss()

    def model(self):
        return lenets.MODELS[self.name]()

    def loss(self, outputs, targets):
        return self.criterion(outputs, targets)

    def example(self, batch=1):
        return torch.zeros(batch, 3, 32, 32)


def make(info, config):
    return LeNetWorkload(info, config)
