"""bench's options: the one parser, and the config a run records for them.

Imports neither torch nor anything that does: the host calls ``parse_config`` to know, before
a cell runs, the config bench will record for its command line.
"""
from __future__ import annotations

import argparse
import re
from typing import Any, Dict, List, Tuple

from bench import rules, workloads

AMP = ("off", "fp16", "bf16")
COMPILE = ("off", "default", "reduce-overhead", "max-autotune")
PARALLEL = ("none", "dp", "ddp")
# A user workload's name: the matrix's, shown on the page and in file names.
WORKLOAD_NAME = rules.NAME
FUNCTION_NAME = rules.FUNCTION_NAME
SHA256 = rules.SHA256
INPUT_NAME = rules.INPUT_NAME
ON_OFF = ("on", "off")


MAX_EPOCHS = rules.MAX_EPOCHS


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


def _host_port(text: str) -> Tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError("%r is not HOST:PORT (a port from 1 to 65535)" % text)
    return host.strip("[]"), int(port)


def _matching(pattern: "re.Pattern[str]", what: str):
    def check(text: str) -> str:
        if not pattern.match(text):
            raise argparse.ArgumentTypeError("%r is not %s" % (text, what))
        return text
    return check


def _named(value_pattern: "re.Pattern[str] | None", what: str):
    """NAME=VALUE: an input's name, then its path (any text) or its digest."""
    def check(text: str) -> Tuple[str, str]:
        name, sep, value = text.partition("=")
        if not sep or not INPUT_NAME.match(name):
            raise argparse.ArgumentTypeError("%r is not NAME=%s (NAME: letters, digits, _ "
                                             "and -)" % (text, what))
        if not value or (value_pattern is not None and not value_pattern.match(value)):
            raise argparse.ArgumentTypeError("%r: %r is not %s" % (text, value, what))
        return name, value
    return check


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench",
                                description="Instrumented PyTorch training benchmark: the "
                                            "tutorial's LeNet on CIFAR-10, ResNets, a GPT, "
                                            "or your own workload.")
    p.add_argument("--device", choices=("cpu", "cuda"), required=True)
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", metavar="DIR", help="folder holding cifar-10-batches-py/")
    source.add_argument("--synthetic", action="store_true", help="seeded in-memory data")
    p.add_argument("--epochs", type=_epochs, required=True)
    p.add_argument("--batch-size", type=_positive, required=True)
    p.add_argument("--pipeline", choices=("classic", "resident"), required=True)
    p.add_argument("--workers", type=_non_negative, default=2, help="DataLoader workers (classic)")
    p.add_argument("--workload", "--model", dest="workload", default=workloads.DEFAULT,
                   type=_matching(WORKLOAD_NAME, "a workload name"),
                   help="what to train: %s; with --workload-file, the name your workload is "
                        "shown under" % ", ".join(workloads.NAMES))
    p.add_argument("--workload-file", metavar="PATH", default=None,
                   help="your own workload: a .py file, or a folder that is a package")
    p.add_argument("--workload-function", default=None,
                   type=_matching(FUNCTION_NAME, "a Python function name"),
                   help="the function in --workload-file that builds it (default: build)")
    p.add_argument("--workload-sha256", default=None, type=_matching(SHA256, "a sha256"),
                   help="the digest --workload-file must have (the host's; checked)")
    p.add_argument("--input", dest="input", action="append", default=None,
                   type=_named(None, "PATH"), metavar="NAME=PATH",
                   help="a read-only input of your workload (weights, a data set): build(ctx) "
                        "finds PATH at ctx.inputs[NAME]; once per input")
    p.add_argument("--input-sha256", dest="input_sha256", action="append", default=None,
                   type=_named(SHA256, "a sha256"), metavar="NAME=SHA256",
                   help="the digest of --input NAME as the host took it (recorded, and part "
                        "of the result's identity)")
    p.add_argument("--parallel", choices=PARALLEL, default="none",
                   help="dp: nn.DataParallel over the GPUs; ddp: DistributedDataParallel, one "
                        "process per GPU (NCCL) or per CPU share (gloo)")
    p.add_argument("--nproc", type=_positive, default=None,
                   help="devices or ranks for dp/ddp (default: the visible GPUs; required "
                        "for ddp on CPU)")
    p.add_argument("--nodes", type=_positive, default=1,
                   help="machines the ddp run spans, --nproc ranks on each (one bench per "
                        "node, as srun starts them; with --rendezvous)")
    p.add_argument("--rendezvous", metavar="HOST:PORT", default=None, type=_host_port,
                   help="where the nodes of a --nodes run meet: the first node's address and "
                        "a free port (its bench hosts the store there)")
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
    p.add_argument("--lr", type=float, default=None,
                   help="learning rate (default: the workload's; the tutorial's 0.001 for "
                        "the LeNets)")
    p.add_argument("--momentum", type=float, default=None,
                   help="SGD's momentum, or AdamW's beta1 for the GPTs (default: the "
                        "workload's, 0.9)")
    p.add_argument("--limit", type=_positive, default=None, help="use the first N train images")
    p.add_argument("--limit-test", type=_positive, default=None, help="first N test images")
    p.add_argument("--profile", action="store_true",
                   help="after the timed epochs, profile a few more steps with torch.profiler: "
                        "top operators in the result, a Chrome trace beside it")
    p.add_argument("--probe", choices=ON_OFF, default="on",
                   help="after the timed epochs, measure the best matmul rate in the run's "
                        "dtype (the ceiling the page sets achieved FLOP/s against)")
    p.add_argument("--save-weights", metavar="FILE", default=None)
    p.add_argument("--out", metavar="FILE.json", required=True)
    return p


