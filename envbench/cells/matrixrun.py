"""The matrix, end to end: build the images the cells need, run every cell, resume, summarise."""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

import docker

from envbench import stats, users
from envbench.cells import containerrun, dataset, resources
from envbench.cells import expansion as cellmod
from envbench.cells.progress import MatrixProgress
from envbench.engine import connection, gpu
from envbench.engine.host import Host
from envbench.errors import UserError
from envbench.images import dockerfile
from envbench.images import lock as lockmod
from envbench.matrix import models
from envbench.results import store


@dataclass
class Options:
    matrix_path: Path = Path("matrix.yaml")
    envs: list[str] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)
    kind: str | None = None
    quick: bool = False
    synthetic: bool = False
    data_dir: Path | None = None
    reports_dir: Path = Path("reports")
    allow_pull: bool = True
    locks: Path | None = None   # default: locks/ beside the matrix
    frozen: bool = False        # refuse to create a missing lock

    @property
    def matrix_dir(self) -> Path:
        return self.matrix_path.resolve().parent

    @property
    def locks_dir(self) -> Path:
        return self.locks or lockmod.default_dir(self.matrix_path)

    @property
    def results_dir(self) -> Path:
        return self.reports_dir / "results"

    @property
    def log_dir(self) -> Path:
        return self.reports_dir / "logs"


def plan_cells(opts: Options) -> tuple[models.Matrix, list[cellmod.Cell]]:
    m = models.load(opts.matrix_path)
    cells = cellmod.expand(m, opts.envs, opts.targets, opts.kind, opts.quick)
    # A cloud target runs on its own VM (nox -s cloud), where the kit names it with --target;
    # a local run that did not ask for it leaves it alone.
    cloud = sorted({c.target for c in cells if m.targets[c.target].cloud is not None
                    and c.target not in opts.targets})
    if cloud:
        print("cloud targets %s run on their own VMs (nox -s cloud); left out here"
              % ", ".join(cloud))
        cells = [c for c in cells if c.target not in cloud]
    if not cells:
        raise UserError("no cells match (kind=%s, env=%s, target=%s) in %s"
                        % (opts.kind or "any", ",".join(opts.envs) or "any",
                           ",".join(opts.targets) or "any", opts.matrix_path))
    return m, cells


def build_images(client: docker.DockerClient, m: models.Matrix, env_names: list[str],
                 opts: Options, out: TextIO
                 ) -> tuple[dict[str, Any], dict[str, tuple[str, str | None]]]:
    """Build each environment's image; a failed build is recorded (with the tag it would
    have had, where known) and the others go on."""
    built: dict[str, Any] = {}
    failed: dict[str, tuple[str, str | None]] = {}
    for name in env_names:
        p = None
        try:
            p = planned(name, m.environments[name], opts, out)
            image = dockerfile.build(client, p, opts.log_dir, opts.allow_pull, out)
            base = connection.image_or_none(client, p.base)
            built[name] = (p, image, dockerfile.base_digest(base) if base is not None else None)
        except UserError as exc:
            print("%s: %s" % (name, exc), file=out, flush=True)
            failed[name] = (str(exc), p.tag if p is not None else None)
    return built, failed


def planned(name: str, env: models.Environment, opts: Options, out: TextIO) -> dockerfile.Plan:
    """The image plan of an environment, with its lock (created when missing, refused when
    stale) for a pip stack."""
    lock = None
    if env.source == "pip":
        lock = lockmod.ensure(name, env, opts.matrix_dir, opts.locks_dir, opts.frozen, out)
    return dockerfile.plan(name, env, opts.matrix_dir, lock)


