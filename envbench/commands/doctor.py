"""`./noxw -s doctor`: what this host can run of the cells asked for, said before an hour of
builds.

One line per check: ✔ it holds, ✘ it fails (with the fix), ℹ information: something this
host lacks that the asked cells do not need (GPU lines for CPU-only cells, CIFAR-10 for
synthetic data, a registry for stacks on the kit's own base, a GPU for a stack refused by
design). The checks follow the selection (--matrix, --env, --target, --kind, --synthetic):
the engine and who may reach it, the NVIDIA runtime, the GPUs and driver, each CUDA stack's
kernels and minimum driver against them, free disk for the images still to build, the data
set, the registry and the package indexes. `bench` runs the same GPU checks first and records
the cells this host cannot run, with the sentence, before any build. Exit 1 when a ✘ is
printed, else 0 (docs/running.md, "Exit codes").
"""
from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from envbench import cache, download, provision
from envbench.cells import dataset, estimate, gpufit, matrixrun
from envbench.cells.expansion import Cell
from envbench.cloud import sky
from envbench.command_options import Options
from envbench.engine import connection, gpu, reach
from envbench.images import archs, bases, dockerfile, footprint
from envbench.matrix import grammars, sources
from envbench.matrix.models import Matrix
from envbench.slurm import preflight
from envbench.user_errors import UserError

INDEX_FIX = ("set PYTORCH_INDEX_URL to a mirror of it, or give the stack a wheelhouse (a folder "
             "of its wheels, `wheelhouse:` in the matrix: docs/stacks.md)")


@dataclass(frozen=True)
class Check:
    """One line. ``needed`` False: the asked cells do not need it, so a miss is information
    (ℹ), never a failure."""

    ok: bool
    what: str
    fix: str | None = None
    needed: bool = True

    @property
    def failed(self) -> bool:
        return not self.ok and self.needed

    @property
    def mark(self) -> str:
        return "✔" if self.ok else ("✘" if self.needed else "ℹ")

    def line(self) -> str:
        return "%s %s%s" % (self.mark, self.what,
                            "\n    fix: %s" % self.fix if self.fix and self.failed else "")


@dataclass(frozen=True)
class Asked:
    """The cells the doctor judges the host against, and what they need."""

    matrix: Matrix
    cells: list[Cell]      # those whose images this engine builds
    synthetic: bool
    elsewhere: frozenset[str] = frozenset()  # targets whose cells run on a Slurm cluster

    @property
    def environments(self) -> list[str]:
        return list(dict.fromkeys(c.environment for c in self.cells))

    def on(self, device: str) -> list[Cell]:
        """The cells that run on this host's device of that kind."""
        return [c for c in self.cells if self.matrix.targets[c.target].device == device
                and c.target not in self.elsewhere]

    @property
    def reads_cifar(self) -> bool:
        if self.synthetic or self.matrix.benchmark.data == "synthetic":
            return False
        return any(c.workload.data == "cifar10" for c in self.cells)


def _default_index_answers() -> str | None:
    """The package index the host's pip uses (ENVBENCH_INDEX_URL, else pip's own
    configuration): None when it answers, else why not."""
    try:
        proc = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "pip"],
                              capture_output=True, text=True, timeout=60,
                              env=provision.index_environment())
    except subprocess.TimeoutExpired:
        return "no answer within 60 s"
    return None if proc.returncode == 0 else " ".join((proc.stderr or "").split())[-160:]


