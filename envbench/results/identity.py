"""One cell identity: what makes two results the same measurement.

Two results are repeats of one measurement when they share the environment, the image that
ran, the target and its resources, every bench option, the data (synthetic, or which data
set by digest, and its limits) and --quick; the repeat number tells repeats apart. ``make``
is the only place that decides this. The result file's name, resume (is this cell done?) and
the report's grouping all go through it, for the runner's cells and for stored records alike.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

# Options that name files rather than change what is measured (the data *path* is replaced
# by the data's identity), and the probe, which runs after the timed epochs and measures the
# device rather than the run.
NOT_MEASURED = ("data", "out", "save_weights", "probe")
# Options added after results were kept: at their default, left out, so a result written
# before them (which has no such key) is the same measurement as one written since.
ABSENT_AT_DEFAULT = {"inputs": None, "nodes": 1}
RESOURCE_KEYS = ("device", "cpus", "cpuset", "threads", "memory", "swap", "gpus")


@dataclass(frozen=True)
class DataIdentity:
    """Which data a cell measures on: synthetic, or CIFAR-10 named by its files' sha256 (None
    where the data set is not here to digest: each cloud VM fetches its own)."""

    source: str                 # "cifar10" or "synthetic"
    sha256: str | None = None

    @property
    def synthetic(self) -> bool:
        return self.source == "synthetic"

    def as_record(self) -> dict[str, Any]:
        return {"source": self.source, "sha256": self.sha256}


SYNTHETIC = DataIdentity("synthetic")


def variant_text(variant: dict[str, Any], empty: str = "—") -> str:
    """A cell's swept options in words, the one way every table and line writes them."""
    return " ".join("%s=%s" % kv for kv in sorted(variant.items())) or empty


@dataclass(frozen=True)
class Identity:
    environment: str
    target: str
    image_id: str | None
    resources: tuple[tuple[str, Any], ...]
    options: tuple[tuple[str, Any], ...]
    data: DataIdentity
    quick: bool
    repeat: int

    def fields(self, repeat: bool = True) -> dict[str, Any]:
        fields: dict[str, Any] = {"environment": self.environment, "target": self.target,
                  "image_id": self.image_id, "resources": dict(self.resources),
                  "options": dict(self.options), "data": self.data.as_record(),
                  "quick": self.quick}
        if repeat:
            fields["repeat"] = self.repeat
        return fields

    @property
    def digest(self) -> str:
        return _digest(self.fields())

    @property
    def group(self) -> str:
        """The measurement without the repeat number: repeats share it."""
        return _digest(self.fields(repeat=False))

    def file_stem(self, variant: dict[str, Any]) -> str:
        """Readable first (environment, target, variant, markers, repeat), then the hash that
        makes it unique: a quick run or another image never lands on a full run's file."""
        slug = "_".join("%s-%s" % (k.replace("_", ""), v) for k, v in sorted(variant.items()))
        markers = ["quick"] if self.quick else []
        if self.data.synthetic:
            markers.append("synthetic")
        readable = "__".join([self.environment, self.target, slug or "base", *markers,
                              "r%d" % self.repeat])
        return "%s__%s" % (_safe(readable)[:160], self.digest[:12])

    def differences(self, other: Identity) -> list[str]:
        """What sets ``other`` apart from this one, in words (for 'left out because...')."""
        mine, theirs = self.fields(), other.fields()
        out = []
        for key in mine:
            if mine[key] == theirs[key]:
                continue
            if isinstance(mine[key], dict):
                for sub in sorted(set(mine[key]) | set(theirs[key])):
                    want, got = mine[key].get(sub), theirs[key].get(sub)
                    if want != got:
                        out.append("%s.%s %s (expected %s)" % (key, sub, _show(got), _show(want)))
            else:
                out.append("%s %s (expected %s)" % (key, _show(theirs[key]), _show(mine[key])))
        return out


def _show(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else value


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "-", text)


def _digest(fields: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


def _frozen(mapping: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """The items in key order, each value hashable: an identity is a dict key (results are
    grouped by it). A mapping among the values (a workload's inputs, by name) becomes its
    canonical JSON text."""
    return tuple(sorted((k, json.dumps(v, sort_keys=True) if isinstance(v, dict) else v)
                        for k, v in mapping.items()))


def make(environment: str, target: str, image_id: str | None, resources: dict[str, Any],
         options: dict[str, Any], data: DataIdentity, quick: bool, repeat: int) -> Identity:
    """THE definition of a measurement's identity (see the module docstring)."""
    return Identity(
        environment=environment, target=target, image_id=image_id,
        resources=_frozen({k: resources.get(k) for k in RESOURCE_KEYS}),
        options=_frozen({k: v for k, v in options.items() if k not in NOT_MEASURED
                         and not (k in ABSENT_AT_DEFAULT and v == ABSENT_AT_DEFAULT[k])}),
        data=data,
        quick=bool(quick), repeat=int(repeat))


def of_record(record: dict[str, Any]) -> Identity:
    """The identity of a stored (schema-checked) result, from what the record itself says."""
    cell, config = record["cell"], record["config"]
    image = record["env"].get("image") or {}
    recorded = cell.get("data") or {"source": "synthetic" if config.get("synthetic") else "cifar10"}
    data = DataIdentity(recorded.get("source") or "cifar10", recorded.get("sha256"))
    return make(environment=cell.get("environment") or "?",
                target=cell.get("target") or config.get("device") or "?",
                image_id=image.get("id"), resources=cell.get("resources") or {},
                options=config, data=data, quick=bool(cell.get("quick")),
                repeat=cell.get("repeat") or 0)
