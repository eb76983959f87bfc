"""How much disk the images still to build will take: the host's wheel cache and the engine.

A pip stack's wheels land once in the host cache, then pass through the engine about five
times: the image keeps the installed venv (about twice the wheels), and while it builds, the
context and the builder stage (the wheels and the venv again, about three times the wheels)
are there too, until the kit removes the builder stage. Measured for torch 2.14.1 + CUDA 13
on the local Debian base: 3.0 GB of wheels in the cache, a 5.92 GB image and an 8.94 GB
builder stage, so about 18 GB at the peak of that one stack's build. The lock gives the
wheels' sizes where it exists; otherwise a typical stack's wheels are assumed, and the line
says so.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from envbench import cache
from envbench.images import lock, wheelcache
from envbench.matrix.models import Environment
from envbench.user_errors import UserError

IMAGE_FACTOR = 2   # the image that stays
BUILD_FACTOR = 3   # context and builder stage, while one stack builds
# Wheels of a stack without a lock yet: a CUDA build's torch and its NVIDIA libraries, a CPU
# build's torch and numpy.
TYPICAL_WHEELS = {"cuda": 3 * 10**9, "cpu": 3 * 10**8}
DEBIAN_STACK_BYTES = 2 * 10**9  # apt's python3-torch with its dependencies, in the engine


@dataclass(frozen=True)
class Need:
    environment: str
    cache_bytes: int   # wheels not yet in the host cache
    image_bytes: int   # what stays in the engine
    build_bytes: int   # what the engine holds besides, while this stack builds
    source: str        # "lock" or "typical"


def of(name: str, env: Environment, locks_dir: Path, cache_root: Path | None = None) -> Need:
    if env.source != "pip":
        return Need(name, 0, DEBIAN_STACK_BYTES, 0, "typical")
    try:
        made = lock.read(lock.path_for(locks_dir, name))
    except UserError:
        wheels = TYPICAL_WHEELS[env.kind]
        return Need(name, wheels, IMAGE_FACTOR * wheels, BUILD_FACTOR * wheels, "typical")
    root = cache_root or cache.root()
    total = sum(w.size or 0 for w in made.wheels)
    missing = sum(w.size or 0 for w in made.wheels
                  if not wheelcache.path_for(w, root).exists())
    return Need(name, missing, IMAGE_FACTOR * total, BUILD_FACTOR * total, "lock")


def engine_bytes(needs: list[Need]) -> int:
    """Every image that stays, plus the largest build's passing footprint (one at a time)."""
    return sum(n.image_bytes for n in needs) + max((n.build_bytes for n in needs), default=0)


def describe(needs: list[Need]) -> str:
    locked = sum(n.source == "lock" for n in needs)
    return ("%.1f GB in the engine (each image about %d× its wheels, %d× more while it builds)"
            " and %.1f GB of wheels for the cache; %d of %d stack(s) sized from their lock, "
            "the rest as a typical stack" % (
                engine_bytes(needs) / 1e9, IMAGE_FACTOR, BUILD_FACTOR,
                sum(n.cache_bytes for n in needs) / 1e9, locked, len(needs)))


@dataclass(frozen=True)
class Room:
    ok: bool
    free: str      # the free space, in words: one disk, or the engine's and the cache's


def room(engine_root: Path, cache_dir: Path, needs: list[Need]) -> Room:
    """Whether the engine's data-root and the wheel cache have the room ``needs`` take."""
    engine_free = shutil.disk_usage(engine_root).free
    engine_need = engine_bytes(needs)
    cache_need = sum(n.cache_bytes for n in needs)
    cache_dir.mkdir(parents=True, exist_ok=True)
    if cache_dir.stat().st_dev == engine_root.stat().st_dev:
        return Room(engine_free > engine_need + cache_need, "%.1f GB free" % (engine_free / 1e9))
    cache_free = shutil.disk_usage(cache_dir).free
    return Room(engine_free > engine_need and cache_free > cache_need,
                "%.1f GB free for the engine, %.1f GB for the cache (%s)"
                % (engine_free / 1e9, cache_free / 1e9, cache_dir))


FREE_SPACE = ("free space (`docker system prune`), move the engine's data-root, or set "
              "ENVBENCH_CACHE to a larger disk")


def refusal(engine_root: Path, cache_dir: Path, needs: list[Need]) -> str | None:
    """The sentence that stops a run before its builds when the disk cannot hold them. Only
    stacks sized from their lock decide it: a typical stack's size is a guess (a Debian
    stack, a first lock), which warning() reports instead of refusing on."""
    sized = [n for n in needs if n.source == "lock"]
    if not sized:
        return None
    found = room(engine_root, cache_dir, sized)
    if found.ok:
        return None
    return ("not enough disk to build %d image(s): %s, and they need %s. Nothing was fetched "
            "or built. Free space (`docker system prune`), move the engine's data-root, set "
            "ENVBENCH_CACHE to a larger disk, or build fewer stacks (--env)"
            % (len(sized), found.free, describe(sized)))


def warning(engine_root: Path, cache_dir: Path, needs: list[Need]) -> str | None:
    """A line for builds that may not fit where some sizes are guesses (the run goes on)."""
    if not needs or all(n.source == "lock" for n in needs):
        return None
    found = room(engine_root, cache_dir, needs)
    if found.ok:
        return None
    return ("warning: the images to build may not fit: %s, and they need about %s"
            % (found.free, describe(needs)))
