"""From result files to the report's numbers: groups of repeats, speedups, effects, checks.

Everything here is plain data (no HTML); report.py renders it and the tests check it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import result
from envbench import stats

NOISY_CV = 0.05
# The value each swept optimisation is measured against ("what you get without it").
EFFECT_BASELINES: dict[str, Any] = {"amp": "off", "pipeline": "classic", "compile": "off",
                                    "channels_last": False, "accumulate": 1, "workers": 2}
FINGERPRINT_KEYS = ("torch", "torchvision", "cuda", "cudnn", "python", "driver", "device_name",
                    "compute_capability", "cpu_model", "cpu_count", "threads")


def variant_text(variant: dict[str, Any]) -> str:
    return " ".join("%s=%s" % kv for kv in sorted(variant.items())) or "—"


@dataclass
class Group:
    """The repeats of one cell: same environment, target and variant."""

    environment: str
    target: str
    variant: dict[str, Any]
    records: list[dict[str, Any]] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.environment, self.target, variant_text(self.variant))

    @property
    def ok(self) -> list[dict[str, Any]]:
        return [r for r in self.records if r["status"] == "ok" and r["epochs"]]

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [r for r in self.records if r["status"] != "ok"]

    def _cell(self, key: str) -> Any:
        return self.records[0]["cell"].get(key)

    @property
    def target_label(self) -> str:
        return self._cell("target_label") or self.target

    @property
    def price(self) -> float | None:
        return self._cell("price_per_hour")

    @property
    def device(self) -> str:
        return self.records[0]["config"].get("device") or "?"

    @property
    def repeat_epoch_s(self) -> list[float]:
        return [r["summary"]["epoch_s_median"] for r in self.ok]

    @property
    def steady_epochs(self) -> list[dict[str, Any]]:
        """Epochs after the warm-up one, pooled over repeats (the only one if that is all)."""
        return [e for r in self.ok for e in (r["epochs"][1:] or r["epochs"])]

    @property
    def epoch_s(self) -> float | None:
        return stats.median(self.repeat_epoch_s) if self.ok else None

    @property
    def epoch_walls(self) -> list[float]:
        return [e["wall_s"] for e in self.steady_epochs]

    @property
    def spread(self) -> tuple[float, float] | None:
        walls = self.epoch_walls
        return (min(walls), max(walls)) if walls else None

    @property
    def cv(self) -> float | None:
        """Over repeat medians when there are repeats, else over the epochs."""
        if not self.ok:
            return None
        values = self.repeat_epoch_s if len(self.ok) > 1 else self.epoch_walls
        return stats.cv(values)

    @property
    def noisy(self) -> bool:
        return self.cv is not None and self.cv > NOISY_CV

    @property
    def first_epoch_s(self) -> float | None:
        firsts = [r["epochs"][0]["wall_s"] for r in self.ok]
        return stats.median(firsts) if firsts else None

    @property
    def samples_per_s(self) -> float | None:
        rates = [r["summary"]["samples_per_s"] for r in self.ok]
        return stats.median(rates) if rates else None

    @property
    def final_acc(self) -> float | None:
        accs = [r["summary"]["final_test_acc"] for r in self.ok]
        return stats.median(accs) if accs else None

    @property
    def phases(self) -> dict[str, float]:
        """Median seconds per phase per steady epoch."""
        epochs = self.steady_epochs
        if not epochs:
            return {}
        return {p: stats.median([e["phases_s"].get(p) or 0.0 for e in epochs])
                for p in result.PHASES}

    def share(self, phase: str) -> float | None:
        epochs = self.steady_epochs
        if not epochs:
            return None
        return stats.median([(e["phases_s"].get(phase) or 0.0) / e["wall_s"] for e in epochs])

    def memory(self, key: str) -> int | None:
        values = [r["memory"].get(key) for r in self.ok if r["memory"].get(key) is not None]
        return max(values) if values else None

    @property
    def run_s(self) -> float | None:
        """Median over repeats of a whole run: every epoch and its evaluation."""
        runs = [sum(e["wall_s"] + (e.get("test_s") or 0.0) for e in r["epochs"]) for r in self.ok]
        return stats.median(runs) if runs else None

    @property
    def cost_per_epoch(self) -> float | None:
        if self.price is None or self.epoch_s is None:
            return None
        return self.price * self.epoch_s / 3600.0

    @property
    def cost_per_run(self) -> float | None:
        if self.price is None or self.run_s is None:
            return None
        return self.price * self.run_s / 3600.0

    def time_to_accuracy(self, goal: float | None) -> float | None:
        """Median training seconds until test accuracy first reaches ``goal``; None if never."""
        if goal is None:
            return None
        times = []
        for r in self.ok:
            elapsed = 0.0
            for e in r["epochs"]:
                elapsed += e["wall_s"]
                if e.get("test_acc") is not None and e["test_acc"] >= goal:
                    times.append(elapsed)
                    break
        return stats.median(times) if times else None

    def curve(self, key: str) -> list[float]:
        """Per-epoch median over repeats of train_loss or test_acc."""
        if not self.ok:
            return []
        length = min(len(r["epochs"]) for r in self.ok)
        return [stats.median([r["epochs"][i][key] for r in self.ok if r["epochs"][i].get(key)
                              is not None] or [float("nan")]) for i in range(length)]


@dataclass
class Speedup:
    group: Group
    baseline: Group
    ratio: float
    ci: tuple[float, float] | None


def load(paths: list[Path]) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """Valid result records from files and folders, and (file, reason) for each one skipped."""
    files: list[Path] = []
    for path in paths:
        files.extend(sorted(path.rglob("*.json")) if path.is_dir() else [path])
    records, skipped = [], []
    for path in files:
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            skipped.append((str(path), "not readable JSON (%s)" % exc))
            continue
        problems = result.validate(record)
        if problems:
            skipped.append((str(path), "; ".join(problems[:3])))
            continue
        records.append(record)
    return records, skipped


def group(records: list[dict[str, Any]]) -> list[Group]:
    groups: dict[tuple[str, str, str], Group] = {}
    for record in records:
        cell = record["cell"]
        env = str(cell.get("environment") or "?")
        target = str(cell.get("target") or record["config"].get("device") or "?")
        variant = dict(cell.get("variant") or {})
        g = Group(env, target, variant)
        groups.setdefault(g.key, g).records.append(record)
    for g in groups.values():
        g.records.sort(key=lambda r: (r["cell"].get("repeat") or 0))
    return sorted(groups.values(), key=_order)


def _order(g: Group) -> tuple[Any, ...]:
    """Environment, target, then variant values with numbers in numeric order (32 < 256)."""
    values = tuple((k, (0, v, "") if isinstance(v, (int, float)) else (1, 0, str(v)))
                   for k, v in sorted(g.variant.items()))
    return (g.environment, g.target, values)


def choose_baseline(groups: list[Group], wanted: str | None) -> str | None:
    """The target speedups are measured against: as asked, else the first CPU target."""
    targets = sorted({g.target for g in groups})
    if wanted is not None:
        return wanted if wanted in targets else None
    cpu = sorted({g.target for g in groups if g.device == "cpu"})
    return (cpu or targets or [None])[0]


def speedup(g: Group, base: Group) -> Speedup | None:
    if not g.ok or not base.ok or not g.epoch_s:
        return None
    ratio = base.epoch_s / g.epoch_s
    ci = stats.bootstrap_ratio_ci(base.epoch_walls, g.epoch_walls) \
        if len(base.epoch_walls) > 1 and len(g.epoch_walls) > 1 else None
    return Speedup(g, base, ratio, ci)


def speedups(groups: list[Group], baseline: str | None) -> dict[tuple[str, str, str], Speedup]:
    """Each group over the baseline target's group of the same environment and variant."""
    by_key = {g.key: g for g in groups}
    out = {}
    for g in groups:
        base = by_key.get((g.environment, baseline or "", variant_text(g.variant)))
        if base is not None:
            s = speedup(g, base)
            if s is not None:
                out[g.key] = s
    return out


