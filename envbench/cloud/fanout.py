"""`./noxw -s cloud`: one cluster per cloud target, all at once; results home; every cluster down.

Each target runs in its own thread: launch (provision, sync, setup, start the run script),
stream the job's output with a ``[target]`` prefix, then bring the results home over the
cluster's ssh alias (rsync), or from the job's log when rsync fails. A target whose cluster
cannot be provisioned gets its cells recorded as failed with the provider's reason; the
others go on. Every cluster that was asked for is torn down in a ``finally``: after the run,
after a failure, and after Ctrl-C (which says which clusters it stopped). Autostop-with-down
in each task is the safety net for a kit that dies before its ``finally``.
"""
from __future__ import annotations

import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from bench.rules import FailureKind
from bench.tracefile import TRACE_SUFFIX
from envbench import stopping, terminal, users
from envbench.cells import dataset, records, takein, traces
from envbench.cells import expansion as cellmod
from envbench.cloud import fetch, local, runid, sky
from envbench.cloud import plan as planmod
from envbench.cloud.launcher import Launcher, ProvisionFailed, Remote
from envbench.cloud.plan import TargetPlan
from envbench.cloud.tasks import RESULT_MARKER
from envbench.command_options import Options
from envbench.engine.host import Host
from envbench.matrix import models
from envbench.matrix.models import Matrix
from envbench.results import clusters, contract, identity, store
from envbench.results.clusters import ClusterRun, ClusterState
from envbench.results.identity import SYNTHETIC, DataIdentity

RSYNC_TIMEOUT_S = 600


