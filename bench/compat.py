"""Feature detection across torch 1.12 .. 2.x: what an image's torch can do, or a clear error."""
from __future__ import annotations

import contextlib
import os
import warnings

import torch

from bench.errors import UnsupportedOption


def torch_version():
    return torch.__version__.split("+")[0]


def autocast_factory(device, amp):
    """Return a zero-argument callable giving the autocast context for this run."""
    if amp == "off":
        return contextlib.nullcontext
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[amp]
    if not hasattr(torch, "autocast"):
        raise UnsupportedOption("--amp %s needs torch>=1.10, image has %s" % (amp, torch_version()))
    if device.type == "cuda" and amp == "bf16":
        # torch >= 2.4's is_bf16_supported() counts emulation and says True on a T4 or V100,
        # torch 1.12 refuses: the capability decides, so one matrix means one thing.
        major, minor = torch.cuda.get_device_capability(device)
        if major < 8:
            raise UnsupportedOption("--amp bf16 needs compute capability 8.0 or newer "
                                    "(bfloat16 tensor cores); this %s is %d.%d"
                                    % (torch.cuda.get_device_name(device), major, minor))
    disabled = autocast_disabled(device.type, dtype)
    if disabled:
        raise UnsupportedOption("--amp %s on %s is not supported by torch %s (%s)"
                                % (amp, device.type, torch_version(), disabled))
    return lambda: torch.autocast(device.type, dtype=dtype)


def autocast_disabled(device_type, dtype):
    """Why autocast to ``dtype`` would run in fp32 instead, or None where it really casts.

    torch turns an unsupported autocast dtype into a warning and a context that does nothing
    (its _enabled is False, from 1.10 on); a benchmark that silently measured fp32 under an
    "amp" label would be a lie. Only that decides: another warning raised while the context is
    built (a deprecation, say) says nothing about the dtype and must not switch amp off.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        probe = torch.autocast(device_type, dtype=dtype)
    said = [str(w.message).strip() for w in caught]
    enabled = getattr(probe, "_enabled", None)
    if enabled is None:  # a torch without the attribute: its own warning is the only word
        said = [text for text in said if "disabling autocast" in text.lower()]
        return said[0] if said else None
    if enabled:
        return None
    told = [text for text in said if "autocast" in text.lower()]
    return " ".join(told[0].split()) if told else "autocast disabled"


def grad_scaler(device, amp):
    """fp16 on CUDA needs loss scaling; everything else runs unscaled."""
    if amp != "fp16" or device.type != "cuda":
        return None
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler("cuda")
    return torch.cuda.amp.GradScaler()


def compile_model(model, mode):
    if mode == "off":
        return model
    if not hasattr(torch, "compile"):
        raise UnsupportedOption("--compile needs torch>=2.0, image has %s" % torch_version())
    return torch.compile(model) if mode == "default" else torch.compile(model, mode=mode)


def make_deterministic():
    # cuBLAS needs a fixed workspace for reproducible results; it must be set before CUDA
    # initialises, which is why the CLI calls this before building anything on the device.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


def is_out_of_memory(exc):
    oom = getattr(torch.cuda, "OutOfMemoryError", None)
    if oom is not None and isinstance(exc, oom):
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc)
