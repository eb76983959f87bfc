"""`envbench clean` (nox -s clean): what the kit keeps on this machine, how large each part
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
from envbench.engine import connection
from envbench.errors import UserError
from envbench.options import Options

PARTS = ("images", "bases", "cache", "reports")
KEPT_IN_REPORTS = ("README.md",)  # tracked in the repository


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


def _remove_reports(folder: Path) -> None:
    if not folder.is_dir():
        return
    for item in folder.iterdir():
        if item.name in KEPT_IN_REPORTS:
            continue
        if item.is_dir() and not item.is_symlink():
            shutil.rmtree(item)
        else:
            item.unlink()


def parts(opts: Options, client: Any) -> list[Part]:
    stacks, bases = _images(client, False), _images(client, True)
    folder = cache.root()
    size = None if client is None else sum(i.attrs.get("Size") or 0 for i in stacks)
    base_size = None if client is None else sum(i.attrs.get("Size") or 0 for i in bases)
    return [
        Part("images", "%d stack image(s) and builder stage(s) in the engine (a CUDA stack "
             "is about 6 GB)" % len(stacks), size,
             lambda: _remove_images(client, stacks), "nox -s clean -- --remove images"),
        Part("bases", "%d base image(s) the kit built (envbench/debian:*, envbench/python-*: "
             "debootstrap, rebuilt in about 30 s)" % len(bases), base_size,
             lambda: _remove_images(client, bases), "nox -s clean -- --remove bases"),
        Part("cache", "%s: locked wheels, CIFAR-10, wheelhouses, ./noxw's uv and nox"
             % folder, _tree_size(folder), lambda: shutil.rmtree(folder, ignore_errors=True),
             "nox -s clean -- --remove cache"),
        Part("reports", "%s: results, logs, pages (README.md stays)" % opts.reports_dir,
             _tree_size(opts.reports_dir), lambda: _remove_reports(opts.reports_dir),
             "nox -s clean -- --remove reports"),
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
        if part.name in asked:
            if part.remove is None or (part.name in ("images", "bases") and client is None):
                raise UserError("%s cannot be removed from here: %s" % (part.name,
                                                                        part.command))
            part.remove()
            print("removed %s (%s): %s" % (part.name, _size(part.size), part.holds), file=out)
        else:
            print("%-8s %8s  %s\n         remove: %s" % (part.name, _size(part.size),
                                                       part.holds, part.command), file=out)
    if client is None:
        print("no Docker engine answers here: the images were not counted", file=out)
    return 0
