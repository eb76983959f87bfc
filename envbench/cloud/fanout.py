"""`nox -s cloud`: one cluster per cloud target, all at once; results home; every cluster down.

Each target runs in its own thread: launch (provision, sync, setup, start the run script),
stream the job's output with a ``[target]`` prefix, then bring the results home over the
cluster's ssh alias (rsync), or from the job's log when rsync fails. A target whose cluster
cannot be provisioned gets its cells recorded as failed with the provider's reason; the
others go on. Every cluster that was asked for is torn down in a ``finally``: after the run,
after a failure, and after Ctrl-C (which says which clusters it stopped). Autostop-with-down
in each task is the safety net for a kit that dies before its ``finally``.
"""
from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

from bench import result
from envbench.cells import expansion as cellmod
from envbench.cloud import fetch
from envbench.cloud.launcher import Launcher, ProvisionFailed, Remote
from envbench.cloud.plan import TargetPlan
from envbench.cloud.tasks import RESULT_MARKER
from envbench.engine.host import Host
from envbench.matrix.models import Matrix
from envbench.results import contract, store

RSYNC_TIMEOUT_S = 600


@dataclass
class Outcome:
    """What happened to one target's cluster: the report's cloud table reads it."""

    target: str
    cluster: str
    accelerators: str
    infra: str
    price_per_hour: float | None
    price_source: str
    state: str = "pending"  # launching, running, fetching, done, failed, interrupted
    exit_code: int | None = None
    results: list[str] = field(default_factory=list)
    fetched_by: str | None = None  # "rsync over ssh" or "the job's log"
    message: str | None = None
    wall_s: float | None = None
    cost: float | None = None  # the provider's own figure, where it gives one
    cost_source: str | None = None
    provisioned: bool = False

    @property
    def estimated_cost(self) -> float | None:
        if self.price_per_hour is None or self.wall_s is None or not self.provisioned:
            return None
        return self.price_per_hour * self.wall_s / 3600.0