class FanOut:
    def __init__(self, plans: list[TargetPlan], launcher: Launcher, m: Matrix, reports: Path,
                 data: DataIdentity, out: TextIO | None = None) -> None:
        self.plans = plans
        self.launcher = launcher
        self.matrix = m
        self.reports = reports
        self.data = data  # the cells' data identity (synthetic, or the data set's digest)
        self.out = out or sys.stdout  # looked up now: a default bound at import goes stale
        self.asked: list[str] = []  # clusters launch was called for: each gets a down
        self.stopping = threading.Event()
        self.started: dict[str, float] = {}  # target -> when its launch began (monotonic)
        self._lock = threading.Lock()
        self.outcomes = {p.name: ClusterRun(p.name, p.task["name"], p.accelerators, p.infra,
                                            p.price, p.price_source) for p in plans}

    # --- output
    def say(self, target: str, line: str) -> None:
        """One line for the user; what the VM printed may carry terminal escapes."""
        with self._lock:
            print("[%s] %s" % (target, terminal.safe(line)), file=self.out, flush=True)

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
            outcome.state = ClusterState.LAUNCHING
            self.say(plan.name, "launching cluster %s: %s on %s (%s)" % (
                cluster, plan.accelerators, plan.infra, self.launcher.name))
            with self._lock:
                self.asked.append(cluster)
            try:
                remote = self.launcher.launch(cluster, plan.task, sink)
            except ProvisionFailed as exc:
                if not self.stopping.is_set():
                    self._failed(plan, outcome, FailureKind.PROVISION_FAILED,
                                 "%s could not be provisioned: %s" % (cluster, exc))
                return
            outcome.state, outcome.provisioned = ClusterState.RUNNING, True
            outcome.exit_code = self.launcher.wait(cluster, sink)
            if self.stopping.is_set():
                return
            outcome.state = ClusterState.FETCHING
            self._bring_home(plan, outcome, remote, "\n".join(log))
        except Exception as exc:  # one target's surprise must not stop the others
            if not self.stopping.is_set():
                self._failed(plan, outcome, type(exc).__name__, "%s: %s" % (cluster, exc))
        finally:
            outcome.wall_s = round(time.monotonic() - started, 1)
            self._save_log(plan.name, log)

    def _bring_home(self, plan: TargetPlan, outcome: ClusterRun, remote: Remote,
                    log: str) -> None:
        staging = self.reports / "cloud" / plan.name
        shutil.rmtree(staging, ignore_errors=True)
        users.prepare_dirs(staging.parent)  # REPORTS/cloud stays; the staging folder goes
        (staging / "results").mkdir(parents=True)
        problem = rsync(remote, "reports/results/", staging / "results",
                        ("*.json", "*" + TRACE_SUFFIX))
        if problem is None:
            outcome.fetched_by = "rsync over ssh (%s)" % remote.alias
            rsync(remote, "reports/logs/", staging / "logs", "*.log")  # they help; results matter
        else:
            self.say(plan.name, "rsync failed (%s): restoring results from the job's log"
                     % problem)
            written, refused = fetch.restore(log, staging / "results")
            for name, why in refused:
                self.say(plan.name, "left out %s from the log: %s" % (name, why))
            outcome.fetched_by = "the job's log"
        try:
            kept = self._keep(plan, staging)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        outcome.results = [p.name for p in kept]
        if not kept:
            bench = bench_exit(log)
            error = last_error(log)
            self._failed(plan, outcome, FailureKind.NO_RESULT,
                         "no results came back from %s (the job's status: exit code %s; %s)%s "
                         "(its log: %s)" % (
                             outcome.cluster, outcome.exit_code,
                             "bench exited with code %d" % bench if bench is not None
                             else "bench never ended: set-up or the launch failed first",
                             ": %s" % error if error else "",
                             self.reports / "cloud" / ("%s.log" % plan.name)))
            return
        ok = sum(1 for p in kept if contract.load(p)["status"] == "ok")
        outcome.state = ClusterState.DONE
        outcome.message = "%d result%s (%d ok), job exit code %s" % (
            len(kept), "" if len(kept) == 1 else "s", ok, outcome.exit_code)
        self.say(plan.name, "results home via %s: %s" % (outcome.fetched_by, outcome.message))

    def _keep(self, plan: TargetPlan, staging: Path) -> list[Path]:
        """Valid results of this target, with the price and where it came from, into
        REPORTS/results; the VM's logs beside the others."""
        kept = []
        dest = self.reports / "results"
        users.prepare_dirs(dest)
        for path in sorted((staging / "results").glob("*.json")):
            try:
                record = contract.load(path)
            except contract.InvalidResult as exc:
                self.say(plan.name, "left out %s: %s" % (path.name, exc))
                continue
            cell = record["cell"]  # the contract guarantees the section and its keys
            if cell["target"] != plan.name:
                continue  # not this target's (a workdir that carried older results)
            if cell["price_per_hour"] is None and plan.price is not None:
                cell["price_per_hour"] = plan.price
                cell["price_source"] = plan.price_source
            elif cell["price_per_hour"] is not None:
                cell.setdefault("price_source", "matrix")
            # Named by its own identity, never by the VM's file name: a VM cannot choose
            # which of reports/results it overwrites.
            home = store.path_for(dest, identity.of_record(record), cell.get("variant") or {})
            traces.take(record, staging / "results", dest, path.stem, home.stem)
            store.write(home, record)
            users.own(home)
            kept.append(home)
        logs = staging / "logs"
        if logs.is_dir():
            for path in sorted(logs.glob("*.log")):
                if not LOG_NAME.match(path.name):
                    continue
                try:  # not through a link, not a FIFO, capped (contract.read_capped)
                    data = contract.read_capped(path, takein.LOG_CAP)
                except (OSError, contract.InvalidResult) as exc:
                    self.say(plan.name, "left out log %s: %s" % (path.name, exc))
                    continue
                users.write_text(self.reports / "logs" / ("%s--%s" % (plan.name, path.name)),
                                 data.decode("utf-8", "replace"))
        return kept

    def _failed(self, plan: TargetPlan, outcome: ClusterRun, kind: str, message: str) -> None:
        """Every cell of the target recorded as failed with ``message``."""
        outcome.state, outcome.message = ClusterState.FAILED, message
        dest = self.reports / "results"
        users.prepare_dirs(dest)
        target = self.matrix.targets[plan.name]
        host = Host(target.cpus or 1, None)  # the VM never answered: unknown
        for cell in plan.cells:
            p = cellmod.prepare(cell, target, host, self.data, None)
            records.failed(dest, p, target, kind, message,
                           self.matrix.benchmark.target_accuracy, price=plan.price,
                           price_source=plan.price_source)
            outcome.results.append("%s.json" % p.file_stem)
        self.say(plan.name, "failed: %s (%d cells recorded as failed)"
                 % (message, len(plan.cells)))

    def _save_log(self, target: str, log: list[str]) -> None:
        users.write_text(self.reports / "cloud" / ("%s.log" % target), "\n".join(log) + "\n")

    # --- all targets
    def run(self) -> int:
        threads = [threading.Thread(target=self._target, args=(p,), daemon=True,
                                    name="cloud-%s" % p.name) for p in self.plans]
        interrupted = False
        previous = _stop_signals_interrupt()
        try:
            for t in threads:
                t.start()
            while any(t.is_alive() for t in threads):
                for t in threads:
                    t.join(0.2)
        except KeyboardInterrupt:
            interrupted = True
            self.stopping.set()
            print("\ninterrupted: tearing down every cluster of this run (a second Ctrl-C "
                  "does not stop this)", file=self.out, flush=True)
        finally:
            # Money is at stake: nothing interrupts the teardown once it has begun.
            _ignore_stop_signals()
            try:
                in_flight = [o.cluster for o in self.outcomes.values()
                             if o.state is ClusterState.LAUNCHING]
                stopped = self.teardown()
                if interrupted:
                    # A launch still in its thread may bring a VM up after its `down`: wait
                    # for those threads, then take their clusters down once more.
                    for t in threads:
                        t.join(LATE_LAUNCH_S)
                    for cluster in in_flight:
                        self.teardown_one(cluster)
            finally:
                stopping.restore(previous)
        if interrupted:
            for o in self.outcomes.values():
                if not o.state.ended:
                    o.state = ClusterState.INTERRUPTED
                if o.wall_s is None and o.target in self.started:  # up until the teardown
                    o.wall_s = round(time.monotonic() - self.started[o.target], 1)
            print("stopped clusters: %s" % (", ".join(stopped) or "none had started"),
                  file=self.out, flush=True)
            self.record_costs()  # an interrupted cluster was still paid for
            self.write_runs()
            return 130
        self.record_costs()
        self.write_runs()
        return 0 if all(o.state is ClusterState.DONE and o.exit_code == 0
                        for o in self.outcomes.values()) else 1

    def sweep(self, claim: runid.RunClaim) -> list[str]:
        """Take down this machine's clusters whose run died before its teardown (see
        envbench.cloud.runid); a live run's, and other machines', are left alone."""
        try:
            gone = runid.leftovers(self.launcher.clusters(), claim)
        except Exception as exc:  # the provider's listing failed: say so, launch anyway
            print("could not list the clusters of earlier runs (%s): check `sky status` for "
                  "envbench-%s-* clusters" % (exc, runid.machine_tag()), file=self.out,
                  flush=True)
            return []
        for cluster in gone:
            print("taking down %s: an earlier run on this machine started it and is no "
                  "longer running" % cluster, file=self.out, flush=True)
        return [cluster for cluster in gone if self.teardown_one(cluster)]

    def teardown(self) -> list[str]:
        return [cluster for cluster in list(self.asked) if self.teardown_one(cluster)]

    def teardown_one(self, cluster: str) -> bool:
        try:
            self.launcher.down(cluster)
        except Exception as exc:  # say so, go on with the others: money is at stake
            print("could not tear down %s: %s; check it with `sky status` and remove it "
                  "with `sky down %s`" % (cluster, exc, cluster), file=self.out, flush=True)
            return False
        print("torn down: %s" % cluster, file=self.out, flush=True)
        return True

    def record_costs(self) -> None:
        try:
            costs = self.launcher.costs([o.cluster for o in self.outcomes.values()])
        except Exception as exc:
            print("the provider's cost report is unavailable: %s" % exc, file=self.out)
            costs = {}
        for o in self.outcomes.values():
            if o.cluster in costs:
                o.cost, o.cost_source = costs[o.cluster], self.launcher.name
            elif not o.provisioned and o.state is ClusterState.FAILED:
                o.cost, o.cost_source = 0.0, "never provisioned"
            elif o.estimated_cost is not None:
                o.cost, o.cost_source = o.estimated_cost, "estimate (price x wall time)"

    def write_runs(self) -> Path:
        return clusters.write(self.reports, self.launcher.name, list(self.outcomes.values()))


