"""Benchmark: the write-up's techniques on this CPU, side by side, in interleaved rounds.

For each model (lenet, lenet-gap, lenet-dws) it runs bench with --parallel none and with
--parallel ddp --nproc 2 (the same threads, split between two ranks), alternating runs in
rounds so that drift on the machine hits every variant alike, and prints each model's
parameters and FLOPs, the median steady epoch over rounds, and ddp's speedup and efficiency.

    python perf/techniques_cpu.py [--python PY] [--rounds 3] [--epochs 3]
                                        [--limit 20000] [--threads 2]

Run it alone: on a small machine any other load makes the figures meaningless.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = ("lenet", "lenet-gap", "lenet-dws")
MODES = (("none", ()), ("ddp x2", ("--parallel", "ddp", "--nproc", "2")))


def run(python: str, model: str, extra: tuple, args: argparse.Namespace, folder: str) -> dict:
    out = os.path.join(folder, "r.json")
    cmd = [python, "-m", "bench", "--device", "cpu", "--synthetic", "--pipeline", "resident",
           "--epochs", str(args.epochs), "--batch-size", str(args.batch_size), "--limit",
           str(args.limit), "--limit-test", "2000", "--threads", str(args.threads),
           "--workload", model, *extra, "--out", out]
    proc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)
    with open(out) as f:
        record = json.load(f)
    if record["status"] != "ok":
        sys.exit("%s %s failed: %s\n%s" % (model, extra, record["error"], proc.stdout[-2000:]))
    return record


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--limit", type=int, default=20000)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    medians: dict = {}
    described: dict = {}
    torch_version = None
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(args.rounds):
            for model in MODELS:
                for mode, extra in MODES:
                    record = run(args.python, model, extra, args, folder)
                    medians.setdefault((model, mode), []).append(
                        record["summary"]["epoch_s_median"])
                    described[model] = record["model"]
                    torch_version = record["env"]["torch"]
    print("torch %s, %s, batch %d per rank, %d synthetic images, %d epochs (median of the "
          "later ones), %d interleaved rounds, %d threads in all"
          % (torch_version, args.python, args.batch_size, args.limit, args.epochs, args.rounds,
             args.threads))
    print("| model | parameters | MFLOPs/image | none: epoch (s) | ddp x2: epoch (s) | ddp "
          "speedup | efficiency |\n|---|---|---|---|---|---|---|")
    for model in MODELS:
        none = statistics.median(medians[(model, "none")])
        ddp = statistics.median(medians[(model, "ddp x2")])
        print("| %s | %d | %.3f | %.3f (%s) | %.3f (%s) | %.2fx | %.0f%% |" % (
            model, described[model]["parameters"], described[model]["flops_per_image"] / 1e6,
            none, ", ".join("%.3f" % v for v in medians[(model, "none")]),
            ddp, ", ".join("%.3f" % v for v in medians[(model, "ddp x2")]),
            none / ddp, 50 * none / ddp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