def effects(groups: list[Group]) -> list[tuple[str, Any, Group, Group, float]]:
    """(option, value, group, its baseline, speedup) for each swept optimisation."""
    by_key = {g.key: g for g in groups}
    out = []
    for g in groups:
        for option, base_value in EFFECT_BASELINES.items():
            if option not in g.variant or g.variant[option] == base_value:
                continue
            base_variant = dict(g.variant, **{option: base_value})
            base = by_key.get((g.environment, g.target, variant_text(base_variant)))
            if base is not None and base.epoch_s and g.epoch_s:
                out.append((option, g.variant[option], g, base, base.epoch_s / g.epoch_s))
    return out


def batch_sizes(groups: list[Group]) -> list[int]:
    return sorted({int(r["config"]["batch_size"]) for g in groups for r in g.records
                   if r["config"].get("batch_size") is not None})


def fingerprints(groups: list[Group]) -> tuple[list[tuple[str, str]], list[str],
                                                 dict[str, list[Any]], set[str]]:
    """Columns (environment, target), row names, values per row, and rows that differ."""
    values: dict[str, list[Any]] = {}
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for g in groups:
        record = (g.ok or g.records)[0]
        seen.setdefault((g.environment, g.target), record)
    columns = sorted(seen)
    rows = list(FINGERPRINT_KEYS) + ["image", "base digest", "bench_sha256"]
    for row in rows:
        cells = []
        for column in columns:
            env = seen[column]["env"]
            image = env.get("image") or {}
            if row == "image":
                cells.append(image.get("id"))
            elif row == "base digest":
                cells.append(image.get("base_digest"))
            else:
                cells.append(env.get(row))
        values[row] = cells
    differ = {row for row, cells in values.items() if len({json.dumps(c) for c in cells}) > 1}
    return columns, rows, values, differ


def reproducibility(groups: list[Group]) -> dict[str, Any]:
    records = [r for g in groups for r in g.records]
    hashes = sorted({r["env"].get("bench_sha256") for r in records if r["env"].get("bench_sha256")})
    spread = []
    by_point: dict[tuple[str, str], list[Group]] = {}
    for g in groups:
        if g.final_acc is not None:
            by_point.setdefault((g.target, variant_text(g.variant)), []).append(g)
    for (target, variant), members in sorted(by_point.items()):
        if len(members) > 1:
            accs = [m.final_acc for m in members]
            spread.append((target, variant, min(accs), max(accs), max(accs) - min(accs)))
    weights = []
    for g in groups:
        if len(g.ok) > 1 and all(r["config"].get("deterministic") for r in g.ok):
            digests = {r["summary"].get("weights_sha256") for r in g.ok}
            weights.append((g, len(digests) == 1))
    return {"bench_hashes": hashes, "accuracy_spread": spread, "weights": weights}
