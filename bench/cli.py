"""Command line: parse options, run, and always leave a result file behind.

Exit codes: 0 ok, 1 the run failed (a ``status: failed`` record was written), 2 bad usage.
"""
from __future__ import annotations

import platform
import signal
import sys
import time
import traceback

from bench import errors, interrupts, result, tracefile
from bench.errors import Terminated
from bench.fingerprint import bench_sha256
from bench.options import parse_config
from bench.rules import FailureKind

# The guard lives in bench.interrupts: the training loop asks it at every step.
_on_sigterm = interrupts.SIGTERM


def main(argv=None):
    started = time.perf_counter()
    args, config = parse_config(argv)
    # Under docker's init, SIGTERM reaches bench: end with a record saying so, not silently.
    signal.signal(signal.SIGTERM, _on_sigterm)
    record = result.new_record(config)
    try:
        with _on_sigterm.deferred():
            from bench import train  # imports torch: inside the try so a broken torch is recorded

        train.run(config, record, args.rendezvous)
        record["status"] = "ok"
        code = 0
    except KeyboardInterrupt:
        record["error"] = {"type": FailureKind.INTERRUPTED, "message": "interrupted by the user"}
        code = 130
    except Terminated:
        record["error"] = {"type": FailureKind.INTERRUPTED,
                           "message": STOPPED}
        code = 143
    except Exception as exc:
        record["error"] = errors.describe(exc)
        if not errors.is_expected(exc):
            traceback.print_exc()
        print("error: %s: %s" % (record["error"]["type"], record["error"]["message"]),
              file=sys.stderr, flush=True)
        code = 1
    if _secondary_node():
        # The first node's bench writes the cell's one result; this node's part is its exit
        # code and its output (a failure here also fails rank 0's next collective).
        print("envbench: this node's ranks %s" % ("finished" if code == 0 else "failed"),
              file=sys.stderr, flush=True)
        return code
    tracefile.place_trace(record, args.out)
    _fill_env_if_missing(record)
    # The whole process after start-up, torch import included: the host subtracts it from a
    # cell's wall time to measure its own overhead.
    record["run_s"] = round(time.perf_counter() - started, 3)
    result.write_atomic(args.out, record)
    return code


def _secondary_node():
    """Whether this bench is a node after the first of a --nodes run (it met the others).
    bench.parallel imports torch: asked only where the run got that far."""
    parallel = sys.modules.get("bench.parallel")
    return parallel is not None and parallel.secondary_node()


# bench cannot tell who stopped its container: the runtime's own words (Docker's, Podman's, a
# Slurm job's end) are the host's to add.
STOPPED = ("stopped by SIGTERM: its container was stopped (docker or podman stop, the engine "
           "shutting down, or the batch job that ran it ending)")


def _fill_env_if_missing(record):
    """A run that failed before fingerprinting still says which bench and Python it was."""
    env = record["env"]
    for key in result.REQUIRED["env"]:
        env.setdefault(key, None)
    env["python"] = env["python"] or platform.python_version()
    env["bench_sha256"] = env["bench_sha256"] or bench_sha256()
    if env["image"] is None:
        env["image"] = {"tag": None, "id": None}
