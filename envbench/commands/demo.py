"""`./noxw -s demo`: the first run on any Linux machine with Docker and the package registries.

Two real stacks on this machine's CPU, on one Debian base: Debian's own python3-torch (an
old stack) and a current torch CPU build installed from a lock. No container registry, no
GPU and no variable needed: the engine, the base image and the wheels are made ready by
envbench.provision. The data is CIFAR-10 where it is cached or can be fetched, else synthetic
(and the report says so). Ends with the report's path and where the time went.
"""
from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, TextIO, cast

import yaml

from envbench import provision, terminal
from envbench.cells import dataset, matrixrun
from envbench.command_options import Options
from envbench.engine import connection
from envbench.images import baseimage, build, wheelhouse
from envbench.matrix import models
from envbench.report import pages
from envbench.user_errors import UserError

# The pip stack's torch: a CPU build the host's pip can fetch (PyTorch's CPU index first).
TORCH = "2.13.0"
DEBIAN = "debian-python3-torch"
PIP = "torch%s-cpu" % TORCH
DATA_TIMEOUT_S = 20
SIDE_WAIT_S = 600  # how long a failing demo waits for the work beside it to end
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
            DEBIAN: {"source": "debian", "python": python, "base": base},
            PIP: {"python": python, "torch": TORCH, "base": python_base,
                  "wheelhouse": str(wheelhouse)},
        },
        "targets": {"cpu": {"device": "cpu"}},
        "benchmark": dict(BENCHMARK, data="synthetic" if synthetic else "cifar10"),
    }
    return ("# Written by `./noxw -s demo`: Debian's python3-torch against torch %s (CPU build), "
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


class _Beside:
    """One piece of work on its own thread while the caller does another; result() waits for
    it and raises what it raised. A daemon thread: Ctrl-C ends the demo without waiting for
    the build beside it (the engine stops a build whose client goes away)."""

    def __init__(self, name: str, work: Callable[[], Any]) -> None:
        self._work = work
        self._value: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._work()
        except BaseException as exc:  # noqa: BLE001 - handed to result()'s caller
            self._error = exc

    def wait(self, timeout: float) -> None:
        self._thread.join(timeout)

    def result(self) -> Any:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value


def run(opts: Options, out: TextIO = sys.stdout) -> int:
    reports = opts.reports_dir
    started = time.perf_counter()
    provision.ensure_engine(out)
    client = connection.connect()
    base = baseimage.ensure_base(client, out)
    python_base = baseimage.ensure_python_base(client, base, out)
    python = _python_of(client, python_base)
    ready = time.perf_counter()

    # Side by side (each waits on something else: apt's unpacking, the network, pip): the
    # Debian stack's build; CIFAR-10's fetch; the torch wheels' fetch, then the pip stack's
    # build. In a row they took 85 s + 56 s + 52 s from a fresh clone (measured). The data
    # only decides the matrix's `data:`, which no image depends on, so the images are
    # planned from the same matrix with its environments alone.
    reports.mkdir(parents=True, exist_ok=True)
    matrix_path = reports / "matrix.yaml"
    wheels = wheelhouse.folder_for(TORCH, python)
    plan_opts = Options(matrix_path=matrix_path, reports_dir=reports, offline=True,
                        locks=reports / "locks")
    m = models.parse(matrix_text(base, python_base, python, wheels, synthetic=True),
                     str(matrix_path))
    lines = terminal.WholeLines(out)
    shown = cast(TextIO, lines)
    debian = _Beside("demo-debian-build", lambda: matrixrun.build_images(
        connection.connect(), m, [DEBIAN], plan_opts, shown, tidy=False))
    data = _Beside("demo-data", lambda: _data(shown))
    try:
        wheelhouse.ensure_wheelhouse(TORCH, python, shown)
        _, failed = matrixrun.build_images(connection.connect(), m, [PIP], plan_opts, shown,
                                           tidy=False)
        failed.update(debian.result()[1])
        data_dir = data.result()
    except KeyboardInterrupt:
        # The engine stops a build whose client goes away. The threads' lines stop here:
        # none may be half-written to the terminal while the interpreter shuts down.
        lines.close()
        raise
    except BaseException:
        # The wheels failed: the build beside them ends and cleans up after itself first.
        debian.wait(SIDE_WAIT_S)
        data.wait(SIDE_WAIT_S)
        raise
    finally:
        build.remove_builder_stages(client, out)
    if failed:
        raise UserError("the demo's images did not build (see above)")
    built = time.perf_counter()

    matrix_path.write_text(matrix_text(base, python_base, python, wheels, data_dir is None))
    opts = Options(matrix_path=matrix_path, reports_dir=reports, data_dir=data_dir,
                   synthetic=data_dir is None, offline=True, locks=reports / "locks")
    code = matrixrun.run(opts, out)
    ran = time.perf_counter()
    written = pages.render_current(opts)
    print("\ndemo: set-up (engine, base images) %.0f s; image builds, wheels and data side by "
          "side %.0f s; cells %.0f s; report %.0f s; %.0f s in all"
          % (ready - started, built - ready, ran - built, time.perf_counter() - ran,
             time.perf_counter() - started), file=out)
    print("demo: open %s" % written["html"].resolve(), file=out)
    return code
