"""`nox -s doctor`: what this host can run, said before an hour of builds.

One line per check, ✔ or ✘, and for each ✘ the fix: the engine and who may reach it, the
NVIDIA runtime, the GPUs and driver (read by a probe container running nvidia-smi), each
CUDA stack's minimum driver against the host's, free disk for the images still to build,
the data set, and whether a registry and the wheel indexes answer. `bench` runs the same
GPU checks first and records the cells this host cannot run, with the sentence, before
any build.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from envbench import cache, download, enginereach
from envbench.cells import dataset, estimate, gpufit
from envbench.engine import connection, gpu
from envbench.errors import UserError
from envbench.images import archs, footprint
from envbench.matrix import grammars, models, sources
from envbench.matrix.models import Matrix
from envbench.options import Options


@dataclass
class Check:
    ok: bool
    what: str
    fix: str | None = None

    def line(self) -> str:
        return "%s %s%s" % ("✔" if self.ok else "✘", self.what,
                            "\n    fix: %s" % self.fix if self.fix and not self.ok else "")


def _default_index_answers() -> str | None:
    """pip's configured index (this host's configuration decides which one)."""
    try:
        proc = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "pip"],
                              capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return "no answer within 60 s"
    return None if proc.returncode == 0 else " ".join((proc.stderr or "").split())[-160:]


def diagnose(m: Matrix, data_dir: Path | None = None,
             locks_dir: Path | None = None, matrix_dir: Path | None = None) -> list[Check]:
    locks_dir = locks_dir or Path("locks")
    tags = estimate.tags_to_run(m, list(m.environments), matrix_dir or Path("."), locks_dir)
    out: list[Check] = []
    try:
        client = connection.connect()
    except UserError:
        reach = enginereach.diagnose()
        return [Check(False, "Docker engine: %s" % reach.sentence, reach.fix or (
            "" if reach.kind == "container" else "on Debian/Ubuntu: `nox -s demo` installs "
            "and starts one (as root or with passwordless sudo); elsewhere: install Docker "
            "and start it"))]
    version = client.version().get("Version", "?")
    who = "as root" if os.geteuid() == 0 else "as this user, without sudo"
    out.append(Check(True, "Docker engine %s answers %s" % (version, who)))

    out.extend(_gpu_checks(client, m, tags))
    out.append(_disk(client, m, locks_dir, tags))
    root = data_dir or dataset.default_cache()
    ready = dataset.is_ready(root)
    out.append(Check(ready, "CIFAR-10 in %s" % root if ready else
                     "CIFAR-10 is not in %s (bench fetches it, 170 MB)" % root,
                     "nox -s data, or offline: put cifar-10-python.tar.gz at %s" % root))
    try:
        client.api.inspect_distribution("debian:bookworm-slim")  # type: ignore[no-untyped-call]
        out.append(Check(True, "a container registry answers the engine"))
    except connection.ENGINE_ERRORS as exc:
        out.append(Check(False, "no container registry answers the engine (%s)"
                         % connection.explain(exc)[:100],
                         "base images come from `nox -s base-image` (debootstrap); `nox -s "
                         "demo` does this by itself"))
    for url in sorted({u for u in (_index(name, env) for name, env in m.environments.items())
                       if u}):
        problem = download.answers(url.rstrip("/") + "/torch/")
        out.append(Check(problem is None, "wheel index %s %s" % (
            grammars.masked(url), "answers" if problem is None else "does not answer (%s)"
            % grammars.masked(problem)),
            "set PYTORCH_INDEX_URL to a mirror, or give the stack a wheelhouse:"))
    problem = _default_index_answers()
    out.append(Check(problem is None, "the default package index (pip's) %s" % (
        "answers" if problem is None else "does not answer: %s" % problem),
        "check pip's configuration (`pip config list`) and the network"))
    return out


def _gpu_checks(client: Any, m: Matrix, tags: dict[str, str | None]) -> list[Check]:
    """The runtime (a real --gpus probe), the GPUs (this host's nvidia-smi first), and per
    CUDA stack the verdict `bench` acts on: kernels for this GPU, the driver it needs."""
    found = gpu.state(client, None)
    out = []
    if found.runtime:
        out.append(Check(True, "NVIDIA runtime: a container gets the GPUs (--gpus probe)"))
    elif found.runtime is None:
        out.append(Check(False, "NVIDIA runtime: %s" % found.problem, "run `nox -s doctor` "
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
    first = found.gpus[0] if found.gpus else None
    for name, env in m.environments.items():
        if not env.cuda:
            continue
        compiled = gpufit.stack_archs(client, env, tags.get(name))
        misfit = archs.misfit(name, env.torch, env.cuda, compiled, first.name,
                              first.capability) \
            if first is not None and first.capability is not None and compiled else None
        issue = gpu.driver_problem(name, env.cuda, found.driver)
        if misfit:
            out.append(Check(False, misfit, "run this stack on a GPU it was built for, or "
                                            "choose a stack built for this one"))
        elif found.driver is None:
            out.append(Check(False, "%s: CUDA %s needs driver >= %s; this host's driver is "
                             "unknown" % (name, env.cuda, gpu.min_driver(env.cuda) or "?"),
                             "install the NVIDIA driver and runtime"))
        elif issue:
            out.append(Check(False, issue, "upgrade the NVIDIA driver"))
        else:
            out.append(Check(True, gpufit.fit_line(name, env, found, compiled)))
    return out


def _index(name: str, env: Any) -> str | None:
    try:
        return sources.index_url(name, env)
    except UserError:
        return None


def _disk(client: Any, m: Matrix, locks_dir: Path, tags: dict[str, str | None]) -> Check:
    """Free space where the engine keeps images and where the wheel cache is, against what
    the images still to build need (sized from their locks: see envbench.images.footprint)."""
    try:
        root = Path(client.info().get("DockerRootDir") or "/var/lib/docker")
        shutil.disk_usage(root)
    except (OSError, *connection.ENGINE_ERRORS):
        return Check(False, "free disk for images: unknown (the engine's data is not on this "
                     "machine)", "check `docker system df` on the engine's host")
    needs = [footprint.of(name, m.environments[name], locks_dir)
             for name in estimate.unbuilt(client, tags)]
    found = footprint.room(root, cache.root(), needs)
    return Check(found.ok, "free disk for %d image(s) to build: %s; they need %s" % (
        len(needs), found.free, footprint.describe(needs)), footprint.FREE_SPACE)


def run(opts: Options, out: TextIO = sys.stdout) -> int:
    results = diagnose(models.load(opts.matrix_path), opts.data_dir, opts.locks_dir,
                       opts.matrix_dir)
    for check in results:
        print(check.line(), file=out)
    bad = sum(not c.ok for c in results)
    print("%d check(s), %d to fix" % (len(results), bad), file=out)
    # 1 when anything is to fix, so a script can gate on it (nox still runs the sessions
    # named after it, as it does after any failed session).
    return 1 if bad else 0
