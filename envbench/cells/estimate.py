"""What a run will take, said before anything is fetched: time and disk.

Builds: each stack not yet in the engine (a CUDA pip stack fetches about 3 GB of wheels and
builds: 248 s cold here with a fast index; a CPU stack a tenth of that). Disk: what those
images need in the engine and the wheel cache (envbench.images.footprint, from their locks
where they exist). Cells: each cell's epochs at the speed earlier runs of the same
environment, target and workload measured in REPORTS/results; a cell with no earlier run is
counted apart, and the progress line gives its time once the first round has run.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from envbench.cells.expansion import Cell
from envbench.engine import connection
from envbench.images import bases, dockerfile, footprint
from envbench.images import lock as lockmod
from envbench.inference import stats
from envbench.matrix.models import Matrix
from envbench.results import store
from envbench.user_errors import UserError

BUILD_S = {"cuda": 6 * 60, "cpu": 2 * 60}
CELL_OVERHEAD_S = 5.0  # container start and stop, result handling (measured ~1 s here)


def earlier_epochs(reports: Path) -> dict[tuple[str, str, str], tuple[float, float]]:
    """(environment, target, workload) -> (median first epoch, median steady epoch) of
    earlier runs: a ResNet-50 epoch says nothing about a LeNet one."""
    seen: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
    folder = reports / "results"
    records, _ = store.load_all([folder]) if folder.is_dir() else ([], [])
    for r in records:
        first, steady = r.summary.first_epoch_s, r.summary.epoch_s_median
        if r.status == "ok" and first and steady and r.cell.environment and r.cell.target:
            seen.setdefault((r.cell.environment, r.cell.target, r.workload),
                            []).append((first, steady))
    return {key: (stats.median([v[0] for v in values]), stats.median([v[1] for v in values]))
            for key, values in seen.items()}


def cells_s(cells: Sequence[Cell], earlier: dict[tuple[str, str, str], tuple[float, float]]
            ) -> tuple[float, int]:
    """Seconds for the cells an earlier run measured, and how many it did not."""
    seconds, unknown = 0.0, 0
    for cell in cells:
        known = earlier.get((cell.environment, cell.target, cell.workload.name))
        if known is None:
            unknown += 1
            continue
        first, steady = known
        seconds += first + steady * (cell.settings["epochs"] - 1) + CELL_OVERHEAD_S
    return seconds, unknown


def _duration(seconds: float) -> str:
    minutes = round(seconds / 60)
    return "%d h %02d min" % divmod(minutes, 60) if minutes >= 60 else "%d min" % max(minutes, 1)


def describe(m: Matrix, cells: Sequence[Cell], to_build: Sequence[str], locks_dir: Path,
             reports: Path) -> str:
    """The run's estimate in one paragraph (``to_build``: stacks not in the engine yet)."""
    needs = [footprint.of(name, m.environments[name], locks_dir) for name in to_build]
    build_s = sum(BUILD_S[m.environments[name].kind] for name in to_build)
    run_s, unknown = cells_s(cells, earlier_epochs(reports))
    parts = ["estimate: %d cell(s)" % len(cells)]
    if to_build:
        parts.append("%d image(s) to build, about %s and %s" % (
            len(to_build), _duration(build_s), footprint.describe(needs)))
    else:
        parts.append("every image is built")
    if len(cells) > unknown:
        parts.append("%s for the %d cell(s) earlier runs measured" % (
            _duration(run_s), len(cells) - unknown))
    if unknown:
        parts.append("%d cell(s) never measured here: their time shows after the first "
                     "round" % unknown)
    return "; ".join(parts)


def disk_check(client: Any, m: Matrix, to_build: Sequence[str], locks_dir: Path,
               cache_dir: Path) -> tuple[str | None, str | None]:
    """(why the builds cannot fit, a warning that they may not) on the engine's disk and
    the cache's; (None, None) also when the engine's data is not on this machine (a remote
    engine's disk is not readable here)."""
    try:
        root = Path(client.info().get("DockerRootDir") or "/var/lib/docker")
        root.stat()
    except (OSError, *connection.ENGINE_ERRORS):
        return None, None
    needs = [footprint.of(name, m.environments[name], locks_dir) for name in to_build]
    return (footprint.refusal(root, cache_dir, needs),
            footprint.warning(root, cache_dir, needs))


def tags_to_run(m: Matrix, names: Sequence[str], matrix_dir: Path,
                locks_dir: Path, client: Any = None) -> dict[str, str | None]:
    """The image tag each environment will run, where it is known before anything is
    resolved or built: a Debian stack's, and a pip stack's with a current lock. None where
    the lock is missing, stale or unreadable (a new lock makes a new tag) or the plan fails
    (the build will say why). An image of the same name built from other pins or another
    bench/ is not the one that will run. ``client``: the engine, whose images tell which
    default base a stack builds on (envbench.images.bases.known)."""
    return {name: _tag(m, name, matrix_dir, locks_dir, bases.known(client, m.environments[name]))
            for name in names}


def tags_either_base(m: Matrix, names: Sequence[str], matrix_dir: Path,
                     locks_dir: Path) -> dict[str, tuple[str, ...]]:
    """The tags each environment's image may have, for a reader without the engine (the
    report): on the registry's default base, or on the kit's own where no registry answered
    when it was built. Empty where the tag is not known (see tags_to_run)."""
    found: dict[str, tuple[str, ...]] = {}
    for name in names:
        env = m.environments[name]
        kit = None if env.base else bases.kit_base(env)
        tags = [_tag(m, name, matrix_dir, locks_dir, default) for default in (None, kit)
                if default is None or kit is not None]
        found[name] = tuple(dict.fromkeys(t for t in tags if t is not None))
    return found


def _tag(m: Matrix, name: str, matrix_dir: Path, locks_dir: Path,
         default: str | None) -> str | None:
    env = m.environments[name]
    try:
        current = None
        if env.source == "pip":
            found = lockmod.status(name, env, matrix_dir, locks_dir)
            if found.state is not lockmod.LockState.CURRENT:
                return None
            current = found.lock
        return dockerfile.plan(name, env, matrix_dir, current, m.needs_compiler, default).tag
    except UserError:
        return None


def unbuilt(client: Any, tags: dict[str, str | None]) -> list[str]:
    """The environments whose image to run is not in the engine (or not known yet)."""
    present = {tag for img in client.images.list(filters={"label": "envbench.environment"})
               for tag in (img.tags or [])}
    return [name for name, tag in tags.items() if tag is None or tag not in present]
