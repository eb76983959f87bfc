"""--quantize-eval dynamic: the test pass once more with the linear layers quantised to int8.

torch.ao.quantization.quantize_dynamic stores the weights of nn.Linear as int8 and quantises
activations on the fly; it runs on CPU only. The float model's test pass is timed on the same
CPU, on the same batches, so the two figures sit side by side.
"""
from __future__ import annotations

import copy
import io
import warnings
from time import perf_counter

import torch
from torch import nn

from bench.compat import torch_version
from bench.errors import UnsupportedOption


def quantize_dynamic_fn():
    """torch.ao.quantization.quantize_dynamic, or a clear error where this torch lacks it."""
    ao = getattr(torch, "ao", None)
    quantization = getattr(ao, "quantization", None) if ao is not None else None
    fn = getattr(quantization, "quantize_dynamic", None)
    if fn is None:
        raise UnsupportedOption("--quantize-eval dynamic needs torch.ao.quantization "
                                "(torch>=1.10), image has %s" % torch_version())
    engines = getattr(torch.backends.quantized, "supported_engines", [])
    if not [e for e in engines if e != "none"]:
        raise UnsupportedOption("--quantize-eval dynamic: torch %s in this image has no "
                                "quantized engine (fbgemm, x86, qnnpack)" % torch_version())
    return fn


def _state_bytes(model):
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    return buffer.tell()


def _test_pass(model, batches):
    correct = total = 0
    start = perf_counter()
    with torch.no_grad():
        for images, labels in batches:
            correct += int((model(images).argmax(-1) == labels).sum())
            total += int(labels.numel())
    return correct / max(total, 1), perf_counter() - start


def _on_cpu(inputs):
    inputs = inputs.detach().to("cpu")
    return (inputs.float() if inputs.is_floating_point() else inputs).contiguous()


def evaluate(net, test_batches):
    """Float and dynamically quantised test passes on CPU: accuracy, seconds, weight bytes."""
    quantize_dynamic = quantize_dynamic_fn()
    # The test set on the CPU once, in plain float32 NCHW (token ids stay integers), outside
    # both timings.
    batches = [(_on_cpu(inputs), labels.to("cpu")) for inputs, labels in test_batches]
    float_model = copy.deepcopy(net).to("cpu").float().eval()
    with warnings.catch_warnings():
        # Recent torch warns that quantized tensor types will go; the log needs no page of it.
        warnings.simplefilter("ignore", UserWarning)
        quantized = quantize_dynamic(copy.deepcopy(float_model), {nn.Linear}, dtype=torch.qint8)
    float_acc, float_s = _test_pass(float_model, batches)
    quant_acc, quant_s = _test_pass(quantized, batches)
    return {
        "method": "dynamic", "dtype": "qint8", "layers": ["Linear"], "device": "cpu",
        "engine": torch.backends.quantized.engine,
        "float_test_acc": float_acc, "float_test_s": round(float_s, 6),
        "float_weight_bytes": _state_bytes(float_model),
        "test_acc": quant_acc, "test_s": round(quant_s, 6),
        "weight_bytes": _state_bytes(quantized),
    }
