"""FLOPs per sample of a workload's model: forward, and forward plus backward (a train step).

Counted once per run, after the timed epochs and the memory snapshot, on a copy of the model
on torch's "meta" device (shapes only: no arithmetic, no random numbers drawn):

  flop_counter  torch.utils.flop_counter.FlopCounterMode (torch 2.1 on) counts every matrix
                multiplication and convolution torch dispatches, attention included, and
                in the backward pass exactly the gradients autograd computes (none for the
                data's own input);
  hooks         where torch lacks it: forward hooks on convolutions, linear layers and
                attention, 2 FLOPs per multiply-add; the backward pass as autograd computes
                it, the gradient of each layer's weight and, where its input needs one, of
                its input, each as many multiply-adds as the forward.

Both leave out normalisation, activations, pooling and the loss (as is usual: they are a
small share of a convolution or matmul network's work). The two agree on the built-in
workloads (tests/bench/test_flops.py); a model they cannot count gets null and the reason.

FlopCounterMode's formula for a convolution's weight gradient leaves out the groups (it
counts a depthwise convolution's weight gradient as if every channel met every other: 3x
too many for lenet-dws's first layer). Its count of that gradient is replaced here with the
same multiply-adds as the forward convolution, which is what the gradient computes.
"""
from __future__ import annotations

import copy

import torch
from torch import nn

from bench import batches
from bench.messages import first_line


def count(model, example):
    """{"forward": FLOPs, "train": FLOPs, "method": ..., "note": ...} for one sample."""
    try:
        from torch.utils.flop_counter import FlopCounterMode  # noqa: F401
    except ImportError:
        return _counted(with_hooks, model, example, "hooks")
    return _counted(with_flop_counter, model, example, "flop_counter")


