"""resnet18-cifar and resnet50: the two ResNets people benchmark, defined here (no torchvision).

resnet18-cifar  ResNet-18 as the CIFAR literature trains it (He et al. 2016's blocks with a
                3x3 stem and no max-pool, as in the widely used pytorch-cifar code): 11.2 M
                parameters, on CIFAR-10, SGD with momentum and weight decay 5e-4.
resnet50        ResNet-50 v1.5 (the stride of a downsampling bottleneck on its 3x3
                convolution, as torchvision and NVIDIA's reference define it): 25.6 M
                parameters, on seeded ImageNet-shaped images (3x224x224, 1000 classes) as
                Lambda's benchmark measures it, SGD with momentum and weight decay 1e-4.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from bench import datasets, workloads


def conv3x3(c_in, c_out, stride=1):
    return nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)


def conv1x1(c_in, c_out, stride=1):
    return nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False)


def _shortcut(c_in, c_out, stride):
    """Identity where the shape is kept; else a strided 1x1 convolution and batch norm."""
    if stride == 1 and c_in == c_out:
        return nn.Identity()
    return nn.Sequential(conv1x1(c_in, c_out, stride), nn.BatchNorm2d(c_out))


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, c_in, width, stride=1):
        super().__init__()
        self.conv1 = conv3x3(c_in, width, stride)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = conv3x3(width, width)
        self.bn2 = nn.BatchNorm2d(width)
        self.shortcut = _shortcut(c_in, width, stride)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, c_in, width, stride=1):
        super().__init__()
        c_out = width * self.expansion
        self.conv1 = conv1x1(c_in, width)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = conv3x3(width, width, stride)  # v1.5: the stride is here
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = conv1x1(width, c_out)
        self.bn3 = nn.BatchNorm2d(c_out)
        self.shortcut = _shortcut(c_in, c_out, stride)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + self.shortcut(x))


def _stages(block, counts, c_in):
    layers = []
    for index, count in enumerate(counts):
        width = 64 * 2 ** index
        for position in range(count):
            stride = 2 if index > 0 and position == 0 else 1
            layers.append(block(c_in, width, stride))
            c_in = width * block.expansion
    return nn.Sequential(*layers), c_in


class ResNet(nn.Module):
    """stem -> four stages -> global average pool -> linear classifier."""

    def __init__(self, block, counts, classes, imagenet_stem):
        super().__init__()
        if imagenet_stem:  # 7x7/2 convolution and 3x3/2 max-pool: 224 -> 56
            self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False),
                                      nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                                      nn.MaxPool2d(3, stride=2, padding=1))
        else:  # CIFAR: a 3x3 convolution keeps the 32x32 image
            self.stem = nn.Sequential(conv3x3(3, 64), nn.BatchNorm2d(64), nn.ReLU(inplace=True))
        self.stages, width = _stages(block, counts, 64)
        self.fc = nn.Linear(width, classes)

    def forward(self, x):
        x = self.stages(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def resnet18_cifar():
    return ResNet(BasicBlock, (2, 2, 2, 2), 10, imagenet_stem=False)


def resnet50():
    return ResNet(Bottleneck, (3, 4, 6, 3), 1000, imagenet_stem=True)


# ImageNet-shaped synthetic set: enough images for a steady epoch on a large GPU at the
# default batch (about 2 s on an H100-class GPU under AMP); a CPU cell sets limit.
IMAGENET_TRAIN = 5120
IMAGENET_TEST = 512


MODELS = {"resnet18-cifar": resnet18_cifar, "resnet50": resnet50}


def _data(ctx):
    if ctx.workload == "resnet50":
        return datasets.synthetic_imagenet(ctx.seed, IMAGENET_TRAIN, IMAGENET_TEST,
                                           limit=ctx.limit, limit_test=ctx.limit_test)
    return ctx.cifar10()


def build(ctx):
    """The data first, then the model (the seeded RNG's order); SGD with momentum and the
    weight decay of the catalog's recipe."""
    weight_decay = workloads.info(ctx.workload).weight_decay
    train, test = _data(ctx)

    def optimizer(parameters):
        return torch.optim.SGD(parameters, lr=ctx.lr, momentum=ctx.momentum,
                               weight_decay=weight_decay)

    return {"model": MODELS[ctx.workload](), "train": train, "test": test, "inputs": "images",
            "unit": "images", "optimizer": optimizer}
