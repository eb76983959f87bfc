"""One cell in one container: locked down, resources from the target, GPUs where it has them."""
from __future__ import annotations

import errno
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import requests
from docker.types import LogConfig

from bench.rules import FailureKind
from envbench.cells import cellspec, takein
from envbench.cells.resources import Resources
from envbench.cells.sensors import Sensors
from envbench.engine import connection, gpu, sandbox
from envbench.engine.connection import ENGINE_ERRORS, explain
from envbench.matrix.models import Target
from envbench.matrix.workloads import WorkloadPlan
from envbench.results import store
from envbench.user_errors import UserError
from envbench.users import own, prepare_dirs

RESULTS_LABEL = "envbench.results"
# The engine keeps the end of a cell's output, as much as the host keeps of it.
LOG_MAX_SIZE = "%dm" % (takein.LOG_CAP >> 20)


@dataclass(frozen=True)
class Mounts:
    results_dir: Path  # where the host keeps every cell's result; no container sees it
    log_dir: Path
    data_dir: Path | None  # None: --synthetic
    # Where each cell gets an empty folder of its own as /results: a cell cannot read,
    # forge or delete another's result, and the host takes across the one file it expects.
    cells_dir: Path


def cell_folder(mounts: Mounts) -> Path:
    """A new, empty folder for one cell's /results, writable by the container's user."""
    prepare_dirs(mounts.cells_dir)
    folder = Path(tempfile.mkdtemp(dir=mounts.cells_dir, prefix="cell-"))
    own(folder)
    return folder


KEPT_PREFIX = "kept-"  # a cell folder whose finished result could not be saved (disk full)
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


class ResultKept(UserError):
    """The disk filled as a finished cell's result was being saved: its folder is kept."""


def kept_result(cells_dir: Path, out_name: str) -> Path | None:
    """A finished result an earlier run kept for lack of disk (see run_cell), if any."""
    if not cells_dir.is_dir() or cells_dir.is_symlink():
        return None
    for folder in sorted(cells_dir.glob(KEPT_PREFIX + "*")):
        path = folder / out_name
        if folder.is_dir() and not folder.is_symlink() and path.is_file() \
                and not path.is_symlink():
            return path
    return None


def _keep(folder: Path, out_name: str, stem: str, exc: OSError, full: Path) -> ResultKept:
    """Rename the cell's folder (a rename takes no space) so that no clean-up removes it,
    and say in one sentence where the result is and what to free. ``full``: a folder on the
    disk that filled (the file the write failed on, where the error names it)."""
    kept = folder.with_name(KEPT_PREFIX + folder.name)
    try:
        os.replace(folder, kept)
    except OSError:
        kept = folder
    if exc.filename:
        full = Path(os.fsdecode(exc.filename)).parent
    try:
        free = "%.1f MB free" % (shutil.disk_usage(full).free / 1e6)
    except OSError:
        free = "its free space unknown"
    saved = kept / out_name
    where = ("bench's record of it is kept as %s" % saved if saved.is_file() else
             "bench could not write its record either")
    return ResultKept("no space left to save the result of %s (%s on the disk of %s, %s): "
                      "%s; free space there and run the same command again, which takes the "
                      "kept result in instead of running the cell again"
                      % (stem, exc.strerror or exc, full, free, where))


def remove_cell_folders(cells_dir: Path) -> int:
    """Remove what cells of earlier runs left (a killed run); the caller holds the run lock.
    Folders kept for a result that the disk had no room for stay (see kept_result).
    Returns how many folders there were."""
    if not cells_dir.is_dir() or cells_dir.is_symlink():
        return 0
    left = [p for p in cells_dir.iterdir() if p.name.startswith("cell-")]
    for folder in left:
        if folder.is_dir() and not folder.is_symlink():
            shutil.rmtree(folder, ignore_errors=True)
        else:
            folder.unlink()
    return len(left)


