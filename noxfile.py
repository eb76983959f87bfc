"""envbench's sessions: each is a thin call into the envbench package (logic lives there)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import nox

nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["tests"]

# Debian's interpreter with python3-torch 1.13 + python3-torchvision: the old stack on which
# bench's own tests run a second time (and the only place here where torchvision imports).
DEBIAN_PYTHON = "/usr/bin/python3"


def _install(session: nox.Session) -> None:
    session.install("-e", ".")


def _envbench(session: nox.Session, *args: str) -> None:
    _install(session)
    session.run("envbench", *args, *session.posargs)


# pyproject's extras with one cloud's SDK each; a target without infra may land on any.
CLOUD_EXTRAS = ("aws", "gcp", "azure", "lambda", "oci", "nebius")
ANY_CLOUD = ("aws", "gcp", "azure", "lambda")


def _clouds_named(args: list[str]) -> list[str]:
    """The clouds whose SDK `./noxw -s cloud` needs: those the matrix's targets name in infra
    (read as text: nothing is installed yet), all the common ones for a target without."""
    local = any(a == "--launcher=local" or (a == "--launcher" and args[i + 1:i + 2] == ["local"])
                for i, a in enumerate(args))
    if "--dry-run" in args or local:
        return []  # the dry run and the local launcher need SkyPilot's core only
    matrix = args[args.index("--matrix") + 1] if "--matrix" in args[:-1] else "matrix.yaml"
    try:
        text = open(matrix, encoding="utf-8").read()
    except OSError:
        return []  # the kit says what is wrong with the path
    named = re.findall(r"\binfra:\s*[\"']?([a-z0-9]+)", text)
    no_infra = re.search(r"cloud:\s*\{(?![^}]*\binfra:)", text) is not None
    return sorted(set(named) | (set(ANY_CLOUD) if no_infra else set()))


@nox.session(name="cloud")
def cloud(session: nox.Session) -> None:
    """Cloud targets through SkyPilot: one cluster each, results home, torn down, one report
    (-- --dry-run --out DIR: the plan, prices, task YAMLs; -- --launcher local: sshd VMs)."""
    clouds = _clouds_named(list(session.posargs))
    extras = ["cloud"] + ["cloud-%s" % c for c in clouds if c in CLOUD_EXTRAS]
    session.install("-e", ".[%s]" % ",".join(extras))
    others = ["skypilot[%s]==0.14.*" % c for c in clouds if c not in CLOUD_EXTRAS]
    if others:
        session.install(*others)
    session.env["SKYPILOT_DISABLE_USAGE_COLLECTION"] = "1"
    session.run("envbench", "cloud", *session.posargs)


@nox.session(name="compare")
def compare(session: nox.Session) -> None:
    """Two runs' results, cell by cell: flag only the changes that clear the noise."""
    _envbench(session, "compare")


@nox.session(name="doctor")
def doctor(session: nox.Session) -> None:
    """What this host can run: engine, NVIDIA runtime, GPUs, driver, disk, data, indexes;
    Slurm targets' preflight, and `sky check` for cloud targets."""
    # A matrix with cloud targets: SkyPilot and the clouds' SDKs, as `cloud` installs them,
    # so that its credential check is the one the run will make.
    clouds = _clouds_named(list(session.posargs))
    if clouds:
        session.install("-e", ".[%s]" % ",".join(
            ["cloud"] + ["cloud-%s" % c for c in clouds if c in CLOUD_EXTRAS]))
        session.env["SKYPILOT_DISABLE_USAGE_COLLECTION"] = "1"
    _envbench(session, "doctor")


@nox.session(name="demo")
def demo(session: nox.Session) -> None:
    """First run: Debian's torch vs a current torch CPU build on this CPU, then the report."""
    _envbench(session, "demo")


@nox.session(name="lock")
def lock(session: nox.Session) -> None:
    """Resolve each pip environment into locks/<env>.pylock.toml (uv, sha256 per wheel)."""
    _envbench(session, "lock")


@nox.session(name="build-cpu")
def build_cpu(session: nox.Session) -> None:
    """Build the images for every cell on a CPU target."""
    _envbench(session, "build", "--kind", "cpu")


@nox.session(name="build-cuda")
def build_cuda(session: nox.Session) -> None:
    """Build the images for every cell on a GPU target."""
    _envbench(session, "build", "--kind", "cuda")


@nox.session(name="bench-cpu")
def bench_cpu(session: nox.Session) -> None:
    """Run every cell on a CPU target (builds what is missing; resumes)."""
    _envbench(session, "bench", "--kind", "cpu")


