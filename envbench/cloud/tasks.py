"""The SkyPilot task of one cloud target, as task-YAML: what SkyPilot syncs, sets up and runs.

The VM receives the repository as its workdir (matrix and locks included) and the data set as
a file mount, and runs the same kit there: ``./noxw -s bench -- --matrix M --target T
--reports reports``. Its results (and profile traces) come back over the cluster's ssh alias;
as a fallback the run script also prints each result file base64-encoded after a marker, so
the job's log alone can restore them.
"""
from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any

from envbench.matrix import grammars
from envbench.matrix.models import Matrix, Target

RESULT_MARKER = "ENVBENCH-RESULT"
REMOTE_DATA = "~/envbench-data"
CLUSTER_PREFIX = "envbench-"


def target_part(target: str) -> str:
    """The target's part of its cluster names: lower case, digits and '-'. Two targets with
    the same part would share one cluster (plan refuses them)."""
    safe = "".join(c if c.isalnum() else "-" for c in target.lower()).strip("-")
    return safe[:60 - len(CLUSTER_PREFIX) - 12]  # machine tag, run id, two dashes


def cluster_name(target: str, run_prefix: str = CLUSTER_PREFIX) -> str:
    """SkyPilot cluster names: lower case, digits and '-', starting with a letter, 60 at
    most. ``run_prefix`` carries the machine and the run (envbench.cloud.runid)."""
    return (run_prefix + target_part(target))[:60]


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


# Never shipped, whatever the matrix names: the VM has its own, and these would break it
# (HOME, PATH) or tell it about this machine.
NEVER_SHIPPED = frozenset({
    "HOME", "PATH", "USER", "LOGNAME", "SHELL", "PWD", "OLDPWD", "TMPDIR", "TERM", "LANG",
    "LC_ALL", "PYTHONPATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "SSH_AUTH_SOCK", "DOCKER_HOST",
})


def matrix_variables(m: Matrix) -> dict[str, str]:
    """The ${VARIABLES} that the matrix's environments use (base, index_url, wheelhouse,
    dockerfile) and that are set here: the VM's matrix needs the same values. A name that
    appears anywhere else in the file (a comment, a label) is not shipped."""
    names: set[str] = set()
    for env in m.environments.values():
        for value in (env.base, env.index_url, env.wheelhouse, env.dockerfile):
            if value:
                names.update(name for name, _ in grammars.VARIABLE.findall(value))
    return {name: os.environ[name] for name in sorted(names - NEVER_SHIPPED)
            if name in os.environ}


def redacted(config: dict[str, Any]) -> dict[str, Any]:
    """The task as it may be written to disk or shown: its secrets' values left out."""
    shown = dict(config)
    if shown.get("secrets"):
        shown["secrets"] = {name: None for name in shown["secrets"]}
    return shown


def task_config(name: str, target: Target, workdir: Path, matrix: Path,
                data: Path | None = None, synthetic: bool = False,
                variables: dict[str, str] | None = None,
                run_prefix: str = CLUSTER_PREFIX,
                index_url: str | None = None) -> dict[str, Any]:
    """The task-YAML of ``name``'s cluster (``target.cloud`` must be set). ``variables``
    (matrix_variables) travel as SkyPilot secrets: never written into a task file or a log,
    never on a command line. ``index_url``: the package index the VM's ./noxw fetches uv and
    nox from (the host's, provision.package_index), as a secret."""
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
        "name": cluster_name(name, run_prefix),
        "workdir": str(workdir.resolve()),
        "resources": resources,
        "envs": {"SKYPILOT_DISABLE_USAGE_COLLECTION": "1", "ENVBENCH_TARGET": name},
        "setup": SETUP,
        "run": run_script(name, matrix_rel, data is not None, synthetic),
    }
    secrets = dict(variables or {})
    if index_url:  # a secret always: a token may sit in the userinfo, the path or the query
        secrets["ENVBENCH_INDEX_URL"] = index_url
    if secrets:
        config["secrets"] = secrets
    mounts = {}
    if data is not None:
        mounts[REMOTE_DATA] = str(data.resolve())
    if matrix_rel == "envbench-matrix.yaml":
        mounts["~/sky_workdir/envbench-matrix.yaml"] = str(matrix.resolve())
    if mounts:
        config["file_mounts"] = mounts
    return config
