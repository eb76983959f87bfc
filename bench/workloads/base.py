"""The workload interface: what bench.train asks of every workload, built in or the user's.

A workload gives its data as tensors (``inputs``: "images" are uint8 N x C x H x W that the
pipelines normalise as the tutorial does, with PIL transforms in the classic pipeline;
"tensors" are the model's inputs as they are, such as token ids), its model, its loss over
(outputs, targets), the optimizer for its parameters, and how a sample is counted on the
page (``unit``, ``units_per_sample``). Its quality is test accuracy (argmax over the last
dimension of the outputs against the targets) and test loss; ``quality`` says which of the two
the page leads with.
"""
from __future__ import annotations

import torch
from torch.nn import functional as F

from bench import datasets
from bench.workloads import flops


def cross_entropy(outputs, targets):
    """Mean cross entropy over every position: (N, C) against (N,), or (N, T, V) against
    (N, T) for a language model."""
    if outputs.dim() == 2:
        return F.cross_entropy(outputs, targets)
    return F.cross_entropy(outputs.reshape(-1, outputs.shape[-1]), targets.reshape(-1))


FLOPS_BATCH = 2


class Workload(object):
    name = None
    unit = "images"
    units_per_sample = 1
    quality = "accuracy"
    inputs = "images"
    source = "builtin"
    sha256 = None
    attention = None  # "sdpa" or "explicit" where the model has attention

    def __init__(self, info, config):
        self.info = info
        self.config = config
        self.name = config["workload"]

    # -- what a run builds, in this order after seeding: data, then the model
    def data(self):
        """((train inputs, train targets), (test inputs, test targets))."""
        config = self.config
        if config["synthetic"]:
            return datasets.synthetic(config["seed"], limit=config["limit"],
                                      limit_test=config["limit_test"])
        return datasets.load_cifar(config["data"], config["limit"], config["limit_test"])

    def model(self):
        raise NotImplementedError

    def loss(self, outputs, targets):
        return cross_entropy(outputs, targets)

    def hits(self, outputs, inputs, targets):
        """(right answers, answers) of one test batch, both counted on the device: the argmax
        over the outputs' last dimension against the targets. None: this workload is not
        scored by accuracy (its quality is its loss)."""
        return (outputs.argmax(-1) == targets).sum(), targets.numel()

    def optimizer(self, parameters):
        return torch.optim.SGD(parameters, lr=self.config["lr"],
                               momentum=self.config["momentum"])

    def example(self, batch=1):
        """One batch of the model's inputs as the train step sees them (for counting FLOPs)."""
        raise NotImplementedError

    def check_options(self):
        """Options that cannot apply to this workload: a clear error before anything runs."""
        from bench.errors import UnsupportedOption

        if self.config["channels_last"] and self.inputs != "images":
            raise UnsupportedOption("--channels-last is a memory layout of 4-D image batches; "
                                    "%s's inputs are %s" % (self.name, self.unit))

    def describe_extra(self):
        """Keys this workload adds to the record's model section."""
        return {}

    def describe(self, net):
        """The record's model section: what was trained, its size, and FLOPs per sample."""
        # Two samples, counted per sample: batch norm in training mode refuses a batch of
        # one where a feature map is 1x1 (a timm ResNet-18 on 32x32 images was not counted).
        counted = flops.count(net, self.example(FLOPS_BATCH))
        section = {"name": self.name, "parameters": sum(p.numel() for p in net.parameters()),
                   "flops_per_image": counted["forward"], "flops": counted,
                   "unit": self.unit, "units_per_sample": self.units_per_sample,
                   "quality": self.quality, "source": self.source, "sha256": self.sha256,
                   "attention": self.attention}
        section.update(self.describe_extra())
        return section