def diagnose(asked: Asked, data_dir: Path | None = None, locks_dir: Path | None = None,
             matrix_dir: Path | None = None) -> list[Check]:
    m = asked.matrix
    locks_dir = locks_dir or Path("locks")
    try:
        client = connection.connect()
    except UserError:
        found = reach.diagnose()
        return [Check(False, "Docker engine: %s" % found.sentence, found.fix or (
            "" if found.kind == "container" else "on Debian/Ubuntu: `./noxw -s demo` installs "
            "and starts one (as root or with passwordless sudo); elsewhere: install Docker "
            "and start it"))]
    version = client.version().get("Version", "?")
    who = "as root" if os.geteuid() == 0 else "as this user, without sudo"
    out = [Check(True, "Docker engine %s answers %s" % (version, who))]
    tags = estimate.tags_to_run(m, asked.environments, matrix_dir or Path("."), locks_dir,
                                client)
    gpu_checks, refused = _gpu_checks(client, asked, tags)
    out.extend(gpu_checks)
    runnable = [c for c in asked.cells if c.environment not in refused
                or m.targets[c.target].device != "cuda"]
    if not runnable:
        out.append(Check(False, "none of the %d asked cell(s) can run on this host"
                         % len(asked.cells), "run them on a host with the GPU they need, or "
                         "ask for the cells this host has (`--kind cpu`, `--env`)"))
    names = list(dict.fromkeys(c.environment for c in runnable))
    to_build = estimate.unbuilt(client, {n: tags[n] for n in names})
    out.append(_disk(client, m, locks_dir, to_build))
    out.append(_data(asked, data_dir))
    out.append(_registry(client, m, to_build))
    out.extend(_indexes(m, to_build))
    return out


def _gpu_checks(client: Any, asked: Asked, tags: dict[str, str | None]
                ) -> tuple[list[Check], set[str]]:
    """The runtime (a real --gpus probe), the GPUs (this host's nvidia-smi first), and per
    asked CUDA stack the verdict `bench` acts on; and the stacks whose GPU cells `bench`
    will refuse by design."""
    m = asked.matrix
    gpu_cells = asked.on("cuda")
    if not gpu_cells:
        on_slurm = any(m.targets[c.target].device == "cuda" for c in asked.cells)
        return [Check(False, "GPUs: not checked; %s" % (
            "the asked GPU cells run on Slurm targets (a node's GPU: --probe)" if on_slurm
            else "the asked cells all run on CPU targets"), needed=False)], set()
    stacks = list(dict.fromkeys(c.environment for c in gpu_cells))
    targets = ", ".join(sorted({c.target for c in gpu_cells}))
    found = gpu.state(client, None)
    if found.absent:
        others = len(asked.cells) - len(gpu_cells)
        return [Check(False, "GPUs: none on this host; the %d cell(s) on %s are refused by "
                      "design%s" % (len(gpu_cells), targets, " and the other %d run" % others
                                    if others else ""),
                      needed=False)], set(stacks)
    out = []
    if found.runtime:
        out.append(Check(True, "NVIDIA runtime: a container gets the GPUs (--gpus probe)"))
    elif found.runtime is None:
        out.append(Check(False, "NVIDIA runtime: %s" % found.problem, "run `./noxw -s doctor` "
                         "again once an image is built, or check `docker run --gpus all`"))
    elif found.problem in (None, gpu.NO_RUNTIME):
        out.append(Check(False, "NVIDIA runtime: this Docker engine has none (GPU targets "
                         "cannot run)", gpu.NVIDIA_FIX))
    else:
        out.append(Check(False, "NVIDIA runtime: a --gpus probe failed: %s" % found.problem,
                         "fix the driver or runtime as the message says"))
    if found.gpus:
        names = ", ".join("%s (%s%s)" % (g.name, g.memory, ", sm_%d%d" % g.capability
                                         if g.capability else "") for g in found.gpus)
        out.append(Check(True, "GPUs: %s; driver %s" % (names, found.driver)))
    else:
        out.append(Check(False, "GPUs and driver: not read (%s)" % (
            found.problem or "no nvidia-smi on this host"),
            gpu.NVIDIA_FIX if found.runtime is False else "check `nvidia-smi` on the host"))
    refused: set[str] = set()
    first = found.gpus[0] if found.gpus else None
    for name in stacks:
        env = m.environments[name]
        compiled = gpufit.stack_archs(client, env, tags.get(name))
        misfit = archs.misfit(name, env.torch, env.cuda, compiled, first.name,
                              first.capability) \
            if first is not None and first.capability is not None and compiled else None
        issue = gpu.driver_problem(name, env.cuda or "", found.driver)
        if misfit:
            # A stack built before this GPU existed: `bench` refuses its GPU cells, by design.
            refused.add(name)
            out.append(Check(False, "%s; its GPU cells are refused by design" % misfit,
                             needed=False))
        elif found.driver is None:
            out.append(Check(False, "%s: CUDA %s needs driver >= %s; this host's driver is "
                             "unknown" % (name, env.cuda, gpu.min_driver(env.cuda or "") or "?"),
                             "install the NVIDIA driver and runtime"))
        elif issue:
            out.append(Check(False, issue, "upgrade the NVIDIA driver"))
        else:
            out.append(Check(True, gpufit.fit_line(name, env, found, compiled)))
    return out, refused