def _counted(counter, model, example, method):
    try:
        forward, train = counter(model, example)
    except Exception as exc:
        # Some models cannot run on the meta device (one that reads a tensor's value, as
        # a Hugging Face model's mask handling may): count one real sample on the CPU.
        try:
            forward, train = counter(model, example, meta=False)
        except Exception:  # a model the counter cannot follow: no figure, and why
            return {"forward": None, "train": None, "method": None,
                    "note": "not counted (%s: %s)" % (type(exc).__name__,
                                                      first_line(exc, 200))}
    if not forward:
        return {"forward": None, "train": None, "method": None,
                "note": "no convolution, linear layer or attention found to count"}
    per = batches.rows(example)
    return {"forward": int(forward // per), "train": int(train // per), "method": method,
            "note": None}


def _on_meta(model, example):
    """A copy of the model and the example on the meta device; None where torch cannot."""
    try:
        return copy.deepcopy(model).to("meta"), batches.apply(lambda t: t.to("meta"), example)
    except Exception:
        return None


def _copies(model, example, meta):
    """The model and example the counter runs: on meta where it can, else on the CPU."""
    found = _on_meta(model, example) if meta else None
    return found or (copy.deepcopy(model).cpu(), batches.apply(lambda t: t.cpu(), example))


def _product(values):
    total = 1
    for value in values:
        total *= value
    return total


def conv_backward_flops(grad_out_shape, x_shape, w_shape, _bias, _stride, _padding, _dilation,
                        transposed, _output_padding, _groups, output_mask, out_shape=None,
                        **kwargs):
    """aten.convolution_backward: the input's gradient as torch counts it (a transposed
    convolution with the same weight, groups included), the weight's gradient as many
    multiply-adds as the forward (each weight meets each output position of each sample)."""
    from torch.utils.flop_counter import conv_flop_count

    flops = 0
    if output_mask[0]:
        flops += conv_flop_count(grad_out_shape, w_shape, out_shape[0], not transposed)
    if output_mask[1]:
        positions = (x_shape if transposed else grad_out_shape)[2:]
        flops += 2 * _product(w_shape) * x_shape[0] * _product(positions)
    return flops


def _flop_counter():
    from torch.utils.flop_counter import FlopCounterMode

    mapping = {torch.ops.aten.convolution_backward: conv_backward_flops}
    try:
        return FlopCounterMode(display=False, custom_mapping=mapping)
    except TypeError:  # torch 2.1-2.3 took no custom_mapping: its own formula, as it is
        return FlopCounterMode(display=False)


def with_flop_counter(model, example, meta=True):
    copied, inputs = _copies(model, example, meta)
    copied.train()
    with _flop_counter() as forward:
        batches.call(copied, inputs)
    with _flop_counter() as step:
        _backward(batches.call(copied, inputs))
    return forward.get_total_flops(), step.get_total_flops()


def _backward(outputs):
    """Backward from the outputs' sum: the gradients a loss would start (the loss's own
    arithmetic is not counted by either method). Outputs in other forms: from their logits,
    else the loss the model computed, else their first floating-point tensor."""
    start = batches.logits(outputs)
    if start is None:
        start = batches.own_loss(outputs)
    if start is None:
        start = batches.floating(outputs)
    if start is None:
        raise ValueError("the outputs hold no floating-point tensor to start a backward from")
    start.float().sum().backward()


def _attention_macs(module, inputs, output):
    """Multiply-adds of one attention call: a module that says its own (``attention_macs``,
    as bench's GPT attention does: QK^T and the weights times V), or nn.MultiheadAttention
    (batch first or not), whose projections it calls functionally, so they count here."""
    if not isinstance(module, nn.MultiheadAttention):
        return module.attention_macs(inputs[0])
    query, key = inputs[0], inputs[1]
    batch_first = getattr(module, "batch_first", False)
    lq = query.shape[1] if batch_first else query.shape[0]
    lk = key.shape[1] if batch_first else key.shape[0]
    batch = query.shape[0] if batch_first else query.shape[1]
    width = module.embed_dim
    projections = batch * (lq + 2 * lk) * width * width + batch * lq * width * width
    return projections + 2 * batch * lq * lk * width


def with_hooks(model, example, meta=True):
    """(forward FLOPs, train-step FLOPs) from hooks, on meta where torch can, else on CPU."""
    copied, inputs = _copies(model, example, meta)
    copied.train()
    forward_macs = []
    backward_macs = []

    def layer(macs, input_grad, weight_grad):
        forward_macs.append(macs)
        backward_macs.append(macs * (int(input_grad) + int(weight_grad)))

    def conv_hook(module, args, output):
        kernel = 1
        for size in module.kernel_size:
            kernel *= size
        macs = output.numel() * (module.in_channels // module.groups) * kernel
        layer(macs, args[0].requires_grad, module.weight.requires_grad)

    def linear_hook(module, args, output):
        layer(output.numel() * module.in_features, args[0].requires_grad,
              module.weight.requires_grad)

    def attention_hook(module, args, output):
        macs = _attention_macs(module, args, output)
        forward_macs.append(macs)
        backward_macs.append(2 * macs)  # both operands of both products need gradients

    hooks = []
    for module in copied.modules():
        if isinstance(module, (nn.Conv1d, nn.Conv2d, nn.Conv3d)):
            hooks.append(module.register_forward_hook(conv_hook))
        elif isinstance(module, nn.Linear) and not _inside_attention(copied, module):
            hooks.append(module.register_forward_hook(linear_hook))
        elif isinstance(module, nn.MultiheadAttention) or hasattr(module, "attention_macs"):
            hooks.append(module.register_forward_hook(attention_hook))
    try:
        with torch.enable_grad():
            batches.call(copied, inputs)
    finally:
        for hook in hooks:
            hook.remove()
    forward = 2 * sum(forward_macs)
    return forward, forward + 2 * sum(backward_macs)


def _inside_attention(root, linear):
    """nn.MultiheadAttention's out_proj is an nn.Linear it calls functionally (its hook would
    not fire, and the attention hook counts it)."""
    for module in root.modules():
        if isinstance(module, nn.MultiheadAttention) and module.out_proj is linear:
            return True
    return False
