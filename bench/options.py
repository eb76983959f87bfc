"""bench's options: the one parser, and the config a run records for them.

Imports neither torch nor anything that does: the host calls ``parse_config`` to know, before
a cell runs, the config bench will record for its command line.
"""
from __future__ import annotations

import argparse
from typing import Any, Dict, List, Tuple

AMP = ("off", "fp16", "bf16")
COMPILE = ("off", "default", "reduce-overhead", "max-autotune")
MODELS = ("lenet", "lenet-gap", "lenet-dws")  # bench.model.MODELS, without importing torch
PARALLEL = ("none", "dp", "ddp")
ON_OFF = ("on", "off")


# The matrix's bound (benchmark.epochs), and the schema's: a result of more epochs is not one.
MAX_EPOCHS = 1000


def _epochs(text: str) -> int:
    value = _positive(text)
    if value > MAX_EPOCHS:
        raise argparse.ArgumentTypeError("must be <= %d, got %s" % (MAX_EPOCHS, text))
    return value


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be >= 1, got %s" % text)
    return value


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be >= 0, got %s" % text)
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench",
                                description="Instrumented LeNet/CIFAR-10 training benchmark.")
    p.add_argument("--device", choices=("cpu", "cuda"), required=True)
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", metavar="DIR", help="folder holding cifar-10-batches-py/")
    source.add_argument("--synthetic", action="store_true", help="seeded in-memory data")
    p.add_argument("--epochs", type=_epochs, required=True)
    p.add_argument("--batch-size", type=_positive, required=True)
    p.add_argument("--pipeline", choices=("classic", "resident"), required=True)
    p.add_argument("--workers", type=_non_negative, default=2, help="DataLoader workers (classic)")
    p.add_argument("--model", choices=MODELS, default="lenet",
                   help="lenet (the tutorial's), lenet-gap (global average pooling in place "
                        "of the fully connected layers), lenet-dws (depthwise separable "
                        "convolutions)")
    p.add_argument("--parallel", choices=PARALLEL, default="none",
                   help="dp: nn.DataParallel over the GPUs; ddp: DistributedDataParallel, one "
                        "process per GPU (NCCL) or per CPU share (gloo)")
    p.add_argument("--nproc", type=_positive, default=None,
                   help="devices or ranks for dp/ddp (default: the visible GPUs; required "
                        "for ddp on CPU)")
    p.add_argument("--quantize-eval", choices=("off", "dynamic"), default="off",
                   help="dynamic: test once more with int8 linear layers (CPU)")
    p.add_argument("--pin-memory", choices=ON_OFF, default=None,
                   help="pinned host memory for the classic loader (default: on for cuda)")
    p.add_argument("--non-blocking", choices=ON_OFF, default=None,
                   help="asynchronous host-to-device copies (default: on for cuda)")
    p.add_argument("--amp", choices=AMP, default="off")
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--compile", choices=COMPILE, default="off")
    p.add_argument("--accumulate", type=_positive, default=1, metavar="K",
                   help="micro-batches per optimizer step")
    p.add_argument("--threads", type=_positive, default=None, help="torch intra-op threads")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--deterministic", action="store_true")
    p.add_argument("--cudnn-benchmark", action="store_true")
    p.add_argument("--lr", type=float, default=0.001)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--limit", type=_positive, default=None, help="use the first N train images")
    p.add_argument("--limit-test", type=_positive, default=None, help="first N test images")
    p.add_argument("--save-weights", metavar="FILE", default=None)
    p.add_argument("--out", metavar="FILE.json", required=True)
    return p


def config_from(args: argparse.Namespace) -> Dict[str, Any]:
    """The options as the run uses them: the copy options' defaults follow the device."""
    config = {k: v for k, v in vars(args).items() if k != "out"}
    for key in ("pin_memory", "non_blocking"):
        if config[key] is None:
            config[key] = "on" if config["device"] == "cuda" else "off"
    return config


def parse_config(argv: List[str]) -> Tuple[argparse.Namespace, Dict[str, Any]]:
    """Parse and resolve ``argv``: what the host calls to know a cell's config in advance."""
    args = parser().parse_args(argv)
    return args, config_from(args)
