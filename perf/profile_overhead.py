"""Benchmark: does profiling a cell change its headline? And where does each workload's CPU
time go, how far from this CPU's matmul rate?

For each workload, in interleaved rounds (the order alternates each round), two fresh bench
processes on the same torch, options and seed:
  plain     python -m bench ... --probe off
  profiled  python -m bench ... --profile (and the probe, on by default)
and prints the median steady epoch of each, the ratio profiled / plain with its 95% interval
(the kit's two-stage bootstrap: runs, then epochs), what the window and the probe cost after
the epochs, the top five operators, and achieved / achievable FLOP/s (train-step FLOPs per
sample x samples/s, over the probe's best matmul rate).

    python perf/profile_overhead.py [--rounds 5] [--epochs 3] [--workload NAME ...]

Run it alone: on a 2-core VM any other load spoils the figures (see workloads_cpu.py on the
spread between processes).
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
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "perf"))

from workloads_cpu import SIZES, bench_args  # noqa: E402  (a sibling script, not a package)


def run(name: str, args: argparse.Namespace, profiled: bool) -> dict:
    extra = ["--profile"] if profiled else ["--probe", "off"]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        subprocess.run([sys.executable, "-m", "bench", *bench_args(name, args), *extra,
                        "--out", out], cwd=ROOT, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        with open(out) as f:
            return json.load(f)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--epochs", type=int, default=3, help="per run; the first is warm-up")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workload", action="append", choices=sorted(SIZES),
                   help="only these (repeatable; default: lenet and resnet18-cifar)")
    args = p.parse_args()
    names = args.workload or ["lenet", "resnet18-cifar"]
    steady: dict[tuple[str, str], list[list[float]]] = {(n, s): [] for n in names
                                                        for s in ("plain", "profiled")}
    records: dict[str, list[dict]] = {n: [] for n in names}
    for round_index in range(args.rounds):
        for name in names:
            sides = ("plain", "profiled") if round_index % 2 == 0 else ("profiled", "plain")
            for side in sides:
                record = run(name, args, side == "profiled")
                walls = [e["wall_s"] for e in record["epochs"]]
                steady[(name, side)].append(walls[1:] or walls)
                if side == "profiled":
                    records[name].append(record)
                print("round %d  %-15s %-8s  %s" % (round_index + 1, name, side,
                                                     " ".join("%.3f" % w for w in walls)),
                      flush=True)
    import torch

    from envbench.inference import verdicts

    print("\ntorch %s, %d CPUs, %d rounds x %d epochs (the first dropped), resident pipeline"
          % (torch.__version__, os.cpu_count(), args.rounds, args.epochs))
    print("%-15s %11s %11s %7s %15s %9s %8s" % ("workload", "plain s/ep", "profiled", "ratio",
                                                "95% interval", "window s", "probe s"))
    for name in names:
        plain, profiled = steady[(name, "plain")], steady[(name, "profiled")]
        # The kit's test of the rounds' repeats (Welch's t on their logs), at 95%.
        test = verdicts.of_repeats(profiled, plain)
        low, high = (test.interval(verdicts.ALPHA) if isinstance(test, verdicts.Test)
                     else (float("nan"), float("nan")))
        a = statistics.median(statistics.median(r) for r in plain)
        b = statistics.median(statistics.median(r) for r in profiled)
        window = statistics.median(r["profile"]["window_s"] for r in records[name])
        probe = statistics.median(r["probe"]["seconds"] for r in records[name])
        print("%-15s %11.3f %11.3f %7.3f %7.3f-%-7.3f %9.3f %8.3f"
              % (name, a, b, b / a, low, high, window, probe))
    for name in names:
        rs = records[name]
        achieved = statistics.median(r["model"]["flops"]["train"] * r["summary"]["samples_per_s"]
                                     for r in rs)
        achievable = statistics.median(r["probe"]["flops_per_s"] for r in rs)
        print("\n%s: achieved %.1f GFLOP/s of an achievable %.1f GFLOP/s (%s matmul, n=%d): %.1f%%"
              % (name, achieved / 1e9, achievable / 1e9, rs[0]["probe"]["dtype"],
                 rs[0]["probe"]["n"], 100 * achieved / achievable))
        shares: dict[str, list[float]] = {}
        steps: dict[str, list[float]] = {}
        for r in rs:
            for o in r["profile"]["operators"]:
                shares.setdefault(o["name"], []).append(o["share"])
                steps.setdefault(o["name"], []).append(o["self_cpu_s"] / r["profile"]["steps"])
        top = sorted(shares, key=lambda n: -statistics.median(shares[n]))
        top = [n for n in top if n != "(other operators)"][:5]
        for n in top:
            print("  %-40s %6.1f%%  %8.3f ms/step" % (n, 100 * statistics.median(shares[n]),
                                                    1e3 * statistics.median(steps[n])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
