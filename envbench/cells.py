"""Cells: environments x compatible targets x sweep x repeats, each with its bench options."""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Any

from envbench.errors import UserError
from envbench.matrix import Matrix, Settings

# --quick: one short epoch per cell, to check a matrix end to end in minutes.
QUICK = {"epochs": 1, "repeats": 1, "limit": 5000, "limit_test": 1000}


@dataclass(frozen=True)
class Cell:
    environment: str
    target: str
    repeat: int
    variant: dict[str, Any]
    settings: dict[str, Any] = field(repr=False)

    @property
    def id(self) -> str:
        """File-name-safe and stable: the same cell always maps to the same result file."""
        parts = ["%s-%s" % (k.replace("_", ""), v) for k, v in sorted(self.variant.items())]
        slug = "_".join(parts) or "base"
        return _safe("%s__%s__%s__r%d" % (self.environment, self.target, slug, self.repeat))

    @property
    def label(self) -> str:
        variant = " ".join("%s=%s" % kv for kv in sorted(self.variant.items()))
        return "%s × %s%s (repeat %d)" % (self.environment, self.target,
                                          " × " + variant if variant else "", self.repeat + 1)


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "-", text)


def expand(matrix: Matrix, envs: list[str] | None = None, targets: list[str] | None = None,
           kind: str | None = None, quick: bool = False) -> list[Cell]:
    """Every cell to run, in a stable order; ``kind`` keeps cpu or cuda targets only."""
    for wanted, known, what in ((envs, matrix.environments, "environment"),
                                (targets, matrix.targets, "target")):
        unknown = sorted(set(wanted or ()) - set(known))
        if unknown:
            raise UserError("unknown %s %s (the matrix has: %s)"
                            % (what, ", ".join(unknown), ", ".join(known)))
    bench = matrix.benchmark
    base = Settings(**bench.model_dump(include=set(Settings.model_fields))).model_dump()
    repeats = bench.repeats
    if quick:
        repeats = QUICK["repeats"]
        base.update({k: v for k, v in QUICK.items() if k != "repeats"})
    keys = list(bench.sweep)
    cells = []
    for env_name in matrix.environments:
        if envs and env_name not in envs:
            continue
        for target_name in matrix.targets_for(env_name):
            target = matrix.targets[target_name]
            if (targets and target_name not in targets) or (kind and target.device != kind):
                continue
            for values in itertools.product(*(bench.sweep[k] for k in keys)):
                variant = dict(zip(keys, values))
                settings = dict(base, **variant)
                for repeat in range(repeats):
                    cells.append(Cell(env_name, target_name, repeat, variant, settings))
    return cells


def bench_args(cell: Cell, device: str, synthetic: bool) -> list[str]:
    """The `python -m bench` command line for a cell (data at /data, result in /results)."""
    s = cell.settings
    args = ["--device", device, "--epochs", s["epochs"], "--batch-size", s["batch_size"],
            "--pipeline", s["pipeline"], "--workers", s["workers"], "--amp", s["amp"],
            "--compile", s["compile"], "--accumulate", s["accumulate"], "--seed", s["seed"]]
    args += ["--synthetic"] if synthetic else ["--data", "/data"]
    for flag, key in (("--threads", "threads"), ("--limit", "limit"),
                      ("--limit-test", "limit_test")):
        if s[key] is not None:
            args += [flag, s[key]]
    for flag, key in (("--channels-last", "channels_last"), ("--deterministic", "deterministic")):
        if s[key]:
            args.append(flag)
    return [str(a) for a in args] + ["--out", "/results/%s.json" % cell.id]
