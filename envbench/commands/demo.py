"""`nox -s demo`: the first run on any Linux machine with Docker and the package registries.

Two real stacks on this machine's CPU, on one Debian base: Debian's own python3-torch (an
old stack) and a current torch CPU build installed from a lock. No container registry, no
GPU and no variable needed: the engine, the base image and the wheels are made ready by
envbench.provision. The data is CIFAR-10 where it is cached or can be fetched, else synthetic
(and the report says so). Ends with the report's path and where the time went.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, TextIO

import yaml

from envbench import provision
from envbench.cells import dataset, matrixrun
from envbench.engine import connection
from envbench.errors import UserError
from envbench.images import baseimage, wheelhouse
from envbench.options import Options
from envbench.report import pages

# The pip stack's torch: a CPU build the host's pip can fetch (PyTorch's CPU index first).
TORCH = "2.13.0"
DATA_TIMEOUT_S = 20
# repeats: auto: three rounds, then more only while the two stacks' comparison is open.
BENCHMARK = {"epochs": 3, "batch_size": 256, "pipeline": "resident", "repeats": "auto",
             "max_repeats": 6, "limit": 20000, "limit_test": 2000}


def _python_of(client: Any, image: str) -> str:
    out = client.containers.run(image, ["python3", "-c", "import sys; print('%d.%d' % "
                                        "sys.version_info[:2])"], remove=True,
                                network_mode="none")
    return bytes(out).decode().strip()


def matrix_text(base: str, python_base: str, python: str, wheelhouse: Path,
                synthetic: bool) -> str:
    """The demo's matrix, written beside its results so the run explains itself."""
    document = {
        "environments": {
            "debian-python3-torch": {"source": "debian", "python": python, "base": base},
            "torch%s-cpu" % TORCH: {"python": python, "torch": TORCH, "base": python_base,
                                    "wheelhouse": str(wheelhouse)},
        },
        "targets": {"cpu": {"device": "cpu"}},
        "benchmark": dict(BENCHMARK, data="synthetic" if synthetic else "cifar10"),
    }
    return ("# Written by `nox -s demo`: Debian's python3-torch against torch %s (CPU build), "
            "on this machine's CPU.\n" % TORCH) + yaml.safe_dump(document, sort_keys=False)


def _data(out: TextIO) -> Path | None:
    """CIFAR-10 from the cache, or fetched; None (synthetic) when it cannot be had."""
    root = dataset.default_cache()
    if dataset.is_ready(root):
        return root
    try:
        return dataset.fetch(root, out=out, timeout=DATA_TIMEOUT_S)
    except UserError as exc:
        print("[demo] CIFAR-10 could not be fetched (%s): the demo runs on synthetic data, "
              "and the report says so" % exc, file=out, flush=True)
        return None


def run(opts: Options, out: TextIO = sys.stdout) -> int:
    reports = opts.reports_dir
    started = time.perf_counter()
    provision.ensure_engine(out)
    client = connection.connect()
    base = baseimage.ensure_base(client, out)
    python_base = baseimage.ensure_python_base(client, base, out)
    python = _python_of(client, python_base)
    torch_wheels = wheelhouse.ensure_wheelhouse(TORCH, python, out)
    data_dir = _data(out)
    ready = time.perf_counter()

    reports.mkdir(parents=True, exist_ok=True)
    matrix_path = reports / "matrix.yaml"
    matrix_path.write_text(matrix_text(base, python_base, python, torch_wheels, data_dir is None))
    opts = Options(matrix_path=matrix_path, reports_dir=reports, data_dir=data_dir,
                   synthetic=data_dir is None, offline=True, locks=reports / "locks")
    m, cells = matrixrun.plan_cells(opts)
    _, failed = matrixrun.build_images(connection.connect(), m,
                                       list(dict.fromkeys(c.environment for c in cells)),
                                       opts, out)
    if failed:
        raise UserError("the demo's images did not build (see above)")
    built = time.perf_counter()
    code = matrixrun.run(opts, out)
    ran = time.perf_counter()
    written = pages.render_current(opts)
    print("\ndemo: set-up (engine, base, wheels, data) %.0f s, image builds %.0f s, cells %.0f s,"
          " report %.0f s; %.0f s in all" % (ready - started, built - ready, ran - built,
                                              time.perf_counter() - ran,
                                              time.perf_counter() - started), file=out)
    print("demo: open %s" % written["html"].resolve(), file=out)
    return code