def container_options(args: list[str], resources: Resources, image: Any, mounts: Mounts,
                      cell_name: str, out_folder: Path,
                      workload: WorkloadPlan | None = None,
                      gpu_mode: str = gpu.GPUS) -> dict[str, Any]:
    """The cell's spec (cellspec) as this engine takes it, with what only Docker has: the
    labels a later run finds its containers by, the log's cap and the GPU request."""
    code = workload if workload is not None and workload.path is not None else None
    files = cellspec.CellFiles(
        results=str(out_folder.resolve()),
        data=str(mounts.data_dir.resolve()) if mounts.data_dir is not None else None,
        workload=str(code.path) if code is not None else None,
        inputs=tuple(str(given.path) for given in code.inputs) if code is not None else ())
    spec = cellspec.cell_spec(cell_name, image.id, image.id, (image.tags or [""])[0], args,
                              resources, files, workload)
    options = sandbox.docker_options(spec)
    options.update(labels={"envbench.cell": cell_name,
                           "envbench.host": connection.client_host(),
                           # whose run lock covers it (cells.runlock)
                           RESULTS_LABEL: str(mounts.results_dir.resolve())},
                   detach=True,
                   # A cell that prints without end fills no disk, and its log is read
                   # whole into memory only up to this size.
                   log_config=LogConfig(type="json-file", config={
                       "max-size": LOG_MAX_SIZE, "max-file": "1"}))
    if spec.gpus:
        options["device_requests"] = gpu.device_requests(spec.gpus, gpu_mode)
    return options


def _save_logs(container: Any, log_path: Path) -> list[str]:
    """The container's whole output, read once it has stopped (a stream that sat silent
    through a long epoch could time out and lose the end, which is what matters)."""
    try:
        raw = container.logs(stdout=True, stderr=True)
    except ENGINE_ERRORS as exc:
        raw = ("(logs unavailable: %s)\n" % explain(exc)).encode()
    return takein.keep_log(bytes(raw), log_path)


def _follow(container: Any, on_line: Callable[[str], None]) -> threading.Thread:
    """Hand the container's output to ``on_line`` as it comes (bench's epoch lines). The
    stream may break on a long silent epoch or a stopped engine: the whole log is read
    again once the container has stopped, and that is what is kept."""
    def pump() -> None:
        pending = b""
        try:
            for chunk in container.logs(stream=True, follow=True):
                pending += chunk
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    on_line(line.decode(errors="replace").rstrip())
        except ENGINE_ERRORS:
            pass
    thread = threading.Thread(target=pump, name="envbench-follow", daemon=True)
    thread.start()
    return thread


def run_cell(client: docker.DockerClient, args: list[str], target: Target,
             resources: Resources, image: Any, mounts: Mounts, out_name: str,
             take: Callable[[takein.Ending], dict[str, Any]],
             on_line: Callable[[str], None] | None = None,
             workload: WorkloadPlan | None = None, gpu_mode: str = gpu.GPUS) -> dict[str, Any]:
    """Run one cell; return the record ``take`` (the caller's take-in) makes of its Ending.

    ``args`` is bench's command line, writing ``out_name`` under /results in the container:
    an empty folder of this cell's own, from which only that file is read (through the
    result contract). ``take`` runs before the folder is removed: a disk that fills while
    the log or the record is saved leaves the folder, renamed kept-…, holding bench's
    record, and ResultKept says where.
    """
    started = time.perf_counter()
    folder = cell_folder(mounts)
    keep = False
    try:
        ending = _run_in(client, args, target, resources, image, mounts, folder, out_name,
                         on_line, workload, gpu_mode)
        ending.host_s = round(time.perf_counter() - started, 3)
        return take(ending)
    except OSError as exc:  # the log, a trace or the record found the disk full
        if exc.errno not in DISK_FULL:
            raise
        keep = True
        raise _keep(folder, out_name, Path(out_name).stem, exc, mounts.results_dir) from None
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)


