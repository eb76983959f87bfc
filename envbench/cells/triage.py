"""What to do with a cell before anything launches it, whatever will (this engine or a Slurm
step): record it failed (its stack cannot run on the target's GPU, or its image did not
build), take the current result an earlier run left, or run it. Written once, so the
executors cannot drift apart on it.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.rules import FailureKind
from envbench.cells import expansion as cellmod
from envbench.cells import records
from envbench.cells.gpufit import GpuBlock
from envbench.engine.host import Host
from envbench.images.build import BuildFailure, BuiltImage
from envbench.matrix import models
from envbench.results import outcome, store
from envbench.results.identity import DataIdentity


@dataclass(frozen=True)
class Triage:
    """One cell, decided: ``refused`` recorded failed (``line`` says why, for the progress
    line), or ``stored`` a current result, or neither: it runs, as ``prepared``, into
    ``path``."""

    prepared: cellmod.Prepared
    path: Path | None = None
    built: BuiltImage | None = None
    stored: dict[str, Any] | None = None
    refused: dict[str, Any] | None = None
    line: str = ""

    @property
    def runs(self) -> bool:
        return self.refused is None and self.stored is None


@dataclass(frozen=True)
class Stacks:
    """Every stack as the run found it: built, failed to build, or blocked on the GPU."""

    built: dict[str, BuiltImage]
    failed: dict[str, BuildFailure]
    gpu_blocked: dict[str, GpuBlock]


def triage(cell: cellmod.Cell, matrix: models.Matrix, stacks: Stacks, host: Host,
           data: DataIdentity, results_dir: Path, order: dict[str, Any] | None,
           record: bool = True) -> Triage:
    """The cell decided; a refused cell's failure is saved (unless ``record`` is False: a
    dry run writes nothing)."""
    target = matrix.targets[cell.target]
    accuracy = matrix.benchmark.target_accuracy
    env = cell.environment
    if target.device == "cuda" and env in stacks.gpu_blocked:
        block = stacks.gpu_blocked[env]
        p = cellmod.prepare(cell, target, host, data, None)
        failed = _failed(record, results_dir, p, target, block.kind, block.sentence, accuracy,
                         None, order)
        return Triage(p, refused=failed, line="%s: %s" % (outcome.of(failed), block.sentence))
    if env in stacks.failed:
        failure = stacks.failed[env]
        p = cellmod.prepare(cell, target, host, data, None)
        failed = _failed(record, results_dir, p, target, FailureKind.BUILD_FAILED, failure.message,
                         accuracy, {"tag": failure.tag, "id": None}, order)
        return Triage(p, refused=failed, line="failed: image build failed")
    built = stacks.built[env]
    p = cellmod.prepare(cell, target, host, data, built.image.id)
    path = store.path_for(results_dir, p.identity, cell.variant)
    stored = store.read(path)  # a regular file, capped, valid; else None
    if store.is_current(stored, p.identity):
        return Triage(p, path, built, stored=stored)
    return Triage(p, path, built)


def _failed(record: bool, results_dir: Path, p: cellmod.Prepared, target: models.Target,
            kind: str, message: str, accuracy: float | None, image: dict[str, Any] | None,
            order: dict[str, Any] | None) -> dict[str, Any]:
    if record:
        return records.failed(results_dir, p, target, kind, message, accuracy, image,
                              order=order)
    return store.host_failure(p.config, kind, message)
