"""The models: the CIFAR-10 tutorial's LeNet, and the write-up's two lighter versions of it.

lenet      exactly as the PyTorch CIFAR-10 tutorial defines it.
lenet-gap  the same convolutions, then global average pooling and one small linear layer in
           place of the three fully connected layers (which hold 95% of LeNet's parameters).
lenet-dws  the same network with each 5x5 convolution made depthwise separable: a per-channel
           5x5 convolution followed by a 1x1 convolution that mixes the channels.
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


def parameter_count(model):
    return sum(p.numel() for p in model.parameters())


def flops_per_image(model):
    """Forward FLOPs for one 3x32x32 image, counting 2 per multiply-add of the convolutions
    and linear layers (pooling, activations and the loss are left out, as usual)."""
    macs = []

    def conv_hook(module, inputs, output):
        kernel = module.kernel_size[0] * module.kernel_size[1]
        macs.append(output.numel() * (module.in_channels // module.groups) * kernel)

    def linear_hook(module, inputs, output):
        macs.append(output.numel() * module.in_features)

    hooks = []
    for module in model.modules():
        if isinstance(module, nn.Conv2d):
            hooks.append(module.register_forward_hook(conv_hook))
        elif isinstance(module, nn.Linear):
            hooks.append(module.register_forward_hook(linear_hook))
    try:
        with torch.no_grad():
            model(torch.zeros(1, 3, 32, 32))
    finally:
        for hook in hooks:
            hook.remove()
    return 2 * sum(macs)


def describe(name):
    """The model section of a result: its name, parameters and forward FLOPs per image."""
    model = MODELS[name]()
    return {"name": name, "parameters": parameter_count(model),
            "flops_per_image": flops_per_image(model)}