class FanOut:
    def __init__(self, plans: list[TargetPlan], launcher: Launcher, m: Matrix, reports: Path,
                 data: dict[str, Any], out: TextIO = sys.stdout) -> None:
        self.plans = plans
        self.launcher = launcher
        self.matrix = m
        self.reports = reports
        self.data = data  # the cells' data identity (synthetic, or the data set's digest)
        self.out = out
        self.asked: list[str] = []  # clusters launch was called for: each gets a down
        self.stopping = threading.Event()
        self.started: dict[str, float] = {}  # target -> when its launch began (monotonic)
        self._lock = threading.Lock()
        self.outcomes = {p.name: Outcome(p.name, p.task["name"], p.accelerators, p.infra,
                                         p.price, p.price_source) for p in plans}

    # --- output
    def say(self, target: str, line: str) -> None:
        with self._lock:
            print("[%s] %s" % (target, line), file=self.out, flush=True)

    # --- one target
    def _target(self, plan: TargetPlan) -> None:
        outcome = self.outcomes[plan.name]
        cluster = outcome.cluster
        started = self.started[plan.name] = time.monotonic()
        log: list[str] = []

        def sink(line: str) -> None:
            log.append(line)
            if RESULT_MARKER in line:  # the fallback copy of a result: the log keeps it
                return
            self.say(plan.name, line)

        try:
            outcome.state = "launching"
            self.say(plan.name, "launching cluster %s: %s on %s (%s)" % (
                cluster, plan.accelerators, plan.infra, self.launcher.name))
            with self._lock:
                self.asked.append(cluster)
            try:
                remote = self.launcher.launch(cluster, plan.task, sink)
            except ProvisionFailed as exc:
                if not self.stopping.is_set():
                    self._failed(plan, outcome, "ProvisionFailed",
                                 "%s could not be provisioned: %s" % (cluster, exc))
                return
            outcome.state, outcome.provisioned = "running", True
            outcome.exit_code = self.launcher.wait(cluster, sink)
            if self.stopping.is_set():
                return
            outcome.state = "fetching"
            self._bring_home(plan, outcome, remote, "\n".join(log))
        except Exception as exc:  # one target's surprise must not stop the others
            if not self.stopping.is_set():
                self._failed(plan, outcome, type(exc).__name__, "%s: %s" % (cluster, exc))
        finally:
            outcome.wall_s = round(time.monotonic() - started, 1)
            self._save_log(plan.name, log)

    def _bring_home(self, plan: TargetPlan, outcome: Outcome, remote: Remote,
                    log: str) -> None:
        staging = self.reports / "cloud" / plan.name
        shutil.rmtree(staging, ignore_errors=True)
        (staging / "results").mkdir(parents=True)
        problem = rsync(remote, "reports/results/", staging / "results")
        if problem is None:
            outcome.fetched_by = "rsync over ssh (%s)" % remote.alias
            rsync(remote, "reports/logs/", staging / "logs")  # logs help; results matter
        else:
            self.say(plan.name, "rsync failed (%s): restoring results from the job's log"
                     % problem)
            written, refused = fetch.restore(log, staging / "results")
            for name, why in refused:
                self.say(plan.name, "left out %s from the log: %s" % (name, why))
            outcome.fetched_by = "the job's log"
        kept = self._keep(plan, staging)
        outcome.results = [p.name for p in kept]
        if not kept:
            self._failed(plan, outcome, "NoResults",
                         "the job on %s ended with exit code %s and no results came back "
                         "(its log: %s)" % (outcome.cluster, outcome.exit_code,
                                            self.reports / "cloud" / ("%s.log" % plan.name)))
            return
        ok = sum(1 for p in kept if contract.load(p)["status"] == "ok")
        outcome.state = "done"
        outcome.message = "%d result%s (%d ok), job exit code %s" % (
            len(kept), "" if len(kept) == 1 else "s", ok, outcome.exit_code)
        self.say(plan.name, "results home via %s: %s" % (outcome.fetched_by, outcome.message))

    def _keep(self, plan: TargetPlan, staging: Path) -> list[Path]:
        """Valid results of this target, with the price and where it came from, into
        REPORTS/results; the VM's logs beside the others."""
        kept = []
        dest = self.reports / "results"
        dest.mkdir(parents=True, exist_ok=True)
        for path in sorted((staging / "results").glob("*.json")):
            try:
                record = contract.load(path)
            except contract.InvalidResult as exc:
                self.say(plan.name, "left out %s: %s" % (path.name, exc))
                continue
            cell = record.get("cell") or {}
            if cell.get("target") != plan.name:
                continue  # not this target's (a workdir that carried older results)
            if cell.get("price_per_hour") is None and plan.price is not None:
                cell["price_per_hour"] = plan.price
                cell["price_source"] = plan.price_source
            elif cell.get("price_per_hour") is not None:
                cell.setdefault("price_source", "matrix")
            store.write(dest / path.name, record)
            kept.append(dest / path.name)
        logs = staging / "logs"
        if logs.is_dir():
            (self.reports / "logs").mkdir(parents=True, exist_ok=True)
            for path in logs.glob("*.log"):
                shutil.copyfile(path, self.reports / "logs" / path.name)
        return kept

    def _failed(self, plan: TargetPlan, outcome: Outcome, kind: str, message: str) -> None:
        """Every cell of the target recorded as failed with ``message``."""
        outcome.state, outcome.message = "failed", message
        dest = self.reports / "results"
        dest.mkdir(parents=True, exist_ok=True)
        target = self.matrix.targets[plan.name]
        host = Host(target.cpus or 1, None)  # the VM never answered: unknown
        for cell in plan.cells:
            p = cellmod.prepare(cell, target, host, self.data, None)
            record = store.host_failure(p.config, kind, message)
            store.annotate(record, cell, p.identity, target.label, plan.price, p.resources,
                             {"tag": None, "id": None}, self.matrix.benchmark.target_accuracy)
            record["cell"]["price_source"] = plan.price_source
            record["written_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
            store.write(dest / ("%s.json" % p.file_stem), record)
            outcome.results.append("%s.json" % p.file_stem)
        self.say(plan.name, "failed: %s (%d cells recorded as failed)"
                 % (message, len(plan.cells)))

    def _save_log(self, target: str, log: list[str]) -> None:
        path = self.reports / "cloud" / ("%s.log" % target)
        path.parent.mkdir(parents=True, exist_ok=True)
        result.write_text_atomic(str(path), "\n".join(log) + "\n")

    # --- all targets
    def run(self) -> int:
        threads = [threading.Thread(target=self._target, args=(p,), daemon=True,
                                    name="cloud-%s" % p.name) for p in self.plans]
        interrupted = False
        try:
            for t in threads:
                t.start()
            while any(t.is_alive() for t in threads):
                for t in threads:
                    t.join(0.2)
        except KeyboardInterrupt:
            interrupted = True
            self.stopping.set()
            print("\ninterrupted: tearing down every cluster of this run", file=self.out,
                  flush=True)
        finally:
            stopped = self.teardown()
        if interrupted:
            for o in self.outcomes.values():
                if o.state not in ("done", "failed"):
                    o.state = "interrupted"
                if o.wall_s is None and o.target in self.started:  # up until the teardown
                    o.wall_s = round(time.monotonic() - self.started[o.target], 1)
            print("stopped clusters: %s" % (", ".join(stopped) or "none had started"),
                  file=self.out, flush=True)
            self.record_costs()  # an interrupted cluster was still paid for
            self.write_runs()
            return 130
        self.record_costs()
        self.write_runs()
        return 0 if all(o.state == "done" and o.exit_code == 0
                        for o in self.outcomes.values()) else 1

    def teardown(self) -> list[str]:
        stopped = []
        for cluster in list(self.asked):
            try:
                self.launcher.down(cluster)
                stopped.append(cluster)
                print("torn down: %s" % cluster, file=self.out, flush=True)
            except Exception as exc:  # say so, go on with the others: money is at stake
                print("could not tear down %s: %s; check it with `sky status` and remove it "
                      "with `sky down %s`" % (cluster, exc, cluster), file=self.out,
                      flush=True)
        return stopped

    def record_costs(self) -> None:
        try:
            costs = self.launcher.costs([o.cluster for o in self.outcomes.values()])
        except Exception as exc:
            print("the provider's cost report is unavailable: %s" % exc, file=self.out)
            costs = {}
        for o in self.outcomes.values():
            if o.cluster in costs:
                o.cost, o.cost_source = costs[o.cluster], self.launcher.name
            elif not o.provisioned and o.state == "failed":
                o.cost, o.cost_source = 0.0, "never provisioned"
            elif o.estimated_cost is not None:
                o.cost, o.cost_source = o.estimated_cost, "estimate (price x wall time)"

    def write_runs(self) -> Path:
        path = self.reports / "cloud" / "runs.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        runs = [dict(asdict(o), estimated_cost=o.estimated_cost)
                for o in self.outcomes.values()]
        result.write_text_atomic(str(path), json.dumps(
            {"launcher": self.launcher.name, "runs": runs}, indent=2) + "\n")
        return path


