"""Every option of `envbench`, defined once: the parser is built from these definitions, and
every command receives the parsed values as one typed ``Options`` (as nox's _options.py does).

An option is added in one place (``OPTIONS``) and given to the commands that take it
(``COMMANDS``); a command refuses an option it does not take, so nothing is silently ignored.
"""
from __future__ import annotations

import argparse
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from bench.rules import QUICK_LIMITS


@dataclass(frozen=True)
class Options:
    """What a command was asked to do. Defaults are the parser's, so a caller that builds one
    by hand (the demo, tests) gets what the command line would give."""

    matrix_path: Path = Path("matrix.yaml")
    envs: tuple[str, ...] = ()
    targets: tuple[str, ...] = ()
    kind: str | None = None              # "cpu" or "cuda": only cells on such targets
    quick: bool = False
    profile: bool = False                # `bench`, `report`: every cell with an operator profile
    reports_dir: Path = Path("reports")
    offline: bool = False                # never pull a base image
    locks: Path | None = None            # default: locks_dir
    frozen: bool = False                 # refuse to create a missing lock
    synthetic: bool = False
    data_dir: Path | None = None         # holds cifar-10-batches-py/ (default: the cache)
    cache_dir: Path | None = None        # `data`: where CIFAR-10 is fetched to
    url: str | None = None               # `data`: another source of the archive
    results: tuple[Path, ...] = ()       # `report`: folders or files given by path
    out: Path | None = None              # where a command writes (its own default)
    baseline: str | None = None          # `report`: the baseline target
    baseline_env: str | None = None      # `report`: the baseline environment
    target_accuracy: float | None = None
    old: Path | None = None              # `compare`: the earlier run
    new: Path | None = None              # `compare`: the later run
    keep_contended: bool = False         # `report`, `compare`: verdicts take contended repeats
    threshold: float = 0.05
    fail_on_regression: bool = False
    order: str = "interleaved"           # `bench`: rounds shuffled, or every repeat together
    order_seed: int | None = None        # `bench`: the seed that shuffles (None: a new one)
    dry_run: bool = False                # `cloud`: plan and task YAMLs only
    print_only: bool = False             # `slurm`: the batch scripts, submitted by hand
    probe: bool = False                  # `doctor`: run the Slurm targets' probe jobs too
    launcher: str = "sky"                # `cloud`: sky or local
    check: bool = False                  # `lock`: re-resolve and compare, write nothing
    remove: tuple[str, ...] = ()         # `clean`: the parts to remove (none: list them)

    @property
    def matrix_dir(self) -> Path:
        return self.matrix_path.resolve().parent

    @property
    def locks_dir(self) -> Path:
        """--locks, else $ENVBENCH_LOCKS, else locks/ beside the matrix."""
        return self.locks or Path(os.environ.get("ENVBENCH_LOCKS") or self.matrix_dir / "locks")

    @property
    def results_dir(self) -> Path:
        return self.reports_dir / "results"

    @property
    def log_dir(self) -> Path:
        return self.reports_dir / "logs"

    @property
    def cells_dir(self) -> Path:
        """Each running cell's own /results folder lives here, removed when the cell ends."""
        return self.reports_dir / ".cells"

    @property
    def allow_pull(self) -> bool:
        return not self.offline

    def but(self, **changes: Any) -> Options:
        return replace(self, **changes)


@dataclass(frozen=True)
class Option:
    """One option: its Options field, its flag (none: positional), its argparse keywords."""

    name: str
    flag: str | None
    help: str
    argparse: Mapping[str, Any] = field(default_factory=dict)


