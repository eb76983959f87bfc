"""Benchmark: what bench's instrumentation costs, and what the resident pipeline saves.

Runs, side by side on the same data and the same torch, alternating in rounds so that drift
on the machine hits every variant alike:
  plain     the PyTorch CIFAR-10 tutorial's training loop, uninstrumented
  classic   python -m bench --pipeline classic (the same pipeline, instrumented)
  resident  python -m bench --pipeline resident
and prints median steady-epoch times and the ratios classic/plain and classic/resident.

    python perf/pipeline_overhead.py [--rounds 3] [--epochs 2] [--batch-size 256]

Needs torch and torchvision (e.g. Debian's python3-torch + python3-torchvision).
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


def plain_loop(args: argparse.Namespace) -> list[float]:
    """The tutorial, as written there (plus a clock): per-epoch wall seconds."""
    import torch
    import torchvision.transforms as transforms
    from torch import nn, optim

    from bench.datasets import synthetic
    from bench.pipelines import CifarDataset
    from bench.workloads.lenet import LeNet

    torch.manual_seed(args.seed)
    (train_x, train_y), _ = synthetic(args.seed, limit=args.limit, limit_test=1)
    transform = transforms.Compose([transforms.ToTensor(),
                                    transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))])
    trainset = CifarDataset(train_x, train_y, transform)
    trainloader = torch.utils.data.DataLoader(trainset, batch_size=args.batch_size,
                                              shuffle=True, num_workers=2)
    net = LeNet()
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.SGD(net.parameters(), lr=0.001, momentum=0.9)
    walls = []
    for _epoch in range(args.epochs):
        running_loss = 0.0
        start = time.perf_counter()
        for _i, data in enumerate(trainloader, 0):
            inputs, labels = data
            optimizer.zero_grad()
            outputs = net(inputs)
            loss = criterion(outputs, labels)
            loss.backward()
            optimizer.step()
            running_loss += loss.item()
        walls.append(time.perf_counter() - start)
    return walls


def run_bench(pipeline: str, args: argparse.Namespace) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        subprocess.run([sys.executable, "-m", "bench", "--device", "cpu", "--synthetic",
                        "--epochs", str(args.epochs), "--batch-size", str(args.batch_size),
                        "--pipeline", pipeline, "--seed", str(args.seed), "--limit",
                        str(args.limit), "--limit-test", "1000", "--out", out],
                       cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            return [e["wall_s"] for e in json.load(f)["epochs"]]


def run_plain(args: argparse.Namespace) -> list[float]:
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--plain-child",
                           "--epochs", str(args.epochs), "--batch-size", str(args.batch_size),
                           "--seed", str(args.seed), "--limit", str(args.limit)],
                          cwd=ROOT, check=True, stdout=subprocess.PIPE, text=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=2, help="per run; the first is warm-up")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--limit", type=int, default=50000, help="training images")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--plain-child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.plain_child:
        print(json.dumps(plain_loop(args)))
        return 0
    runners = {"plain": run_plain, "classic": lambda a: run_bench("classic", a),
               "resident": lambda a: run_bench("resident", a)}
    steady: dict[str, list[float]] = {name: [] for name in runners}
    for round_index in range(args.rounds):
        for name, runner in runners.items():
            walls = runner(args)
            steady[name].extend(walls[1:] or walls)
            print("round %d  %-8s  %s" % (round_index + 1, name,
                                          " ".join("%.2f" % w for w in walls)), flush=True)
    import torch

    medians = {name: statistics.median(values) for name, values in steady.items()}
    print("\ntorch %s, %d CPUs, batch %d, %d images, %d rounds x %d epochs (first dropped)"
          % (torch.__version__, os.cpu_count(), args.batch_size, args.limit, args.rounds,
             args.epochs))
    for name, value in medians.items():
        spread = steady[name]
        print("  %-8s median %.3f s/epoch  (min %.3f, max %.3f, n=%d)"
              % (name, value, min(spread), max(spread), len(spread)))
    overhead = medians["classic"] / medians["plain"]
    print("  classic / plain     = %.3f  (instrumentation overhead %+.1f%%)"
          % (overhead, 100 * (overhead - 1)))
    print("  classic / resident  = %.2fx (resident's speedup)"
          % (medians["classic"] / medians["resident"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