def _run_in(client: docker.DockerClient, args: list[str], target: Target,
            resources: Resources, image: Any, mounts: Mounts, folder: Path, out_name: str,
            on_line: Callable[[str], None] | None, workload: WorkloadPlan | None = None,
            gpu_mode: str = gpu.GPUS) -> takein.Ending:
    stem = Path(out_name).stem
    log_path = mounts.log_dir / ("%s.log" % stem)
    error: tuple[str, str] | None = None
    gpus = resources.device == "cuda"
    try:
        options = container_options(args, resources, image, mounts, stem, folder, workload,
                                    gpu_mode)
        container = client.containers.create(image.id, **options)
    except ENGINE_ERRORS as exc:
        message = gpu.explain(exc) if gpus else explain(exc)
        return takein.Ending(None, [], (FailureKind.CONTAINER_ERROR, message))
    follower = None
    finished = False
    count = gpu.requested_count(resources.gpus)
    # Docker's device request of N GPUs takes the first N: those are the cell's to sense.
    sensed = Sensors(resources.cpuset, gpus, list(range(count)) if gpus and count > 0 else None)
    try:
        container.start()
        sensed.start(_pid(container))
        if on_line is not None:
            follower = _follow(container, on_line)
        try:
            exit_code = container.wait(timeout=target.timeout_s)["StatusCode"]
        except ENGINE_ERRORS as exc:
            if not _timed_out(exc):
                raise
            _kill(container)
            exit_code = None
            error = (FailureKind.TIMEOUT,
                     "the cell ran past the target's timeout_s=%d" % target.timeout_s)
        finished = True
        if exit_code is not None and exit_code != 0:
            container.reload()
            if container.attrs.get("State", {}).get("OOMKilled"):
                error = (FailureKind.OUT_OF_MEMORY, "the container was killed at the target's "
                                                    "memory limit (%s)" % target.memory)
            else:
                error = (FailureKind.CONTAINER_EXITED, "bench exited with code %d" % exit_code)
    except ENGINE_ERRORS as exc:
        message = gpu.explain(exc) if gpus else explain(exc)
        error = (FailureKind.CONTAINER_ERROR, message)
    finally:
        if not finished:
            _kill(container)  # Ctrl-C or an engine error: stop the cell before anything else
        noise = sensed.stop()
        if follower is not None:
            follower.join(timeout=5)
        lines = _save_logs(container, log_path)
        try:
            container.remove(force=True)
            engine_lost = None
        except ENGINE_ERRORS as exc:
            engine_lost = explain(exc)  # the engine is gone; it removes nothing it no longer runs
    record = store.read(folder / out_name)  # a regular file, capped, valid; else None
    if record is None:
        kind, message = error or (FailureKind.NO_RESULT, takein.NO_RESULT)
        if engine_lost and kind in (FailureKind.CONTAINER_EXITED, FailureKind.NO_RESULT):
            message = "%s, and then %s" % (message, engine_lost)  # the likely cause
        error = (kind, message)
    # A cell stopped by the engine failed, whatever bench wrote before it was stopped; a
    # non-zero exit with a record of bench's own is what that record says.
    stopped = error is not None and error[0] in (FailureKind.TIMEOUT, FailureKind.OUT_OF_MEMORY)
    return takein.Ending(record, lines, error, overrules=stopped, noise=noise, folder=folder)


def _pid(container: Any) -> int | None:
    """The container's first process as the engine's host sees it (0 once it has ended)."""
    try:
        container.reload()
        return int(container.attrs.get("State", {}).get("Pid") or 0) or None
    except ENGINE_ERRORS:
        return None


def _timed_out(exc: BaseException) -> bool:
    """wait(timeout) ends in a read timeout, which requests may wrap in a ConnectionError."""
    return isinstance(exc, requests.exceptions.ReadTimeout) or "Read timed out" in str(exc)


def _kill(container: Any) -> None:
    try:
        container.kill()
    except ENGINE_ERRORS:
        pass