def _fraction(low_open: bool, high_open: bool, example: str) -> Any:
    """An argparse type: a finite number between 0 and 1, each end open or closed as said
    (nan, inf, -0.5 and 1.5 are refused with one sentence, before anything is read)."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        low_ok = value > 0 if low_open else value >= 0
        high_ok = value < 1 if high_open else value <= 1
        if not (math.isfinite(value) and low_ok and high_ok):
            raise argparse.ArgumentTypeError(
                "%r is not a fraction %s 0 and %s 1 (%s)" % (
                    text[:40], "above" if low_open else "from",
                    "below" if high_open else "up to", example))
        return value
    return parse


def _options(*defined: Option) -> dict[str, Option]:
    return {option.name: option for option in defined}


OPTIONS = _options(
    Option("matrix_path", "--matrix", "matrix file", {"type": Path, "metavar": "FILE"}),
    Option("envs", "--env", "only this environment (repeatable)",
           {"action": "append", "metavar": "NAME"}),
    Option("targets", "--target", "only this target (repeatable)",
           {"action": "append", "metavar": "NAME"}),
    Option("kind", "--kind", "only cells on cpu or cuda targets", {"choices": ("cpu", "cuda")}),
    Option("quick", "--quick", "1 epoch, 1 repeat, a subset (%d images for the CIFAR-10 "
           "workloads, fewer samples for resnet50 and the GPTs)" % QUICK_LIMITS[0],
           {"action": "store_true"}),
    Option("profile", "--profile", "profile every cell: after its timed epochs, a few more "
           "steps under torch.profiler (top operators on the page, a Chrome trace beside the "
           "result); a profiled cell is a measurement of its own", {"action": "store_true"}),
    Option("reports_dir", "--reports", "output folder (results/, logs/)",
           {"type": Path, "metavar": "DIR"}),
    Option("offline", "--offline", "never pull a base image", {"action": "store_true"}),
    Option("locks", "--locks", "lock files (default: locks/ beside the matrix, or "
           "$ENVBENCH_LOCKS)", {"type": Path, "metavar": "DIR"}),
    Option("frozen", "--frozen", "refuse to create a missing lock (CI: every lock is "
           "committed)", {"action": "store_true"}),
    Option("synthetic", "--synthetic", "in-memory data, no download", {"action": "store_true"}),
    Option("data_dir", "--data", "folder holding cifar-10-batches-py/ (default: the cache)",
           {"type": Path, "metavar": "DIR"}),
    Option("cache_dir", "--dir", "cache folder", {"type": Path, "metavar": "DIR"}),
    Option("url", "--url", "another source of cifar-10-python.tar.gz", {"metavar": "URL"}),
    Option("results", None, "result folders or files (default: the current matrix's cells in "
           "REPORTS/results)", {"nargs": "*", "type": Path}),
    Option("out", "--out", "where to write", {"type": Path, "metavar": "DIR"}),
    Option("baseline", "--baseline", "target that speedups are measured against (default: a "
           "cpu one)", {"metavar": "TARGET"}),
    Option("baseline_env", "--baseline-env", "environment the head-to-head compares against "
           "(default: the write-up's stack where present, else the first)", {"metavar": "ENV"}),
    Option("target_accuracy", "--target-accuracy", "accuracy for 'time to accuracy' (default: "
           "the matrix's, as recorded in the results)",
           {"type": _fraction(True, False, "0.5 is 50%"), "metavar": "ACC"}),
    Option("keep_contended", "--keep-contended", "take repeats that ran contended (another "
           "process on their cores, a throttling GPU) into figures and verdicts too, as the "
           "kit did before it sensed them", {"action": "store_true"}),
    Option("old", None, "the earlier run's results (folder or file)", {"type": Path}),
    Option("new", None, "the later run's results", {"type": Path}),
    Option("threshold", "--threshold", "flag a change only when its interval lies wholly "
           "beyond this (default 0.05: 5%%)",
           {"type": _fraction(False, True, "0.05 is 5%"), "metavar": "FRACTION"}),
    Option("fail_on_regression", "--fail-on-regression", "exit 1 when a cell regressed, or "
           "failed or is missing in NEW though OLD measured it (for CI)",
           {"action": "store_true"}),
    Option("order", "--order", "interleaved: cells run in rounds, one repeat of every cell "
           "per round, shuffled (drift then falls on every environment alike), with rounds "
           "added for contended repeats and open comparisons; grouped: every repeat of a cell "
           "together, the planned repeats only, as before", {"choices": ("interleaved",
                                                                         "grouped")}),
    Option("order_seed", "--order-seed", "the seed that shuffles the rounds (default: a new "
           "one, printed and recorded in every result, to replay an order)",
           {"type": int, "metavar": "SEED"}),
    Option("dry_run", "--dry-run", "print the plan and write the task YAMLs; launch nothing",
           {"action": "store_true"}),
    Option("print_only", "--print", "print each Slurm target's batch script and the commands "
           "that convert its images, for submitting by hand; convert nothing, submit nothing "
           "(the preflight's probe job is not run either)", {"action": "store_true"}),
    Option("probe", "--probe", "also run each Slurm target's probe job: one short srun on its "
           "partition, which reads the shared folder, the runtime and the GPU from a node "
           "(without it nothing is submitted)", {"action": "store_true"}),
    Option("launcher", "--launcher", "sky: SkyPilot's clusters (default); local: sshd "
           "containers on this machine, a rehearsal of the fan-out (infra ssh/local, no "
           "accelerators)", {"choices": ("sky", "local")}),
    Option("check", "--check", "resolve again and compare with each lock as it is; write "
           "nothing, exit 1 on any difference (CI: a lock whose URLs or hashes were edited by "
           "hand reads as current otherwise, since its inputs hash vouches only for itself)",
           {"action": "store_true"}),
    Option("remove", "--remove", "remove this part: images (the stacks' images and builder "
           "stages), bases (the kit's debootstrap base images), cache (wheels, CIFAR-10, "
           "./noxw's tools), reports (results, logs, pages), or all (repeatable; without it, "
           "each part is listed with its size)",
           {"action": "append", "choices": ("images", "bases", "cache", "reports", "all")}),
)

SELECTION = ("matrix_path", "envs", "targets", "kind")


@dataclass(frozen=True)
class Command:
    """A verb: what it does, the options it takes, and where an option means something more
    specific for it (its help) or starts elsewhere (its default)."""

    help: str
    options: tuple[str, ...]
    helps: Mapping[str, str] = field(default_factory=dict)
    defaults: Mapping[str, Any] = field(default_factory=dict)


COMMANDS: dict[str, Command] = {
    "lock": Command("resolve each selected pip environment into locks/<env>.pylock.toml",
                    (*SELECTION, "locks", "check")),
    "build": Command("build the images the selected cells need",
                     (*SELECTION, "reports_dir", "offline", "locks", "frozen")),
    "bench": Command("build, then run every selected cell",
                     (*SELECTION, "quick", "profile", "reports_dir", "offline", "locks",
                      "frozen", "synthetic", "data_dir", "order", "order_seed")),
    "check": Command("validate a matrix, list its cells, and run every check that needs no "
                     "build", (*SELECTION, "quick", "offline", "locks", "frozen", "synthetic",
                               "data_dir"),
                     helps={"offline": "base images must already be in the engine",
                            "synthetic": "the cells will run on synthetic data (no data set "
                                         "needed)"}),
    "data": Command("download CIFAR-10 once into the cache (md5-checked)", ("cache_dir", "url")),
    "base-image": Command("build the local Debian base image (debootstrap)", ()),
    "doctor": Command("what this host can run of the selected cells: engine, GPUs, driver, "
                      "disk, data, registry and indexes; each Slurm target's preflight and "
                      "SkyPilot's credential check for cloud targets (exit 1 when a check the "
                      "cells need fails)", (*SELECTION, "synthetic", "data_dir", "locks",
                                            "probe"),
                      helps={"synthetic": "the cells will run on synthetic data (no data set "
                                          "needed)"}),
    "demo": Command("two real stacks on this machine's CPU, then the report", ("reports_dir",),
                    helps={"reports_dir": "where the demo's matrix, results and report go"},
                    defaults={"reports_dir": Path("reports") / "demo"}),
    # `./noxw -s bench-cpu report -- OPTIONS` hands both sessions the same options: without
    # result folders the report takes the cells the run took (matrix, --env, --target,
    # --kind, --quick, --synthetic, the data set's digest) from REPORTS/results.
    "report": Command("render reports/index.html, summary.md, results.csv",
                      ("results", "out", *SELECTION, "quick", "profile", "reports_dir",
                       "synthetic",
                       "data_dir", "locks", "baseline", "baseline_env", "target_accuracy",
                       "keep_contended"),
                      helps={"out": "where to write (default: REPORTS)",
                             "synthetic": "report the cells run with --synthetic"}),
    "compare": Command("the same cells in two runs: flag only the changes that clear the "
                       "noise", ("old", "new", "threshold", "fail_on_regression", "out",
                                 "keep_contended"),
                       helps={"out": "where compare.html and compare.md go"},
                       defaults={"out": Path("reports") / "compare"}),
    "clean": Command("what the kit keeps on this machine (images, bases, cache, reports, "
                     ".nox), its size and the command that removes it; --remove PART removes "
                     "it", ("remove", "reports_dir")),
    "slurm": Command("Slurm targets: one batch job per target, its cells as steps in the "
                     "target's container runtime (--print: the script and the conversion "
                     "commands; nothing is submitted)",
                     (*SELECTION, "quick", "profile", "reports_dir", "offline", "locks",
                      "frozen", "synthetic", "data_dir", "order_seed", "print_only"),
                     helps={"targets": "only this Slurm target (repeatable; default: every "
                                       "target with a slurm: block)",
                            "order_seed": "the seed that shuffles each round of the job's "
                                          "steps (default: a new one)"}),
    "cloud": Command("cloud targets: one SkyPilot VM per target (--dry-run: the plan, prices "
                     "and task YAMLs)",
                     ("matrix_path", "targets", "reports_dir", "synthetic", "data_dir",
                      "dry_run", "out", "launcher"),
                     helps={"targets": "only this cloud target (repeatable)",
                            "synthetic": "the cells run on synthetic data (no data set is "
                                         "uploaded)",
                            "out": "write each target's SkyPilot task YAML here"}),
}

_DEFAULTS = {f.name: f.default for f in fields(Options)}


def parser(description: str | None = None) -> argparse.ArgumentParser:
    """The command line, built from OPTIONS and COMMANDS."""
    p = argparse.ArgumentParser(prog="envbench", description=description)
    sub = p.add_subparsers(dest="command", required=True)
    for name, command in COMMANDS.items():
        verb = sub.add_parser(name, help=command.help)
        for option_name in command.options:
            option = OPTIONS[option_name]
            keywords = dict(option.argparse)
            if keywords.get("action") != "append" and keywords.get("nargs") != "*":
                keywords["default"] = command.defaults.get(option_name, _DEFAULTS[option_name])
            elif keywords.get("action") == "append":
                keywords["default"] = []
            help_text = command.helps.get(option_name, option.help)
            if option.flag is None:
                verb.add_argument(option_name, help=help_text, **keywords)
            else:
                verb.add_argument(option.flag, dest=option_name, help=help_text, **keywords)
    p.set_defaults(commands=sub.choices)
    return p


def from_namespace(args: argparse.Namespace) -> Options:
    """The parsed values as Options; what a command does not take keeps its default."""
    given = {f.name: getattr(args, f.name) for f in fields(Options) if hasattr(args, f.name)}
    for name in ("envs", "targets", "results", "remove"):
        if name in given:
            given[name] = tuple(given[name])
    return Options(**given)


def _takes_value(option: Option) -> bool:
    return option.argparse.get("action") not in ("store_true", "store_false")


def split_foreign(command: str, argv: list[str]) -> tuple[list[str], list[str]]:
    """``argv`` without the kit's options that ``command`` does not take, and those options.

    `./noxw -s doctor bench-cuda report -- --quick` hands every session the same options: each
    verb leaves out (and says so) what belongs to another, with its value. An option no verb
    takes stays in, to be refused as ever.
    """
    taken = set(COMMANDS[command].options)
    foreign = {o.flag: o for name, o in OPTIONS.items()
               if o.flag is not None and name not in taken}
    kept: list[str] = []
    dropped: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        flag, has_value = token.split("=", 1)[0], "=" in token
        option = foreign.get(flag) if token.startswith("--") else None
        if option is None:
            kept.append(token)
        elif _takes_value(option) and not has_value and i + 1 < len(argv):
            dropped.extend(argv[i:i + 2])
            i += 1
        else:
            dropped.append(token)
        i += 1
        if token == "--":
            kept.extend(argv[i:])
            break
    return kept, dropped


def verbs_taking(flag: str) -> list[str]:
    """The verbs that take ``flag`` (for the line that says it was left out)."""
    names = [name for name, o in OPTIONS.items() if o.flag == flag]
    return [verb for verb, c in COMMANDS.items() if any(n in c.options for n in names)]
