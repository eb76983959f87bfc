"""Command line: parse options, run, and always leave a result file behind.

Exit codes: 0 ok, 1 the run failed (a ``status: failed`` record was written), 2 bad usage.
"""
from __future__ import annotations

import argparse
import signal
import sys
import time
import traceback

from bench import result

AMP = ("off", "fp16", "bf16")
COMPILE = ("off", "default", "reduce-overhead", "max-autotune")
MODELS = ("lenet", "lenet-gap", "lenet-dws")  # bench.model.MODELS, without importing torch
PARALLEL = ("none", "dp", "ddp")
ON_OFF = ("on", "off")


def _positive(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be >= 1, got %s" % text)
    return value


def _non_negative(text):
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be >= 0, got %s" % text)
    return value


def parser():
    p = argparse.ArgumentParser(prog="python -m bench",
                                description="Instrumented LeNet/CIFAR-10 training benchmark.")
    p.add_argument("--device", choices=("cpu", "cuda"), required=True)
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", metavar="DIR", help="folder holding cifar-10-batches-py/")
    source.add_argument("--synthetic", action="store_true", help="seeded in-memory data")
    p.add_argument("--epochs", type=_positive, required=True)
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


def config_from(args):
    """The options as the run uses them: the copy options' defaults follow the device."""
    config = {k: v for k, v in vars(args).items() if k != "out"}
    for key in ("pin_memory", "non_blocking"):
        if config[key] is None:
            config[key] = "on" if config["device"] == "cuda" else "off"
    return config


def parse_config(argv):
    """Parse and resolve ``argv``: what the host calls to know a cell's config in advance."""
    args = parser().parse_args(argv)
    return args, config_from(args)


class Terminated(Exception):
    """SIGTERM: `docker stop`, or an engine shutting down, asked bench to end."""


class _SigtermGuard(object):
    """Raise Terminated on SIGTERM, except while an extension module loads.

    An exception raised from a signal handler in the middle of ``import torch`` (while
    torch._C initialises) leaves the interpreter broken: the next call fails with
    "SystemError: bad call flags" and the process segfaults. So during the import the
    signal is only noted, and Terminated is raised as soon as the import is over.
    """

    def __init__(self):
        self.deferring = False
        self.pending = False

    def __call__(self, signum, frame):
        if self.deferring:
            self.pending = True
            return
        raise Terminated()

    def deferred(self):
        guard = self

        class _Deferred(object):
            def __enter__(self):
                guard.deferring = True

            def __exit__(self, *exc_info):
                guard.deferring = False
                if guard.pending and exc_info[0] is None:
                    raise Terminated()
                return False

        return _Deferred()


_on_sigterm = _SigtermGuard()


def main(argv=None):
    started = time.perf_counter()
    args, config = parse_config(argv)
    # Under docker's init, SIGTERM reaches bench: end with a record saying so, not silently.
    signal.signal(signal.SIGTERM, _on_sigterm)
    record = result.new_record(config)
    try:
        with _on_sigterm.deferred():
            from bench import train  # imports torch: inside the try so a broken torch is recorded

        train.run(config, record)
        record["status"] = "ok"
        code = 0
    except KeyboardInterrupt:
        record["error"] = {"type": "Interrupted", "message": "interrupted by the user"}
        code = 130
    except Terminated:
        record["error"] = {"type": "Interrupted",
                           "message": "stopped by SIGTERM (docker stop, or the Docker engine "
                                      "shutting down)"}
        code = 143
    except Exception as exc:
        record["error"] = describe(exc)
        expected = record["error"]["type"] in ("DataError", "UnsupportedOption",
                                               "DeviceUnavailable", "OutOfMemory",
                                               "RankFailed")
        if not expected:
            traceback.print_exc()
        print("error: %s: %s" % (record["error"]["type"], record["error"]["message"]),
              file=sys.stderr, flush=True)
        code = 1
    _fill_env_if_missing(record)
    # The whole process after start-up, torch import included: the host subtracts it from a
    # cell's wall time to measure its own overhead.
    record["run_s"] = round(time.perf_counter() - started, 3)
    result.write_atomic(args.out, record)
    return code


def describe(exc):
    if "bench.compat" not in sys.modules:
        # torch never finished importing: importing it again from here could crash.
        return {"type": type(exc).__name__, "message": str(exc)}
    try:
        from bench.compat import is_out_of_memory

        if is_out_of_memory(exc):
            return {"type": "OutOfMemory", "message": str(exc).splitlines()[0][:500]}
    except ImportError:
        pass
    return {"type": type(exc).__name__, "message": str(exc)}


def _fill_env_if_missing(record):
    """A run that failed before fingerprinting still says which bench and Python it was."""
    import platform

    from bench.fingerprint import bench_sha256

    env = record["env"]
    for key in result.REQUIRED["env"]:
        env.setdefault(key, None)
    env["python"] = env["python"] or platform.python_version()
    env["bench_sha256"] = env["bench_sha256"] or bench_sha256()
    if env["image"] is None:
        env["image"] = {"tag": None, "id": None}