def _data(asked: Asked, data_dir: Path | None) -> Check:
    if not asked.reads_cifar:
        return Check(False, "CIFAR-10: not needed (the asked cells run on synthetic data or "
                     "make their own)", needed=False)
    root = data_dir or dataset.default_cache()
    if dataset.is_ready(root):
        return Check(True, "CIFAR-10 in %s" % root)
    if data_dir is not None:
        return Check(False, "CIFAR-10 is not in %s (--data)" % root,
                     "give --data the folder holding %s/" % dataset.FOLDER)
    problem = download.answers(dataset.URL)
    fix = ("fetch it where it answers (`./noxw -s data`), or offline: put cifar-10-python.tar.gz "
           "in %s, or run on synthetic data (--synthetic)" % root)
    if problem is None:
        return Check(True, "CIFAR-10 is not in %s yet: bench fetches it once (170 MB, "
                     "md5-checked) from its mirror, which answers" % root)
    return Check(False, "CIFAR-10 is not in %s and its mirror does not answer (%s)"
                 % (root, problem), fix)


def _registry(client: Any, m: Matrix, to_build: list[str]) -> Check:
    """A registry is needed only for a base that neither the engine nor the kit has: a
    stack's own `base:`, or a default base whose Python no Debian release of the kit's has."""
    needing = [(name, bases.base_of(name, m.environments[name])) for name in to_build
               if bases.needs_registry(client, name, m.environments[name])]
    try:
        client.api.inspect_distribution("debian:bookworm-slim")
        return Check(True, "a container registry answers the engine")
    except connection.ENGINE_ERRORS as exc:
        why = connection.explain(exc)[:200]
    if not needing:
        return Check(False, "no container registry answers the engine (%s); not needed: the "
                     "asked stacks build on bases this engine has or on the kit's own Debian "
                     "base (debootstrap)" % why, needed=False)
    listed = "; ".join("%s needs %s" % pair for pair in needing)
    env = m.environments[needing[0][0]]
    if env.base:
        fix = "load the base into this engine (`docker load`) or name one it has"
    elif bases.kit_base(env) is not None:
        fix = ("run the first build as root or with passwordless sudo (debootstrap builds the "
               "kit's own base %s), or load %s into this engine (`docker load`)"
               % (bases.kit_base(env), dockerfile.default_base(env)))
    else:
        fix = bases.registry_sentence(env)
    return Check(False, "no container registry answers the engine (%s): %s" % (why, listed),
                 fix)


def _indexes(m: Matrix, to_build: list[str]) -> list[Check]:
    """The indexes the images still to build fetch their wheels from."""
    pip_stacks = [n for n in to_build if m.environments[n].source == "pip"]
    out = []
    for url in sorted({u for u in (_index(n, m.environments[n]) for n in pip_stacks) if u}):
        problem = download.answers(url.rstrip("/") + "/torch/")
        out.append(Check(problem is None, "wheel index %s %s" % (
            grammars.masked(url), "answers" if problem is None else "does not answer (%s)"
            % grammars.masked(problem)), INDEX_FIX))
    if not pip_stacks:
        return out
    problem = _default_index_answers()
    out.append(Check(problem is None, "the package index (%s) %s" % (
        "ENVBENCH_INDEX_URL" if os.environ.get("ENVBENCH_INDEX_URL") else "pip's",
        "answers" if problem is None else "does not answer: %s" % problem),
        "set ENVBENCH_INDEX_URL to your package index's simple URL, or check pip's "
        "configuration (`pip config list`) and the network"))
    return out


def _index(name: str, env: Any) -> str | None:
    try:
        return sources.index_url(name, env)
    except UserError:
        return None