LATE_LAUNCH_S = 120  # how long an interrupted run waits for launches still in flight
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _stop_signals_interrupt() -> dict[int, Any]:
    """SIGTERM (a supervisor, `timeout`) and SIGHUP (a closed terminal) as Ctrl-C: every
    cluster down (envbench.stopping; the command line sets this too, and a caller that is
    not the command line gets it here). The previous handlers, Ctrl-C's included: the
    teardown ignores all three, and all three come back after it."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {signal.SIGINT: signal.getsignal(signal.SIGINT), **stopping.as_interrupt()}


def _ignore_stop_signals() -> None:
    if threading.current_thread() is threading.main_thread():
        for s in STOP_SIGNALS:
            signal.signal(s, signal.SIG_IGN)



BENCH_EXIT = re.compile(r"envbench: bench exited with code (\d+)")
ERROR_LINE = re.compile(r"(error|failed|✘|refused|denied)", re.IGNORECASE)


def bench_exit(log: str) -> int | None:
    """bench's own exit code, as the run script prints it (the launcher's job status is
    another thing: SkyPilot's, 100 for any failed job)."""
    found = BENCH_EXIT.findall(log)
    return int(found[-1]) if found else None


def last_error(log: str) -> str | None:
    """The log's last line that reads as an error, for the record (the whole log is saved)."""
    for line in reversed(log.splitlines()):
        if RESULT_MARKER not in line and ERROR_LINE.search(line) and \
                not BENCH_EXIT.search(line):
            return " ".join(line.split())[:300]
    return None