def rsync(remote: Remote, path: str, dest: Path) -> str | None:
    """Copy ``path`` (relative to the workdir) from the cluster; None, or why it failed."""
    dest.mkdir(parents=True, exist_ok=True)
    command = ["rsync", "-a", "--timeout=60", "-e", " ".join(map(shlex.quote, remote.ssh)),
               "%s:%s/%s" % (remote.alias, remote.workdir, path), str(dest) + "/"]
    try:
        # Its own session: a Ctrl-C is the kit's to handle (it tears the clusters down).
        proc = subprocess.run(command, capture_output=True, text=True, timeout=RSYNC_TIMEOUT_S,
                              start_new_session=True)
    except FileNotFoundError:
        return "rsync is not installed here"
    except subprocess.TimeoutExpired:
        return "rsync took over %d s" % RSYNC_TIMEOUT_S
    if proc.returncode != 0:
        return "exit %d: %s" % (proc.returncode, " ".join(proc.stderr.split())[-300:])
    return None


def runs_of(reports: Path) -> list[dict[str, Any]]:
    """The last fan-out's clusters (REPORTS/cloud/runs.json), for the report's cost table."""
    path = reports / "cloud" / "runs.json"
    try:
        return list(json.loads(path.read_text())["runs"])
    except (OSError, ValueError, KeyError, TypeError):
        return []


def launch(m: Matrix, matrix_path: Path, reports: Path, targets: list[str] | None,
           data: Path | None, synthetic: bool, out_dir: Path | None, launcher_name: str,
           out: TextIO = sys.stdout) -> int:
    """`envbench cloud`: plan (as the dry run shows it), fan out, tear down, report."""
    from envbench.cells.matrixrun import data_identity
    from envbench.cloud import plan as planmod
    from envbench.report import pages

    workdir = planmod.checkout()
    plans = planmod.plan(m, matrix_path, workdir, reports, targets, data, synthetic, out_dir)
    print(planmod.describe(plans, launching=True), file=out, flush=True)
    if launcher_name == "local":
        from envbench.cloud import local

        launcher: Launcher = local.make(out)
    else:
        from envbench.cloud import sky as skyapi

        launcher = skyapi.SkyLauncher()
    if synthetic or m.benchmark.data == "synthetic":
        data_ident = data_identity(None)
    elif data is not None:
        data_ident = data_identity(data)  # plan() checked it is CIFAR-10
    else:
        data_ident = {"source": "cifar10", "sha256": None}  # each VM fetches it itself
    fan = FanOut(plans, launcher, m, reports, data_ident, out)
    code = fan.run()
    files = [reports / "results" / name for o in fan.outcomes.values() for name in o.results]
    files = [f for f in files if f.exists()]
    print("", file=out)
    for o in fan.outcomes.values():
        cost = ("$%.4f (%s)" % (o.cost, o.cost_source) if o.cost is not None else "cost unknown")
        print("; ".join(part for part in ("%s on %s: %s" % (o.target, o.cluster, o.state),
                                          o.message, cost) if part), file=out)
    if files and code != 130:
        written = pages.render(files, reports, cloud_runs=runs_of(reports))
        print("report of %d results from %d cluster%s: %s"
              % (len(files), len(fan.outcomes), "" if len(fan.outcomes) == 1 else "s",
                 written["html"]), file=out)
    return code
