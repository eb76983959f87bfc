"""The SkyPilot task of one cloud target, as task-YAML: what SkyPilot syncs, sets up and runs.

The VM receives the repository as its workdir (matrix and locks included) and the data set as
a file mount, and runs the same kit there: ``nox -s bench -- --target T``. Its results come
back over the cluster's ssh alias; as a fallback the run script also prints each result file
base64-encoded after a marker, so the job's log alone can restore them.
"""
from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any

from envbench.matrix import grammars
from envbench.matrix.models import Target

RESULT_MARKER = "ENVBENCH-RESULT"
REMOTE_DATA = "~/envbench-data"
CLUSTER_PREFIX = "envbench-"


def cluster_name(target: str) -> str:
    """SkyPilot cluster names: lower case, digits and '-', starting with a letter."""
    safe = "".join(c if c.isalnum() else "-" for c in target.lower()).strip("-")
    return (CLUSTER_PREFIX + safe)[:60]


# Whether this user reaches the engine (standard library only: nothing is installed yet).
ENGINE_CHECK = "python3 -m envbench.provision check"


def run_script(target: str, matrix: str, data: bool, synthetic: bool) -> str:
    bench = ["./noxw", "-s", "bench", "--", "--matrix", matrix, "--target", target,
             "--reports", "reports"]
    if data:
        bench += ["--data", REMOTE_DATA]
    if synthetic:
        bench.append("--synthetic")
    quoted = " ".join(shlex.quote(part) if not part.startswith("~/") else part for part in bench)
    return "\n".join([
        "set -u",
        # A user that set-up added to the docker group has it only in a new login: `sg`
        # gives this shell's command the group without one.
        "BENCH=%s" % shlex.quote(quoted),
        'if %s --quiet; then sh -c "$BENCH"; else sg docker -c "$BENCH"; fi' % ENGINE_CHECK,
        "status=$?",
        'echo "envbench: bench exited with code $status"',
        # The fallback path home: every result, printed whole, after a marker.
        'for f in reports/results/*.json; do [ -e "$f" ] || continue; '
        'printf \'%s %s \' "%s" "$(basename "$f")"; base64 -w0 "$f"; echo; done'
        % ("%s", "%s", RESULT_MARKER),
        "exit $status",
    ])


SETUP = "\n".join([
    "set -e",
    # The engine first, before anything is fetched. On images whose login user is outside
    # the docker group (Lambda's, Azure's HPC images, a fresh Docker on Ubuntu) set-up adds
    # it, where sudo needs no password; then checks again in a shell with that group. An
    # engine this user still cannot reach ends set-up here, with the reason and the fix.
    "if ! %s --quiet; then" % ENGINE_CHECK,
    '  if [ "$(id -u)" != 0 ] && sudo -n true 2>/dev/null && getent group docker >/dev/null;'
    " then",
    '    sudo -n usermod -aG docker "$(id -un)"',
    '    echo "envbench set-up: added $(id -un) to the docker group"',
    "  fi",
    "  sg docker -c '%s' || { echo 'envbench set-up: the Docker engine is out of reach "
    "(above: why, and the fix)'; exit 1; }" % ENGINE_CHECK,
    "fi",
    # nox through ./noxw: stock VM images have python3 but often no pip or venv.
    "./noxw --version",
])


def matrix_variables(matrix: Path) -> dict[str, str]:
    """The ${VARIABLES} the matrix names that are set here: the VM's matrix needs them too."""
    names = grammars.VARIABLE.findall(matrix.read_text(encoding="utf-8", errors="replace"))
    return {name: os.environ[name] for name, _ in names if name in os.environ}


def task_config(name: str, target: Target, workdir: Path, matrix: Path,
                data: Path | None = None, synthetic: bool = False) -> dict[str, Any]:
    """The task-YAML of ``name``'s cluster (``target.cloud`` must be set)."""
    cloud = target.cloud
    assert cloud is not None, name
    try:
        matrix_rel = matrix.resolve().relative_to(workdir.resolve()).as_posix()
    except ValueError:
        matrix_rel = "envbench-matrix.yaml"  # outside the workdir: mounted beside it below
    resources: dict[str, Any] = {
        "use_spot": cloud.use_spot, "disk_size": cloud.disk_size,
        # The safety net if the kit dies before its `finally`: the VM stops and is deleted.
        "autostop": {"idle_minutes": cloud.autostop_minutes, "down": True},
    }
    if cloud.accelerators:
        resources["accelerators"] = cloud.accelerators
    if cloud.infra:
        resources["infra"] = cloud.infra
    if cloud.instance_type:
        resources["instance_type"] = cloud.instance_type
    config: dict[str, Any] = {
        "name": cluster_name(name),
        "workdir": str(workdir.resolve()),
        "resources": resources,
        "envs": {**matrix_variables(matrix), "SKYPILOT_DISABLE_USAGE_COLLECTION": "1",
                 "ENVBENCH_TARGET": name},
        "setup": SETUP,
        "run": run_script(name, matrix_rel, data is not None, synthetic),
    }
    mounts = {}
    if data is not None:
        mounts[REMOTE_DATA] = str(data.resolve())
    if matrix_rel == "envbench-matrix.yaml":
        mounts["~/sky_workdir/envbench-matrix.yaml"] = str(matrix.resolve())
    if mounts:
        config["file_mounts"] = mounts
    return config