# What a VM may send home: regular files of one kind, each at most this large. Links,
# devices, FIFOs and sockets are skipped; owners, groups and modes are not taken (the VM
# could hand root a setuid file); folders below are not descended into.
MAX_FILE = "32m"
LOG_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}\.log\Z")


def rsync(remote: Remote, path: str, dest: Path,
          patterns: tuple[str, ...] | str = "*.json") -> str | None:
    """Copy the regular files matching ``patterns`` of folder ``path`` (relative to the
    workdir) from the cluster, and nothing else; None, or why it failed."""
    dest.mkdir(parents=True, exist_ok=True)
    wanted = (patterns,) if isinstance(patterns, str) else patterns
    command = ["rsync", "--recursive", "--times", "--no-links", "--no-devices",
               "--no-specials", "--no-perms", "--no-owner", "--no-group", "--chmod=F644,D755",
               "--max-size=%s" % MAX_FILE, *("--include=%s" % p for p in wanted), "--exclude=*",
               "--timeout=60", "-e", " ".join(map(shlex.quote, remote.ssh)),
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


def data_identity(opts: Options, m: Matrix) -> DataIdentity:
    """The data the cloud cells measure on: synthetic; the data set given with --data (and
    uploaded); else CIFAR-10 that each VM fetches itself, whose digest is not known here."""
    if opts.synthetic or m.benchmark.data == "synthetic":
        return SYNTHETIC
    if opts.data_dir is not None:
        return dataset.identity_of(opts.data_dir)  # plan() checked it is CIFAR-10
    return DataIdentity("cifar10")


def launch(opts: Options, out: TextIO = sys.stdout) -> tuple[int, list[ClusterRun]]:
    """Plan (as the dry run shows it), sweep what runs that died left, fan out, tear down;
    the exit code and what each cluster did."""
    m = models.load(opts.matrix_path)
    claim = runid.RunClaim()  # held until the end: this run's clusters are not leftovers
    try:
        plans = planmod.plan(m, opts, planmod.checkout(), claim.prefix)
        print(planmod.describe(plans, launching=True), file=out, flush=True)
        if opts.launcher == "local":
            launcher: local.LocalLauncher | sky.SkyLauncher = local.make(out)
        else:
            launcher = sky.SkyLauncher()
            launcher.check(out)  # which clouds can launch, before any is asked to
        fan = FanOut(plans, launcher, m, opts.reports_dir, data_identity(opts, m), out)
        fan.sweep(claim)
        code = fan.run()
        return code, list(fan.outcomes.values())
    finally:
        claim.release()
