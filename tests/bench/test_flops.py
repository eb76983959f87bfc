"""FLOPs per sample, against counts worked out by hand from the layers' shapes.

Forward: 2 FLOPs per multiply-add of every convolution, linear layer and attention product.
A train step adds the backward pass as autograd computes it: for each layer the gradient of
its weight (as many multiply-adds as its forward) and of its input (as many again) except
where the input needs none (the data itself). Both counting methods are checked where this
torch has them: torch's FlopCounterMode (2.1 on) and bench's hooks (every torch).
"""
from __future__ import annotations

import pytest
import torch

from bench.workloads import flops, gpt, resnet
from bench.workloads import lenet as lenets


def _conv(c_in, c_out, k, out_hw, groups=1):
    """(parameters, multiply-adds) of a convolution with a bias, from its shape."""
    weights = c_out * (c_in // groups) * k * k
    return weights + c_out, out_hw * out_hw * weights


def _linear(n_in, n_out):
    return n_in * n_out + n_out, n_in * n_out


def _train(layers):
    """Forward plus backward multiply-adds: the first layer's input (the image) gets no
    gradient, every later layer's input does."""
    macs = [m for _, m in layers]
    return sum(macs) + macs[0] + 2 * sum(macs[1:])


LENET = [_conv(3, 6, 5, 28), _conv(6, 16, 5, 10), _linear(400, 120), _linear(120, 84),
         _linear(84, 10)]
LENETS = {
    "lenet": LENET,
    "lenet-gap": LENET[:2] + [_linear(16, 10)],
    "lenet-dws": [_conv(3, 3, 5, 28, groups=3), _conv(3, 6, 1, 28),
                  _conv(6, 6, 5, 10, groups=6), _conv(6, 16, 1, 10)] + LENET[2:],
}


def _methods():
    found = [flops.with_hooks]
    try:
        from torch.utils.flop_counter import FlopCounterMode  # noqa: F401
        found.append(flops.with_flop_counter)
    except ImportError:
        pass
    return found


METHODS = _methods()


@pytest.mark.parametrize("name", sorted(LENETS))
def test_lenets_forward_and_train_flops_follow_from_their_layers(name):
    layers = LENETS[name]
    net = lenets.MODELS[name]()
    assert sum(p.numel() for p in net.parameters()) == sum(p for p, _ in layers)
    for method in METHODS:
        forward, train = method(net, torch.zeros(1, 3, 32, 32))
        assert forward == 2 * sum(m for _, m in layers), (name, method.__name__)
        assert train == 2 * _train(layers), (name, method.__name__)
    # The tutorial's LeNet, as commonly quoted: 62,006 parameters, 0.65 M multiply-adds.
    assert sum(p.numel() for p in lenets.LeNet().parameters()) == 62006


def test_a_resnet_basic_block_by_hand():
    """Two 3x3 convolutions on 8x8 maps, without bias; then a downsampling block, whose 1x1
    shortcut convolution reads the block's input too."""
    same = resnet.BasicBlock(64, 64)
    down = resnet.BasicBlock(64, 128, stride=2)
    conv = 8 * 8 * 64 * 64 * 9
    # Forward: conv1 and conv2. Backward: conv1's weight (its input is the data), conv2's
    # weight and input.
    same_forward, same_train = 2 * conv, 2 * conv + conv + 2 * conv
    conv1, conv2, shortcut = 4 * 4 * 128 * 64 * 9, 4 * 4 * 128 * 128 * 9, 4 * 4 * 128 * 64
    down_forward = conv1 + conv2 + shortcut
    down_train = down_forward + conv1 + 2 * conv2 + shortcut
    for method in METHODS:
        forward, train = method(same, torch.zeros(1, 64, 8, 8))
        assert (forward, train) == (2 * same_forward, 2 * same_train), method.__name__
        forward, train = method(down, torch.zeros(1, 64, 8, 8))
        assert (forward, train) == (2 * down_forward, 2 * down_train), method.__name__


def test_a_gpt_by_hand_attention_included():
    """Per token and layer: qkv (3 d^2), projection (d^2), MLP (8 d^2) and attention's two
    products over the sequence (2 T d); the head (V d) once per token. Every input past the
    embeddings needs a gradient, so a train step is three forwards."""
    layers, width, length, vocab = 2, 32, 16, 64
    for fused in (False, True) if gpt.has_fused_attention() else (False,):
        net = gpt.GPT(layers, width, 4, length, vocab, fused)
        per_token = layers * (12 * width * width + 2 * length * width) + vocab * width
        for method in METHODS:
            forward, train = method(net, torch.zeros(1, length, dtype=torch.int64))
            assert forward == 2 * length * per_token, (fused, method.__name__)
            assert train == 3 * forward, (fused, method.__name__)


def test_counts_are_per_sample_and_a_model_that_cannot_be_counted_says_why():
    net = lenets.LeNet()
    one = flops.count(net, torch.zeros(1, 3, 32, 32))
    four = flops.count(net, torch.zeros(4, 3, 32, 32))
    assert one == four and one["forward"] == 1303440 and one["note"] is None

    class Opaque(torch.nn.Module):  # nothing the counters know: no figure, and the reason
        def forward(self, x):
            return x * 2

    nothing = flops.count(Opaque(), torch.zeros(1, 3))
    assert nothing["forward"] is None and nothing["method"] is None and nothing["note"]

    class Broken(torch.nn.Module):
        def forward(self, x):
            raise RuntimeError("cannot run on meta")

    broken = flops.count(Broken(), torch.zeros(1, 3))
    assert broken["forward"] is None and "cannot run on meta" in broken["note"]


def test_counting_leaves_the_model_and_the_random_numbers_alone():
    net = resnet.resnet18_cifar()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    torch.manual_seed(3)
    expected = torch.rand(3)
    torch.manual_seed(3)
    flops.count(net, torch.zeros(1, 3, 32, 32))
    assert torch.equal(torch.rand(3), expected)
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())
    assert all(p.grad is None for p in net.parameters())
