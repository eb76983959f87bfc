"""Benchmark: each built-in workload's CPU throughput, and what bench's loop costs against a
plain training loop of the same model, data and options.

For every workload, in interleaved rounds (the order alternates each round, so that drift on
the machine falls on both alike), two fresh processes on the same torch:
  bench  python -m bench --workload W --pipeline resident (instrumented: phase clock, loss
         kept on the device, the record)
  plain  the same model, data, loss and optimizer (the workload's own definitions) in the
         textbook loop: shuffle, slice a batch, zero_grad, forward, loss, backward, step
and prints the median steady epoch (every epoch after the first) of each, the ratio
bench / plain (the goal: within 1.03) with its 95% interval (the kit's two-stage bootstrap:
runs, then epochs within them, since epochs of one process are not independent draws), and
bench's throughput in the workload's unit.

    python perf/workloads_cpu.py [--rounds 5] [--epochs 3] [--workload NAME ...]

Needs torch and the envbench package (its statistics; no torchvision: both sides use the
resident pipeline's data). Run it alone: on a small machine any other load spoils the figures,
and process-to-process spread (which cores, which memory) is ±20% for a 1 s LeNet epoch on a
2-core VM, which is why it takes several rounds.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench import workloads  # noqa: E402

# Per workload, sized for a 2-core CPU: (train samples, test samples, batch size).
SIZES = {name: workloads.info(name).cpu_bench for name in workloads.NAMES}


def bench_args(name: str, args: argparse.Namespace) -> list[str]:
    limit, limit_test, batch = SIZES[name]
    return ["--device", "cpu", "--synthetic", "--workload", name, "--epochs", str(args.epochs),
            "--batch-size", str(batch), "--pipeline", "resident", "--seed", str(args.seed),
            "--limit", str(limit), "--limit-test", str(limit_test)]


def plain_loop(name: str, args: argparse.Namespace) -> list[float]:
    """The textbook loop around the workload's own model, data, loss and optimizer: per-epoch
    wall seconds (the test pass is left out, as bench leaves it out of its epoch)."""
    import torch

    from bench import workloads
    from bench.options import parse_config
    from bench.pipelines import normalise

    _, config = parse_config(bench_args(name, args) + ["--out", "unused.json"])
    workload = workloads.load(config)
    torch.manual_seed(args.seed)
    (x, y), _ = workload.data()
    if workload.inputs == "images":
        x = normalise(x)
    model = workload.model()
    optimizer = workload.optimizer(model.parameters())
    batch = config["batch_size"]
    walls = []
    for _ in range(args.epochs):
        start = time.perf_counter()
        order = torch.randperm(len(y))
        for first in range(0, len(y), batch):
            index = order[first:first + batch]
            optimizer.zero_grad()
            loss = workload.loss(model(x[index]), y[index])
            loss.backward()
            optimizer.step()
        walls.append(time.perf_counter() - start)
    return walls


def run_bench(name: str, args: argparse.Namespace) -> tuple[list[float], dict]:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        subprocess.run([sys.executable, "-m", "bench", *bench_args(name, args), "--out", out],
                       cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            record = json.load(f)
    return [e["wall_s"] for e in record["epochs"]], record


def run_plain(name: str, args: argparse.Namespace) -> list[float]:
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--plain-child", name,
                           "--epochs", str(args.epochs), "--seed", str(args.seed)],
                          cwd=ROOT, check=True, stdout=subprocess.PIPE, text=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--epochs", type=int, default=3, help="per run; the first is warm-up")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workload", action="append", choices=sorted(SIZES),
                   help="only these (repeatable; default: every built-in workload)")
    p.add_argument("--plain-child", metavar="NAME", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.plain_child:
        print(json.dumps(plain_loop(args.plain_child, args)))
        return 0
    names = args.workload or list(SIZES)
    # Each run's steady epochs, one list per run: the run is the unit of resampling.
    steady: dict[tuple[str, str], list[list[float]]] = {(n, side): [] for n in names
                                                        for side in ("bench", "plain")}
    described: dict[str, dict] = {}
    for round_index in range(args.rounds):
        for name in names:
            # Alternate which side goes first, so that neither always follows the other.
            sides = ("bench", "plain") if round_index % 2 == 0 else ("plain", "bench")
            for side in sides:
                if side == "bench":
                    walls, record = run_bench(name, args)
                    described[name] = record["model"]
                else:
                    walls = run_plain(name, args)
                steady[(name, side)].append(walls[1:] or walls)
                print("round %d  %-15s %-5s  %s" % (round_index + 1, name, side,
                                                     " ".join("%.3f" % w for w in walls)),
                      flush=True)
    import torch

    from envbench.inference import verdicts

    print("\ntorch %s, %d CPUs, %d rounds x %d epochs (the first dropped), resident pipeline"
          % (torch.__version__, os.cpu_count(), args.rounds, args.epochs))
    print("%-15s %10s %10s %7s %15s %17s %13s" % (
        "workload", "bench s/ep", "plain s/ep", "ratio", "95% interval", "bench throughput",
        "train GFLOP/s"))
    for name in names:
        runs_bench, runs_plain = steady[(name, "bench")], steady[(name, "plain")]
        bench = statistics.median(statistics.median(run) for run in runs_bench)
        plain = statistics.median(statistics.median(run) for run in runs_plain)
        # The kit's test of the rounds' repeats (Welch's t on their logs), at 95%.
        test = verdicts.of_repeats(runs_bench, runs_plain)
        low, high = (test.interval(verdicts.ALPHA) if isinstance(test, verdicts.Test)
                     else (float("nan"), float("nan")))
        limit, _, _ = SIZES[name]
        model = described[name]
        units = limit * model["units_per_sample"] / bench
        flops = (model["flops"]["train"] or 0) * limit / bench / 1e9
        print("%-15s %10.3f %10.3f %7.3f %7.3f-%-7.3f %10.0f %-6s %13.1f"
              % (name, bench, plain, bench / plain, low, high, units, model["unit"] + "/s",
                 flops))
    return 0


if __name__ == "__main__":
    sys.exit(main())
