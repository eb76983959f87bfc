"""`envbench clean` (./noxw -s clean): what the kit keeps on this machine, how large each part
is and the command that removes it; with --remove PART, removed.

The parts: the stack images (and builder stages), the base images the kit built (its
debootstrap Debian bases and their Python layer), the host cache (wheels, CIFAR-10,
wheelhouses, ./noxw's uv and nox), the reports folder (results, logs, pages) and nox's
venvs (.nox, which a running nox session cannot remove: the line says the command).
"""
from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from envbench import cache
from envbench.cells import runlock
from envbench.command_options import Options
from envbench.engine import connection
from envbench.user_errors import UserError

PARTS = ("images", "bases", "cache", "reports")
# Only what the kit writes there is removed: --reports or ENVBENCH_CACHE may name a folder
# that holds other things too (a checkout, a home folder, ~/.cache).
REPORT_ENTRIES = ("results", "logs", ".cells", "cloud", "compare", "demo", "index.html",
                  "summary.md", "results.csv")
CACHE_ENTRIES = ("wheels", "cifar10", "noxw", "cloud-runs", "local-vms",
                 "input-digests.json")  # envbench.matrix.inputs.CACHE_NAME
CACHE_PREFIXES = ("wheelhouse-",)


@dataclass(frozen=True)
class Part:
    name: str
    holds: str
    size: int | None            # bytes; None: not known (no engine)
    remove: Callable[[], None] | None
    command: str                # the command that removes it


def _tree_size(path: Path) -> int:
    total = 0
    if not path.exists() or path.is_symlink():
        return 0
    if not path.is_dir():
        return path.lstat().st_size
    for item in path.rglob("*"):
        try:
            if item.is_file() and not item.is_symlink():
                total += item.lstat().st_size
        except OSError:
            continue
    return total


def _images(client: Any, bases: bool) -> list[Any]:
    """The kit's stack images and builder stages, or its base images."""
    if client is None:
        return []
    found: dict[str, Any] = {}
    try:
        if bases:
            for image in client.images.list(name="envbench/*"):
                if (image.labels or {}).get("envbench.environment"):
                    continue  # a stack named debian or python-x: not a base
                if any(t.startswith(("envbench/debian:", "envbench/python-"))
                       for t in image.tags or []):
                    found[image.id] = image
        else:
            for label in ("envbench.environment", "envbench.stage=builder"):
                for image in client.images.list(all=True, filters={"label": label}):
                    found[image.id] = image
    except connection.ENGINE_ERRORS:
        return []
    return list(found.values())


def _remove_images(client: Any, images: list[Any]) -> None:
    for image in images:
        try:
            client.images.remove(image.id, force=True)
        except connection.ENGINE_ERRORS as exc:
            raise UserError("could not remove image %s: %s" % (
                (image.tags or [image.id[:19]])[0], connection.explain(exc)))


def _ours(folder: Path, names: tuple[str, ...], prefixes: tuple[str, ...] = ()) -> list[Path]:
    """The entries of ``folder`` the kit wrote (by name), never through a link."""
    if folder.is_symlink():
        raise UserError("%s is a symbolic link: not removed (remove what it points to "
                        "yourself)" % folder)
    if not folder.is_dir():
        return []
    return sorted(item for item in folder.iterdir()
                  if item.name in names or item.name.startswith(prefixes))


def _remove(items: list[Path]) -> None:
    for item in items:
        try:
            if item.is_dir() and not item.is_symlink():
                shutil.rmtree(item)
            else:
                item.unlink()
        except OSError as exc:
            raise UserError("could not remove %s (%s)" % (item, exc.strerror or exc))


def _remove_reports(folder: Path) -> None:
    items = _ours(folder, REPORT_ENTRIES)
    if not items:
        return
    with runlock.holding(folder, sys.stdout):  # not under a run that is writing there
        _remove(items)


def _size_of(items: list[Path]) -> int:
    return sum(_tree_size(item) for item in items)


def parts(opts: Options, client: Any) -> list[Part]:
    stacks, bases = _images(client, False), _images(client, True)
    folder = cache.root()
    cached = [] if folder.is_symlink() else _ours(folder, CACHE_ENTRIES, CACHE_PREFIXES)
    reported = [] if opts.reports_dir.is_symlink() else _ours(opts.reports_dir, REPORT_ENTRIES)
    size = None if client is None else sum(i.attrs.get("Size") or 0 for i in stacks)
    base_size = None if client is None else sum(i.attrs.get("Size") or 0 for i in bases)
    return [
        Part("images", "%d stack image(s) and builder stage(s) in the engine (a CUDA stack "
             "is about 6 GB)" % len(stacks), size,
             lambda: _remove_images(client, stacks), "./noxw -s clean -- --remove images"),
        Part("bases", "%d base image(s) the kit built (envbench/debian:*, envbench/python-*: "
             "debootstrap, rebuilt in about 30 s)" % len(bases), base_size,
             lambda: _remove_images(client, bases), "./noxw -s clean -- --remove bases"),
        Part("cache", "%s: locked wheels, CIFAR-10, wheelhouses, ./noxw's uv and nox (what "
             "the kit wrote there, nothing else)" % folder, _size_of(cached),
             lambda: _remove(_ours(folder, CACHE_ENTRIES, CACHE_PREFIXES)),
             "./noxw -s clean -- --remove cache"),
        Part("reports", "%s: results, logs, pages (what the kit wrote there; README.md and "
             "anything else stay)" % opts.reports_dir, _size_of(reported),
             lambda: _remove_reports(opts.reports_dir), "./noxw -s clean -- --remove reports"),
        Part(".nox", ".nox/ beside the noxfile: the sessions' venvs (remade on the next run)",
             _tree_size(Path(".nox")), None, "rm -rf .nox"),
    ]


def _size(size: int | None) -> str:
    return "?" if size is None else "%.1f GB" % (size / 1e9) if size >= 1e8 else \
        "%.0f MB" % (size / 1e6)


def run(opts: Options, out: TextIO = sys.stdout) -> int:
    try:
        client = connection.connect()
    except UserError:
        client = None  # the engine's parts are then unknown, the folders are not
    asked = set(opts.remove)
    if "all" in asked:
        asked = set(PARTS)
    for part in parts(opts, client):
        if part.name in asked and part.name in ("images", "bases") and client is None:
            print("%-8s not removed: no Docker engine answers here" % part.name, file=out)
        elif part.name in asked:
            assert part.remove is not None
            part.remove()
            print("removed %s (%s): %s" % (part.name, _size(part.size), part.holds), file=out)
        else:
            print("%-8s %8s  %s\n         remove: %s" % (part.name, _size(part.size),
                                                       part.holds, part.command), file=out)
    if client is None:
        print("no Docker engine answers here: the images were not counted", file=out)
    return 0