def lock(opts: Options, out: TextIO = sys.stdout) -> int:
    """Resolve every selected pip environment again and write its lock."""
    m, cells = plan_cells(opts)
    failed = 0
    for name in dict.fromkeys(c.environment for c in cells):
        env = m.environments[name]
        if env.source != "pip":
            print("%s: Debian's packages, nothing to lock" % name, file=out)
            continue
        try:
            before = lockmod.status(name, env, opts.matrix_dir, opts.locks_dir)[1]
        except UserError:
            before = None  # an unreadable lock is simply written again
        started = time.perf_counter()
        try:
            made = lockmod.write(name, env, opts.matrix_dir, opts.locks_dir)
        except UserError as exc:
            print("%s: %s" % (name, exc), file=out, flush=True)
            failed += 1
            continue
        change = "unchanged" if before is not None and before.sha256 == made.sha256 else \
            "written"
        size = sum(w.size or 0 for w in made.wheels)
        print("%s: %s, %d wheels%s, %.1f s (uv %s) -> %s"
              % (name, change, len(made.wheels), ", %.1f MB" % (size / 1e6) if size else "",
                 time.perf_counter() - started, made.uv_version, made.path), file=out,
              flush=True)
    return 1 if failed else 0


def build(opts: Options, out: TextIO = sys.stdout) -> int:
    m, cells = plan_cells(opts)
    client = connection.connect()
    names = list(dict.fromkeys(c.environment for c in cells))
    built, failed = build_images(client, m, names, opts, out)
    for name, (p, image, _) in built.items():
        print("  %-28s %s  %s" % (name, p.tag, image.short_id), file=out)
    return 1 if failed else 0


def _data_dir(opts: Options, m: models.Matrix) -> Path | None:
    if opts.synthetic or m.benchmark.data == "synthetic":
        return None
    if opts.data_dir is not None:
        if not dataset.is_ready(opts.data_dir):
            raise UserError("--data %s: no CIFAR-10 there (expected %s/ with %s)"
                            % (opts.data_dir, dataset.FOLDER, ", ".join(dataset.FILES)))
        return opts.data_dir
    # Fetched on demand into the cache (progress and md5 check), once.
    return dataset.fetch(dataset.default_cache())


def data_identity(data_dir: Path | None) -> dict[str, Any]:
    """Which data the cells measure on: part of every cell's identity."""
    if data_dir is None:
        return {"source": "synthetic", "sha256": None}
    return {"source": "cifar10", "sha256": dataset.digest(data_dir)}


