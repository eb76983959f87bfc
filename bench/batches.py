"""A workload's inputs and outputs in the forms people write them.

Inputs (and the targets beside them) are a tensor, a tuple of tensors (the model is called
``model(*inputs)``) or a dict of tensors (``model(**inputs)``), each with one row per sample.
Everything that batches, shuffles, moves or counts them goes through here, so that every
form takes the same path through both pipelines, the train step, the test pass, the FLOP
counter and the profile.

Outputs are whatever the model returns: a tensor, a tuple, a dict, or an object with
attributes (a Hugging Face ``ModelOutput``). ``logits`` and ``own_loss`` read what accuracy
and the default loss need from each form.
"""
from __future__ import annotations

import torch


def form(part):
    """"tensor", "tuple" or "dict"; None for anything else."""
    if isinstance(part, torch.Tensor):
        return "tensor"
    if isinstance(part, (tuple, list)) and part and all(isinstance(t, torch.Tensor)
                                                        for t in part):
        return "tuple"
    if isinstance(part, dict) and part and all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                               for k, v in part.items()):
        return "dict"
    return None


def tensors(part):
    """[(name, tensor)] of a tensor, tuple or dict: names as a sentence would say them."""
    kind = form(part)
    if kind == "tensor":
        return [("", part)]
    if kind == "tuple":
        return [("[%d]" % i, t) for i, t in enumerate(part)]
    if kind == "dict":
        return list(part.items())
    return []


def shape(part):
    """A part's form and shapes as one sentence says them: (32, 10); a tuple ((32, 10),
    (32,)); a dict {input_ids (32, 128), ...}; else what it is (a ModelOutput)."""
    if isinstance(part, torch.Tensor):
        return str(tuple(part.shape))
    if part is None:
        return "None"
    kind = form(part)
    if kind == "tuple":
        return "a %s (%s)" % (type(part).__name__,
                              ", ".join(str(tuple(t.shape)) for t in part))
    if kind == "dict":
        return "a dict {%s}" % ", ".join("%s %s" % (k, tuple(v.shape))
                                         for k, v in part.items())
    return "a %s" % type(part).__name__


def apply(fn, part):
    """The same form with ``fn`` applied to each tensor; None stays None."""
    if part is None:
        return None
    if isinstance(part, torch.Tensor):
        return fn(part)
    if isinstance(part, (tuple, list)):
        return tuple(fn(t) for t in part)
    return {k: fn(v) for k, v in part.items()}


def rows(part):
    """How many samples a part holds (its tensors' first dimension, the same for all)."""
    if isinstance(part, torch.Tensor):
        return part.shape[0]
    return tensors(part)[0][1].shape[0]


def select(part, index):
    """The rows ``index`` (a slice, an int or an index tensor) of every tensor."""
    return apply(lambda t: t[index], part)


def move(part, device, non_blocking):
    return apply(lambda t: t.to(device, non_blocking=non_blocking), part)


def channels_last(part):
    """4-D floating tensors in channels_last; the others (token ids, masks) as they are."""
    def layout(t):
        if t.dim() == 4 and t.is_floating_point():
            return t.contiguous(memory_format=torch.channels_last)
        return t
    return apply(layout, part)


def call(model, inputs):
    """model(x), model(*x) or model(**x), as the inputs' form says."""
    if isinstance(inputs, torch.Tensor):
        return model(inputs)
    if isinstance(inputs, (tuple, list)):
        return model(*inputs)
    return model(**inputs)


def field(outputs, name):
    """outputs.name or outputs[name] (a ModelOutput answers both); None where it has none."""
    if isinstance(outputs, dict):
        return outputs.get(name)
    if isinstance(outputs, (torch.Tensor, tuple, list)):
        return None
    return getattr(outputs, name, None)


def logits(outputs):
    """What accuracy takes the argmax of: the tensor itself, or its ``logits``."""
    if isinstance(outputs, torch.Tensor):
        return outputs
    found = field(outputs, "logits")
    return found if isinstance(found, torch.Tensor) else None


def own_loss(outputs):
    """The loss a model computed itself (a Hugging Face model given labels); else None."""
    found = field(outputs, "loss")
    return found if isinstance(found, torch.Tensor) else None


def floating(outputs):
    """The first floating-point tensor among the outputs (for the forward's dtype)."""
    if isinstance(outputs, torch.Tensor):
        return outputs if outputs.is_floating_point() else None
    found = logits(outputs)
    if found is not None and found.is_floating_point():
        return found
    if isinstance(outputs, dict):
        candidates = list(outputs.values())
    elif isinstance(outputs, (tuple, list)):
        candidates = list(outputs)
    else:
        candidates = [v for v in vars(outputs).values()] if hasattr(outputs, "__dict__") else []
    for value in candidates:
        found = floating(value) if isinstance(value, (torch.Tensor, tuple, list, dict)) else None
        if found is not None:
            return found
    return None


def as_float(outputs):
    """Floating tensors in float32 (the test loss is taken in full precision); the form and
    any other value as they are. An object with attributes is left as it is."""
    def widen(t):
        return t.float() if t.is_floating_point() else t
    if isinstance(outputs, torch.Tensor):
        return widen(outputs)
    if isinstance(outputs, (tuple, list)) and all(isinstance(t, torch.Tensor) for t in outputs):
        return tuple(widen(t) for t in outputs)
    return outputs