@nox.session(name="bench-cuda")
def bench_cuda(session: nox.Session) -> None:
    """Run every cell on a GPU target with the GPUs attached (builds, resumes)."""
    _envbench(session, "bench", "--kind", "cuda")


@nox.session(name="bench")
def bench_all(session: nox.Session) -> None:
    """Run every cell of the matrix, CPU and GPU targets alike."""
    _envbench(session, "bench")


@nox.session(name="slurm")
def slurm(session: nox.Session) -> None:
    """Slurm targets: preflight, one batch job per target (cells as steps in Podman,
    Apptainer or Pyxis), followed until the results are in (-- --print: the script only)."""
    _envbench(session, "slurm")


@nox.session(name="check")
def check(session: nox.Session) -> None:
    """Validate the matrix and list its cells; nothing is built or run."""
    _envbench(session, "check")


@nox.session(name="data")
def data(session: nox.Session) -> None:
    """Download CIFAR-10 once into the cache, md5-checked."""
    _envbench(session, "data")


@nox.session(name="base-image")
def base_image(session: nox.Session) -> None:
    """Build the local Debian base image with debootstrap (for hosts without a registry)."""
    _envbench(session, "base-image")


@nox.session(name="clean")
def clean(session: nox.Session) -> None:
    """What the kit keeps here (images, bases, cache, reports, .nox) and its size; -- --remove
    PART removes it."""
    _envbench(session, "clean")


@nox.session(name="report")
def report(session: nox.Session) -> None:
    """Render reports/index.html, summary.md and results.csv from result files."""
    _envbench(session, "report")


@nox.session(name="tests")
def tests(session: nox.Session) -> None:
    """Lint, the test suite (real Docker included), then bench's tests on Debian's torch 1.13."""
    # The cloud extra too: the cloud tests build SkyPilot's own Task objects (offline).
    session.install("-e", ".[test,cloud]")
    session.install("torch==2.13.0")
    # A fresh machine: the engine, debootstrap, Chromium and Debian's torch 1.13 stack
    # (envbench/provision.py, the one set-up module .ci/run and the demo use too).
    session.run("python", "-m", "envbench.provision", "tests")
    session.run("ruff", "check", ".")
    session.run("vermin", "-t=3.8-", "--violations", "--no-tips", "-q", "bench/",
                "bootstrap/noxw.py",
                # what a VM's set-up runs with its own python3 before anything is installed
                "envbench/provision.py", "envbench/engine/reach.py")
    session.run("lint-imports")  # the layering contract in pyproject.toml
    session.run("mypy")          # strict on the host package (pyproject.toml)
    if session.posargs:
        session.run("pytest", *session.posargs)
        return  # a selection of tests was asked for: run just that
    # What the e2e tests share (base images, wheelhouse, the CUDA stack's NVIDIA wheels) is
    # fetched and built beside the host's tests: on a fresh machine that is minutes of
    # downloads, which the CPU-bound tests do not wait on.
    made = _beside(session, ["python", "tests/e2e/e2e_support.py"], "e2e-prepare")
    # The host's and bench's own tests share nothing but the disk: they run on every core
    # (pytest-xdist), except those marked `alone`, which time work on this machine: those
    # then run one at a time, with nothing beside them. Then the e2e tests (_e2e).
    # worksteal: a worker that runs out takes tests queued for the other (the slowest tests
    # queued last left one core idle for minutes); Debian's xdist 3.1 predates it.
    session.run("pytest", *_workers(), "--dist", "worksteal", "-m", "not alone",
                "tests/host", "tests/bench")
    # Nothing may run beside the tests marked alone: what was started beside ends first.
    _joined(made, "the e2e tests' base images, wheelhouse and CUDA wheels")
    session.run("pytest", "-m", "alone", "tests/host", "tests/bench",
                success_codes=[0, NO_TESTS_COLLECTED])
    _e2e(session)
    probe = [DEBIAN_PYTHON, "-c", "import torch, torchvision, pytest, jsonschema, xdist"]
    if shutil.which(DEBIAN_PYTHON) and subprocess.run(probe, capture_output=True).returncode == 0:
        session.run(DEBIAN_PYTHON, "-m", "pytest", "-p", "no:cacheprovider", *_workers(),
                    "-m", "not alone", "tests/bench", external=True,
                    env={"PYTHONDONTWRITEBYTECODE": "1"})
        session.run(DEBIAN_PYTHON, "-m", "pytest", "-p", "no:cacheprovider", "-m", "alone",
                    "tests/bench", external=True, env={"PYTHONDONTWRITEBYTECODE": "1"},
                    success_codes=[0, NO_TESTS_COLLECTED])
    elif os.environ.get("CI"):
        session.error("%s lacks torch, torchvision, pytest, jsonschema or xdist (Debian's "
                      "python3-torch, python3-torchvision, python3-pytest, python3-jsonschema, "
                      "python3-pytest-xdist): .ci/run installs them" % DEBIAN_PYTHON)
    else:
        session.warn("bench's tests on the old stack (torch 1.13) and the classic pipeline were "
                     "not run: apt-get install python3-torch python3-torchvision python3-pytest "
                     "python3-jsonschema python3-pytest-xdist")