@dataclass
class _Session:
    """One `bench` invocation: what every cell needs, and the figures gathered on the way."""

    client: docker.DockerClient
    matrix: models.Matrix
    opts: Options
    mounts: containerrun.Mounts
    data: dict[str, Any]
    host: Host
    built: dict[str, Any]
    build_failures: dict[str, tuple[str, str | None]]
    # GPU cells this host cannot run (no NVIDIA runtime, driver too old), found before any
    # build: environment -> (error type, the sentence).
    gpu_blocked: dict[str, tuple[str, str]] = field(default_factory=dict)
    gpu_problems: dict[str, str | None] = field(default_factory=dict)
    overheads: list[float] = field(default_factory=list)  # host wall minus bench's own time
    on_line: Any = None  # where a running cell's output goes, line by line

    def run(self, cell: cellmod.Cell) -> tuple[dict[str, Any], str]:
        """Run or reuse one cell; return its record and the end of its progress line."""
        target = self.matrix.targets[cell.target]
        if target.device == "cuda" and cell.environment in self.gpu_blocked:
            kind, message = self.gpu_blocked[cell.environment]
            p = cellmod.prepare(cell, target, self.host, self.data, None)
            record = store.host_failure(p.config, kind, message)
            self._store(p, record, {"tag": None, "id": None})
            return record, "failed: " + message
        if cell.environment in self.build_failures:
            message, tag = self.build_failures[cell.environment]
            p = cellmod.prepare(cell, target, self.host, self.data, None)
            record = store.host_failure(p.config, "BuildFailed", message)
            self._store(p, record, {"tag": tag, "id": None})
            return record, "failed: image build failed"
        plan, image, base_digest = self.built[cell.environment]
        image_info = {"tag": plan.tag, "id": image.id, "base": plan.base,
                      "base_digest": base_digest,
                      "lock_sha256": plan.lock.sha256 if plan.lock else None}
        p = cellmod.prepare(cell, target, self.host, self.data, image.id)
        path = self.opts.results_dir / ("%s.json" % p.file_stem)
        stored = store.read(path)
        if store.is_current(stored, p.identity):
            return stored, "cached " + _figure(stored)
        problem = self._gpu_problem(cell, p.resources, image)
        if problem:
            record = store.host_failure(p.config, "GpuUnavailable", problem)
            self._store(p, record, image_info)
            return record, "failed: " + problem
        started = time.perf_counter()
        record = containerrun.run_cell(self.client, p.command(), p.config, target,
                                       p.resources, image, self.mounts, path, self.on_line)
        record["host_s"] = round(time.perf_counter() - started, 3)
        if record.get("run_s") is not None:
            self.overheads.append(record["host_s"] - record["run_s"])
        self._store(p, record, image_info)
        return record, _figure(record)

    def _gpu_problem(self, cell: cellmod.Cell, res: resources.Resources,
                     image: Any) -> str | None:
        """Probe GPU access once per image; None when the cell has no GPUs or they work."""
        if res.device != "cuda":
            return None
        if cell.environment not in self.gpu_problems:
            self.gpu_problems[cell.environment] = gpu.probe(self.client, image,
                                                            gpu.requested_count(res.gpus))
        return self.gpu_problems[cell.environment]

    def _store(self, p: cellmod.Prepared, record: dict[str, Any],
               image_info: dict[str, Any]) -> None:
        target = self.matrix.targets[p.cell.target]
        store.annotate(record, p.cell, p.identity, target.label, target.price_per_hour,
                         p.resources, image_info, self.matrix.benchmark.target_accuracy)
        record["written_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        path = self.opts.results_dir / ("%s.json" % p.file_stem)
        store.write(path, record)
        users.own(path)


def bench(opts: Options, out: TextIO = sys.stdout) -> int:
    started = time.perf_counter()
    m, cells = plan_cells(opts)
    data_dir = _data_dir(opts, m)
    mounts = containerrun.Mounts(opts.results_dir, opts.log_dir, data_dir)
    client = connection.connect()
    users.prepare_dirs(opts.reports_dir, opts.results_dir, opts.log_dir)
    host = Host.of_engine(client)
    remove_leftovers(client, out)
    print_resources(m, cells, host, out)
    blocked = gpu_blocks(client, m, cells, out)
    # An environment whose every cell this host cannot run is not built at all.
    names = list(dict.fromkeys(c.environment for c in cells if not (
        m.targets[c.target].device == "cuda" and c.environment in blocked)))
    built, build_failures = build_images(client, m, names, opts, out)
    session = _Session(client, m, opts, mounts, data_identity(data_dir), host, built,
                       build_failures, blocked)
    records: list[tuple[cellmod.Cell, dict[str, Any]]] = []
    shown = MatrixProgress(len(cells), out)
    session.on_line = shown.line
    try:
        for index, cell in enumerate(cells, 1):
            shown.start(index, cell.label)
            record, outcome = session.run(cell)
            records.append((cell, record))
            shown.done(outcome, executed=not outcome.startswith("cached"))
    except KeyboardInterrupt:
        shown.close()
        print("\ninterrupted: %d finished cells are kept in %s; run the same command again "
              "to run only the missing ones" % (len(records), opts.results_dir), file=out)
        return 130
    shown.close()
    _summary(records, out)
    print("%d cells in %.1f s; results in %s, logs in %s"
          % (len(cells), time.perf_counter() - started, opts.results_dir, opts.log_dir),
          file=out)
    if session.overheads:
        print("kit overhead per executed cell (container start/stop, result handling): "
              "median %.2f s, max %.2f s"
              % (stats.median(session.overheads), max(session.overheads)), file=out)
    return 0 if all(r.get("status") == "ok" for _, r in records) else 1


def gpu_blocks(client: docker.DockerClient, m: models.Matrix, cells: list[cellmod.Cell],
               out: TextIO) -> dict[str, tuple[str, str]]:
    """The doctor's GPU checks, before any build: environments whose GPU cells cannot run
    here, with the one sentence each cell will be recorded with."""
    envs = sorted({c.environment for c in cells if m.targets[c.target].device == "cuda"})
    if not envs:
        return {}
    images_here = client.images.list(filters={"label": "envbench.environment"})
    found = gpu.state(client, images_here[0] if images_here else None)
    if not found.runtime:
        print("GPU cells cannot run on this host: %s" % gpu.NO_RUNTIME, file=out, flush=True)
        return {name: ("GpuUnavailable", gpu.NO_RUNTIME) for name in envs}
    driver = found.driver
    if found.gpus:
        print("GPUs: %s; driver %s" % (", ".join(g.name for g in found.gpus), driver), file=out)
    blocked = {}
    for name in envs:
        issue = gpu.driver_problem(name, m.environments[name].cuda or "", driver)
        if issue:
            print("GPU cells of %s cannot run here: %s" % (name, issue), file=out, flush=True)
            blocked[name] = ("DriverTooOld", issue)
    return blocked


def remove_leftovers(client: docker.DockerClient, out: TextIO) -> None:
    """Containers of cells that a stopped engine or a killed run could not remove.

    Only those this machine started: an engine can be shared (the local cloud launcher's
    "VMs" share the host's), and another machine's cell may be just created or just ended.
    """
    mine = ["envbench.cell", "envbench.host=%s" % connection.client_host()]
    try:
        stale = client.containers.list(all=True, filters={"label": mine, "status": "exited"})
        stale += client.containers.list(all=True, filters={"label": mine, "status": "created"})
        for container in stale:
            container.remove(force=True)
    except connection.ENGINE_ERRORS as exc:
        print("could not remove containers left by an earlier run: %s" % connection.explain(exc),
              file=out)
        return
    if stale:
        print("removed %d container(s) left by an earlier run" % len(stale), file=out)


def print_resources(m: models.Matrix, cells: list[cellmod.Cell], host: Host,
                    out: TextIO) -> None:
    """Say what each target's cells may use on this host before anything runs."""
    seen: set[tuple[str, Any]] = set()
    for cell in cells:
        key = (cell.target, cell.settings["threads"])
        if key in seen:
            continue
        seen.add(key)
        res = resources.plan(m.targets[cell.target], host, cell.settings["threads"])
        print("target %s on this %d-CPU host: %s" % (cell.target, host.cpus, res.describe()),
              file=out)


def _figure(record: dict[str, Any]) -> str:
    if record.get("status") != "ok":
        error = record.get("error") or {}
        return "failed: %s: %s" % (error.get("type"), error.get("message"))
    summary = record["summary"]
    return "%.2f s/epoch, %.0f img/s, acc %.1f%%" % (
        summary["epoch_s_median"], summary["samples_per_s"] or 0,
        100 * (summary["final_test_acc"] or 0))


def _summary(records: list[tuple[cellmod.Cell, dict[str, Any]]], out: TextIO) -> None:
    """Median epoch time over repeats per (environment, target, variant)."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for cell, record in records:
        variant = " ".join("%s=%s" % kv for kv in sorted(cell.variant.items())) or "-"
        groups.setdefault((cell.environment, cell.target, variant), []).append(record)
    rows = [("environment", "target", "variant", "ok", "s/epoch (median)", "img/s", "acc")]
    for (env, target, variant), recs in groups.items():
        ok = [r for r in recs if r.get("status") == "ok"]
        epoch = stats.median([r["summary"]["epoch_s_median"] for r in ok]) if ok else None
        rate = stats.median([r["summary"]["samples_per_s"] for r in ok]) if ok else None
        acc = stats.median([r["summary"]["final_test_acc"] for r in ok]) if ok else None
        rows.append((env, target, variant, "%d/%d" % (len(ok), len(recs)),
                     "%.2f" % epoch if epoch is not None else "failed",
                     "%.0f" % rate if rate is not None else "—",
                     "%.1f%%" % (100 * acc) if acc is not None else "—"))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    print("", file=out)
    for row in rows:
        print("  ".join(str(v).ljust(w) for v, w in zip(row, widths)).rstrip(), file=out)
    print("", file=out)
