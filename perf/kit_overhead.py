"""Benchmark: what the kit costs per executed cell, beyond bench's own run, and where each
second goes.

Runs the real `bench` path in this process (matrixrun.run, the engine, the Debian stack's
image as the demo builds it) on a matrix of one Debian stack, synthetic data, one short epoch
and N repeats, with timers wrapped round each step of a cell on the host: the cell's folder,
container create, start, the sensors, the wait for bench to exit, the logs, the removal, the
result read, the record saved. It prints the kit's own figure (host wall minus bench's run,
the line every matrix run prints), its median over the cells, and each step's median
("container wait" holds bench's own run: the kit's part is the rest).

    python perf/kit_overhead.py [--repeats 9] [--matrix reports/demo/matrix.yaml]

--matrix runs another matrix's cells instead (the demo's, as `./noxw -s demo` wrote it: the
figure the demo prints), each with its images built already.

Run it alone (on a 2-core VM a build or a test suite beside it doubles every figure), with
the engine up and the e2e/demo Debian base in it (`./noxw -s base-image` builds one).
"""
from __future__ import annotations

import argparse
import functools
import io
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from docker.models.containers import Container  # noqa: E402

from envbench.cells import containerrun, matrixrun, records, sensors  # noqa: E402
from envbench.command_options import Options  # noqa: E402
from envbench.engine import connection  # noqa: E402
from envbench.images import baseimage  # noqa: E402
from envbench.results import store  # noqa: E402

SPENT: dict[str, list[float]] = defaultdict(list)


def timed(owner: Any, name: str, label: str) -> None:
    """Wrap owner.name so that each call's seconds go to SPENT[label]."""
    original = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            SPENT[label].append(time.perf_counter() - started)
    setattr(owner, name, wrapper)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--matrix", type=Path, help="run this matrix's cells instead")
    args = parser.parse_args()
    client = connection.connect()
    base = os.environ.get("ENVBENCH_BASE") or baseimage.ensure_base(client, sys.stdout)
    timed(containerrun, "cell_folder", "cell folder")
    timed(sensors.Sensors, "start", "sensors start")
    timed(sensors.Sensors, "stop", "sensors stop")
    timed(containerrun, "_save_logs", "logs saved")
    timed(containerrun, "_pid", "container pid")
    timed(store, "read", "result read")
    timed(records, "save", "record saved")
    timed(records, "annotate", "record annotated")
    timed(type(client.containers), "create", "container create")
    for method in ("start", "wait", "remove", "reload", "logs"):
        timed(Container, method, "container " + method)
    with tempfile.TemporaryDirectory(prefix="envbench-overhead-") as tmp:
        matrix = args.matrix or Path(tmp) / "matrix.yaml"
        if args.matrix is None:
            matrix.write_text(
                "environments:\n  debian-torch1.13: {python: \"3.11\", torch: \"1.13\", "
                "source: debian, base: \"%s\"}\n"
                "targets:\n  cpu: {device: cpu}\n"
                "benchmark: {epochs: 1, repeats: %d, data: synthetic, limit: 512, limit_test: "
                "256, probe: false, pipeline: resident}\n" % (base, args.repeats))
        opts = Options(matrix_path=matrix, reports_dir=Path(tmp) / "reports", offline=True,
                       order="grouped")
        started = time.perf_counter()
        code = matrixrun.run(opts, io.StringIO())
        wall = time.perf_counter() - started
        loaded, _ = store.load_all([opts.results_dir])
    if code != 0 or not loaded:
        print("the run failed (exit %d)" % code, file=sys.stderr)
        return 1
    overheads = [r.raw["host_s"] - r.raw["run_s"] for r in loaded]
    runs = [r.raw["run_s"] for r in loaded]
    print("%d cells in %.1f s; bench's own run median %.2f s" % (len(loaded), wall,
                                                                statistics.median(runs)))
    print("kit overhead per executed cell (host wall - bench's run): median %.3f s, "
          "min %.3f, max %.3f" % (statistics.median(overheads), min(overheads),
                                  max(overheads)))
    print("where it goes, median per cell (seconds):")
    for label, values in sorted(SPENT.items(), key=lambda kv: -statistics.median(kv[1])):
        print("  %-18s %.3f  (%d calls)" % (label, statistics.median(values), len(values)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