# The Slurm tests spend most of their time waiting on the scheduler (a job's start, its
# time-limit checks, KillWait): they run beside the engine's e2e tests, in a pytest of their
# own. The engine-outage test stops the engine both use: it runs after them, by itself.
SLURM_E2E = "tests/e2e/test_slurm.py"
OUTAGE_E2E = "tests/e2e/test_engine_outage.py"


def _e2e(session: nox.Session) -> None:
    """The e2e tests: the engine's one at a time, the Slurm cluster's beside them."""
    slurm = _beside(session, ["pytest", "-p", "no:cacheprovider", "-m", "e2e", SLURM_E2E],
                    "slurm-e2e")
    try:
        session.run("pytest", "-m", "e2e", "tests/e2e", "--ignore", SLURM_E2E,
                    "--ignore", OUTAGE_E2E)
    finally:
        code = _joined(slurm, SLURM_E2E)
    if code != 0:
        session.error("%s failed (pytest's exit code %d): its output is above"
                      % (SLURM_E2E, code))
    session.run("pytest", "-m", "e2e", OUTAGE_E2E)


def _beside(session: nox.Session, command: list[str], name: str
            ) -> tuple[subprocess.Popen[bytes], Path]:
    """``command`` (a program of the session's virtualenv) started in the background, its
    output kept in a file until _joined prints it."""
    log = Path(tempfile.mkdtemp(prefix="envbench-%s-" % name)) / "output.log"
    env = dict(os.environ, PATH=session.bin + os.pathsep + os.environ.get("PATH", ""))
    with log.open("w") as out:
        process = subprocess.Popen([os.path.join(session.bin, command[0]), *command[1:]],
                                   stdout=out, stderr=subprocess.STDOUT, env=env)
    return process, log


def _joined(started: tuple[subprocess.Popen[bytes], Path], what: str) -> int:
    """Wait for a process _beside started; print its output; its exit code."""
    process, log = started
    code = process.wait()
    print("\n--- %s (run beside the above; exit code %d):\n%s"
          % (what, code, log.read_text(errors="replace")), flush=True)
    shutil.rmtree(log.parent, ignore_errors=True)
    return code


# pytest's exit code when a selection matched nothing (a marker no test carries yet).
NO_TESTS_COLLECTED = 5


def _workers() -> list[str]:
    """pytest-xdist's workers: one per core, at most 4 (each imports torch; more gave nothing
    on the suites' size and costs memory on a big VM)."""
    return ["-n", str(min(4, os.cpu_count() or 1))]


@nox.session(name="docs")
def docs(session: nox.Session) -> None:
    """Regenerate the reference pages and the example report, then build the docs (--strict)."""
    session.install("-e", ".[docs]")
    session.env["NO_MKDOCS_2_WARNING"] = "1"
    # The screenshot needs Chromium, which `./noxw -s tests` installs (envbench/provision.py).
    screenshot = ["--screenshot"] if shutil.which("chromium") else []
    if not screenshot:
        session.warn("chromium is missing: docs/assets/report.png is left as it is")
    session.run("python", "tools/docs_gen.py", *screenshot)
    session.run("mkdocs", "build", "--strict", "--site-dir", "site", *session.posargs)


@nox.session(name="mutants")
def mutants(session: nox.Session) -> None:
    """Mutation testing of the figure-making modules (slow: not in CI); the score per module.

    `./noxw -s mutants -- "envbench.inference.stats*"` runs only the mutants whose names match."""
    # Not editable: the mutated copy in mutants/ must be what the tests import.
    session.install(".[test,cloud]")
    session.install("torch==2.13.0", "mutmut==3.8.1")
    session.run("mutmut", "run", "--max-children", str(os.cpu_count() or 1), *session.posargs)
    session.run("python", "tools/mutation_score.py")


@nox.session(name="overhead")
def overhead(session: nox.Session) -> None:
    """Benchmark: plain tutorial loop vs bench classic vs resident, same data and torch."""
    # Any interpreter with torch + torchvision will do; ENVBENCH_BENCH_PYTHON picks another.
    python = os.environ.get("ENVBENCH_BENCH_PYTHON", DEBIAN_PYTHON)
    session.run(python, "perf/pipeline_overhead.py", *session.posargs, external=True)
