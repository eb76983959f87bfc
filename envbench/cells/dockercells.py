"""This engine as an executor of the cell lifecycle (cells.lifecycle): a cell runs in a
container of its own (containerrun) and launch returns once it has ended and been taken in.
What only this engine has comes first: a result an earlier run finished but had no disk to
save is taken in instead of running the cell again, and GPU access is probed once per image.
"""
from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker

from bench.rules import FailureKind
from envbench.cells import containerrun, lifecycle, takein
from envbench.engine import gpu
from envbench.images.build import BuiltImage
from envbench.results import store

# The noise section of a result taken in from a kept folder: its sensors' readings were lost.
LOST_NOISE = {"contended": False, "reasons": [], "host": None, "gpu": None,
              "unavailable": "the host's sensor readings were lost when the disk filled as "
                             "this result was saved"}


@dataclass
class DockerCells:
    """Cells in containers of this engine, one at a time, their output shown as they run."""

    client: docker.DockerClient
    mounts: containerrun.Mounts
    on_line: Callable[[str], None] | None = None  # where a running cell's output goes
    gpu_problems: dict[str, str | None] = field(default_factory=dict)  # by environment
    gpu_modes: dict[str, str] = field(default_factory=dict)  # --gpus or CDI, by environment
    live: bool = True

    def launch(self, placed: takein.Placed, built: BuiltImage, take: lifecycle.Take) -> None:
        p = placed.p
        out_name = "%s.json" % p.file_stem
        kept = containerrun.kept_result(self.mounts.cells_dir, out_name)
        if kept is not None and self._take_kept(placed, kept, take):
            return
        problem = self._gpu_problem(p.cell.environment, p.resources.device,
                                    p.resources.gpus, built.image)
        if problem:
            take(placed, takein.Ending(None, [], (FailureKind.GPU_UNAVAILABLE, problem)))
            return
        containerrun.run_cell(self.client, p.command(), placed.target, p.resources,
                              built.image, self.mounts, out_name,
                              lambda ending: take(placed, ending), self.on_line,
                              p.cell.workload,
                              self.gpu_modes.get(p.cell.environment, gpu.GPUS))

    def start(self) -> None:
        """Nothing to begin: launch ran each cell to its end."""

    def poll(self, take: lifecycle.Take) -> bool:
        return False  # nothing runs between launches

    def _take_kept(self, placed: takein.Placed, kept: Path, take: lifecycle.Take) -> bool:
        """A result an earlier run finished but had no disk to save: taken in now, its
        sensors' readings marked lost, instead of running the cell again (False: not a valid
        result after all, so the cell runs). Its folder goes once the result is saved."""
        record = store.read(kept)
        if record is not None:
            if self.on_line is not None:
                self.on_line("taken from the run that filled the disk: %s" % kept)
            take(placed, takein.Ending(record, [], noise=dict(LOST_NOISE), folder=kept.parent))
        shutil.rmtree(kept.parent, ignore_errors=True)
        return record is not None

    def _gpu_problem(self, environment: str, device: str, gpus: Any, image: Any) -> str | None:
        """Probe GPU access once per image; None when the cell has no GPUs or they work."""
        if device != "cuda":
            return None
        if environment not in self.gpu_problems:
            mode, problem = gpu.attach(self.client, image, gpu.requested_count(gpus))
            self.gpu_problems[environment] = problem
            self.gpu_modes[environment] = mode
        return self.gpu_problems[environment]