def config_from(args: argparse.Namespace) -> Dict[str, Any]:
    """The options as the run uses them: the copy options' defaults follow the device, the
    optimizer's the workload."""
    # --rendezvous is where this job's nodes meet, not what is measured: recorded in the
    # result's parallel section, kept out of the config (and so of the result's identity).
    config = {k: v for k, v in vars(args).items()
              if k not in ("out", "input", "input_sha256", "rendezvous")}
    # {NAME: {path, sha256}}; None without inputs, as every built-in workload runs.
    digests = dict(args.input_sha256 or [])
    config["inputs"] = ({name: {"path": path, "sha256": digests.get(name)}
                         for name, path in args.input} if args.input else None)
    for key in ("pin_memory", "non_blocking"):
        if config[key] is None:
            config[key] = "on" if config["device"] == "cuda" else "off"
    # A step trains batch x accumulate x devices samples (dp and ddp: nproc devices on each
    # of the nodes).
    devices = config["nproc"] if config["parallel"] != "none" and config["nproc"] else 1
    devices *= config["nodes"]
    global_batch = config["batch_size"] * config["accumulate"] * devices
    for key, value in workloads.default_optimizer(config["workload"], global_batch).items():
        if config[key] is None:
            config[key] = value
    if config["workload_file"] is not None and config["workload_function"] is None:
        config["workload_function"] = "build"
    return config


def _check_workload(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    names = [name for name, _ in args.input or []]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        p.error("--input %s given twice: one path per input" % repeated[0])
    pinned = [name for name, _ in args.input_sha256 or []]
    for name in pinned:
        if name not in names:
            p.error("--input-sha256 %s names no --input" % name)
        if pinned.count(name) > 1:
            p.error("--input-sha256 %s given twice: one digest per input" % name)
    if names and args.workload_file is None:
        p.error("--input needs --workload-file (a built-in workload reads no inputs)")
    if args.workload_file is None:
        found = workloads.info(args.workload)
        if found is None:
            p.error("--workload: unknown workload %r (built in: %s; or name your own with "
                    "--workload-file)" % (args.workload, ", ".join(workloads.NAMES)))
        for flag, value in (("--workload-function", args.workload_function),
                            ("--workload-sha256", args.workload_sha256)):
            if value is not None:
                p.error("%s needs --workload-file" % flag)
        if found.data == "synthetic" and not args.synthetic:
            p.error("--workload %s trains on seeded synthetic data (there is no data set to "
                    "give it): use --synthetic" % args.workload)
    elif workloads.info(args.workload) is not None:
        p.error("--workload %s is a built-in workload's name: give yours another"
                % args.workload)


def parse_config(argv: List[str]) -> Tuple[argparse.Namespace, Dict[str, Any]]:
    """Parse and resolve ``argv``: what the host calls to know a cell's config in advance."""
    p = parser()
    args = p.parse_args(argv)
    _check_workload(p, args)
    _check_nodes(p, args)
    return args, config_from(args)


def _check_nodes(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.nodes > 1 and args.parallel != "ddp":
        p.error("--nodes %d needs --parallel ddp (the nodes train one model together)"
                % args.nodes)
    if args.nodes == 1 and args.rendezvous is not None:
        p.error("--rendezvous is where the nodes of a --nodes run meet: give --nodes N too")