def _disk(client: Any, m: Matrix, locks_dir: Path, to_build: list[str]) -> Check:
    """Free space where the engine keeps images and where the wheel cache is, against what
    the images still to build need (sized from their locks: see envbench.images.footprint)."""
    try:
        root = Path(client.info().get("DockerRootDir") or "/var/lib/docker")
        shutil.disk_usage(root)
    except (OSError, *connection.ENGINE_ERRORS):
        return Check(False, "free disk for images: unknown (the engine's data is not on this "
                     "machine)", "check `docker system df` on the engine's host")
    needs = [footprint.of(name, m.environments[name], locks_dir) for name in to_build]
    found = footprint.room(root, cache.root(), needs)
    if not needs:
        return Check(True, "disk: every asked image is built (%s)" % found.free)
    return Check(found.ok, "free disk for %d image(s) to build: %s; they need %s" % (
        len(needs), found.free, footprint.describe(needs)), footprint.FREE_SPACE)


def _slurm(m: Matrix, targets: list[str], probe: bool) -> list[Check]:
    """Each Slurm target's preflight, as `./noxw -s slurm` makes it before submitting:
    Slurm's commands, the partition, its GPUs, shared_dir; with --probe also the probe job."""
    out = []
    for name in targets:
        block = m.targets[name].slurm
        assert block is not None
        checks = preflight.run(name, block, io.StringIO(), probe=probe)
        # Each of the preflight's lines says what to change where it fails.
        out += [Check(ok, "slurm target %s: %s" % (name, text)) for ok, text in checks.lines]
        if checks.passed and not probe:
            out.append(Check(False, "slurm target %s: a node's view (shared_dir there, %s, "
                             "its GPU) not probed: --probe runs one short srun"
                             % (name, block.runtime), needed=False))
    return out


def _cloud(m: Matrix, targets: list[str]) -> list[Check]:
    """SkyPilot's credential check (`sky check`) against the clouds the targets name."""
    try:
        launcher = sky.SkyLauncher()
        enabled = launcher.check(io.StringIO())
    except UserError as exc:
        return [Check(False, "cloud targets %s: %s" % (", ".join(targets), exc),
                      "run `./noxw -s doctor` (it installs SkyPilot for a matrix with cloud "
                      "targets) or `./noxw -s cloud -- --dry-run`")]
    out = []
    for name in targets:
        block = m.targets[name].cloud
        assert block is not None
        wants = block.infra.split("/")[0] if block.infra else None
        ok = wants in enabled if wants else bool(enabled)
        out.append(Check(ok, "cloud target %s: %s %s enabled in SkyPilot (`sky check`: %s)" % (
            name, wants or "a cloud", "is" if ok else "is not", ", ".join(sorted(enabled))
            or "none enabled"), "install envbench[cloud-%s], set its credentials, then run "
            "`sky check`" % (wants or "aws")))
    return out


def run(opts: Options, out: TextIO = sys.stdout) -> int:
    selected = matrixrun.select_cells(opts)
    m, cells = selected.matrix, selected.every
    slurm_targets = list(dict.fromkeys(c.target for c in selected.slurm))
    cloud_targets = list(dict.fromkeys(c.target for c in selected.cloud))
    # The login node's engine builds the Slurm targets' images: it is judged for them too.
    asked = Asked(m, selected.here + selected.slurm, opts.synthetic,
                  frozenset(slurm_targets))
    chosen = [("%s %s" % (flag, ",".join(values))).strip() for flag, values in (
        ("--env", opts.envs), ("--target", opts.targets),
        ("--kind", (opts.kind,) if opts.kind else ()),
        ("--synthetic", ("",) if opts.synthetic else ())) if values]
    print("this host against %d cell(s) of %s%s" % (
        len(cells), opts.matrix_path, " (%s)" % ", ".join(chosen) if chosen else ""), file=out)
    results = diagnose(asked, opts.data_dir, opts.locks_dir, opts.matrix_dir) \
        if asked.cells else []
    results += _slurm(m, slurm_targets, opts.probe)
    if cloud_targets:
        results += _cloud(m, cloud_targets)
    for check in results:
        print(check.line(), file=out)
    bad = sum(c.failed for c in results)
    told = sum(not c.ok and not c.needed for c in results)
    print("%d check(s), %d to fix%s" % (len(results), bad,
                                        ", %d for information" % told if told else ""),
          file=out)
    # 1 when anything is to fix, so a script can gate on it (nox still runs the sessions
    # named after it unless run with -x / --stop-on-first-error).
    return 1 if bad else 0
