"""Locked stacks: each pip environment resolved once, on the host, into locks/<env>.pylock.toml.

uv resolves the environment's pins for the image's Python version and glibc platform (not
the host's: pip's own `download --python-version` evaluates markers for the host and drops
dependencies a foreign Python needs), from the environment's index, or from its wheelhouse
as an offline mirror. The lock records every wheel by file name, size and sha256, and names
no host: a wheel's URL is resolved through the environment's index (or pip's configured one)
when it is fetched, so a lock can be committed and a mirror serves it. The image installs
exactly those files, offline, hash-checked. A lock remembers the hash of its inputs (the pins,
Python, platform, index as the matrix writes it, wheelhouse listing); when they change the
lock is stale and is refused until `./noxw -s lock` runs again.
"""
from __future__ import annotations

import enum
import hashlib
import json
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import unquote

from envbench import files, provision, users
from envbench.matrix import sources
from envbench.matrix.models import Environment
from envbench.user_errors import UserError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the host may run 3.10
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

# The glibc of Debian bookworm, on which python:*-slim and the local Debian base are built.
DEFAULT_GLIBC = "2_36"
LOCK_SUFFIX = ".pylock.toml"


@dataclass(frozen=True)
class Wheel:
    package: str
    version: str
    filename: str
    sha256: str
    size: int | None
    url: str | None  # None: by name, from the environment's wheelhouse or through its index


@dataclass(frozen=True)
class Lock:
    environment: str
    path: Path
    sha256: str           # of the lock file: the image tag and every result carry it
    inputs_sha256: str
    uv_version: str
    wheels: tuple[Wheel, ...]
    python: str = ""     # the image's Python and wheel platform: what a fetch through the
    platform: str = ""   # index asks for (from the lock's recorded inputs)

    def requirements_text(self) -> str:
        """pip's form of the lock: every package pinned with ==, every file by hash."""
        # No name or path here: two environments with one lock share the install's layers.
        lines = ["# pip's form of a lock: every package by ==, every file by its sha256"]
        by_package: dict[tuple[str, str], list[str]] = {}
        for wheel in self.wheels:
            by_package.setdefault((wheel.package, wheel.version), []).append(wheel.sha256)
        for (package, version), hashes in sorted(by_package.items()):
            lines.append("%s==%s %s" % (package, version,
                                        " ".join("--hash=sha256:%s" % h for h in hashes)))
        return "\n".join(lines) + "\n"

    def pins(self) -> list[str]:
        """Every package of the lock at its locked version."""
        return sorted({"%s==%s" % (w.package, w.version) for w in self.wheels})


def platform_tag(env: Environment) -> str:
    """The wheel platform the image runs: the host's machine, the base's glibc."""
    if env.platform:
        return env.platform
    machine = platform.machine() or "x86_64"
    return "%s-manylinux_%s" % ("aarch64" if machine in ("arm64", "aarch64") else machine,
                                DEFAULT_GLIBC)


def inputs(name: str, env: Environment, matrix_dir: Path) -> dict[str, Any]:
    """What the resolution depends on. The index is taken as the matrix writes it: a mirror
    given through ${VAR} serves the same files, so it does not make the lock stale."""
    wheelhouse = sources.wheelhouse(name, env, matrix_dir)
    return {
        "requirements": sources.requirements(env),
        "python": env.python,
        "platform": platform_tag(env),
        "index_url": env.index_url,
        "wheelhouse": sorted(p.name for p in wheelhouse.glob("*.whl")) if wheelhouse else None,
    }


def inputs_sha256(values: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()


def path_for(locks_dir: Path, name: str) -> Path:
    return locks_dir / (name + LOCK_SUFFIX)


def uv_binary() -> str:
    try:
        from uv import find_uv_bin
    except ImportError:
        raise UserError("uv is not installed beside envbench (pip install 'uv==0.13.9'); the "
                        "nox sessions install it")
    return find_uv_bin()


def uv_version() -> str:
    out = subprocess.run([uv_binary(), "--version"], capture_output=True, text=True)
    return out.stdout.split()[1] if out.returncode == 0 and out.stdout.split()[1:] else "?"


def resolve(requirements: list[str], python: str, platform_name: str,
            index_url: str | None = None, find_links: Path | None = None) -> str:
    """uv's pylock.toml for these pins, resolved for a foreign Python and platform."""
    with tempfile.TemporaryDirectory(prefix="envbench-lock-") as tmp:
        pins = Path(tmp) / "requirements.in"
        pins.write_text("\n".join(requirements) + "\n")
        out = Path(tmp) / "pylock.toml"
        command = [uv_binary(), "pip", "compile", str(pins), "--python-version", python,
                   "--python-platform", platform_name, "--only-binary", ":all:",
                   "--format", "pylock.toml", "--no-header", "--quiet", "-o", str(out)]
        if find_links is not None:
            command += ["--no-index", "--find-links", str(find_links)]
        elif index_url is not None:
            command += ["--extra-index-url", index_url]
        # Never fetch an interpreter: the target Python is the image's, not one on this host.
        env = dict(provision.index_environment(), UV_PYTHON_DOWNLOADS="never")
        proc = subprocess.run(command, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            reason = " ".join((proc.stderr or proc.stdout).split())[:600]
            raise UserError("uv could not resolve %s for Python %s on %s: %s"
                            % (", ".join(requirements), python, platform_name, reason))
        return out.read_text()


SHA256 = re.compile(r"[0-9a-f]{64}")
# A wheel's file name (PEP 427): name-version[-build]-python-abi-platform.whl, each part of
# letters, digits, '_', '.', '+' or '!'; never a separator, '..' or anything a path could use.
WHEEL_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.]*-[A-Za-z0-9_.+!]+(-[0-9][A-Za-z0-9_.]*)?"
                        r"-[A-Za-z0-9_.]+-[A-Za-z0-9_.]+-[A-Za-z0-9_.]+\.whl")
MAX_WHEEL_BYTES = 8 * 10**9  # the largest CUDA wheels are about 3 GB


def _wheel(entry: Any, package: dict[str, Any], where: str) -> Wheel:
    """One lock entry, checked before any of it names a file or a download: a lock comes
    from a file anyone can change in a pull request."""
    label = "%s: %s %s" % (where, str(package.get("name"))[:60],
                           str(package.get("version"))[:30])
    if not isinstance(entry, dict):
        raise UserError("%s: a wheel entry is not a table" % label)
    hashes = entry.get("hashes") or {}
    if not isinstance(hashes, dict):
        raise UserError("%s: hashes is not a table (hashes = { sha256 = \"…\" })" % label)
    sha256 = hashes.get("sha256")
    if not isinstance(sha256, str) or not SHA256.fullmatch(sha256):
        raise UserError("%s: hashes.sha256 %r is not 64 lower-case hex digits"
                        % (label, str(sha256)[:80]))
    url = entry.get("url")
    if url is not None and (not isinstance(url, str) or not url.startswith("https://")):
        raise UserError("%s: url %r: only https:// downloads are accepted" % (label,
                                                                             str(url)[:120]))
    raw_name = entry.get("name") or (url or "").rsplit("/", 1)[-1].split("?")[0]
    filename = unquote(raw_name) if isinstance(raw_name, str) else ""
    if not WHEEL_NAME.fullmatch(filename) or ".." in filename:
        raise UserError("%s: %r is not a wheel file name (name-version-python-abi-platform"
                        ".whl, no separators or '..')" % (label, filename[:120]))
    size = entry.get("size")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int)
                             or not 0 < size <= MAX_WHEEL_BYTES):
        raise UserError("%s: size %r is not a number of bytes up to %d" % (
            label, str(size)[:40], MAX_WHEEL_BYTES))
    if url is not None and size is None:
        raise UserError("%s: a downloaded wheel needs its size (the download is held to it)"
                        % label)
    if not isinstance(package.get("name"), str) or not isinstance(package.get("version"), str):
        raise UserError("%s: a package without a name or version" % where)
    return Wheel(package["name"], package["version"], filename, sha256, size, url)


def _wheels(data: dict[str, Any], where: str) -> tuple[Wheel, ...]:
    wheels: list[Wheel] = []
    for package in data.get("packages", []):
        if not isinstance(package, dict):
            raise UserError("%s: a [[packages]] entry is not a table" % where)
        entries = package.get("wheels") or []
        if not isinstance(entries, list):
            raise UserError("%s: %s's wheels is not a list of tables" % (
                where, str(package.get("name"))[:60]))
        if not entries:
            raise UserError("%s: %s %s has no wheel (only wheels are installed)"
                            % (where, str(package.get("name"))[:60],
                               str(package.get("version"))[:30]))
        wheels.extend(_wheel(entry, package, where) for entry in entries)
    return tuple(wheels)


WHEEL_URL = re.compile(r'url = "([^"]+)"')


def _host_free(text: str) -> str:
    """Every wheel by its file name alone: a URL names a file host (or, for a wheelhouse,
    this machine's folders), which a lock meant to be committed must not. The fetch asks the
    environment's index for the file again, and the sha256 holds it to the one locked."""
    def name(match: re.Match[str]) -> str:
        path = match.group(1).split("?", 1)[0].split("#", 1)[0]
        return 'name = "%s"' % unquote(path.rsplit("/", 1)[-1])
    return WHEEL_URL.sub(name, text)


# uv's words for a package that a --no-index --find-links resolution cannot find.
NOT_IN_WHEELHOUSE = re.compile(r"Because ([A-Za-z0-9_.\-]+) was not found in the provided "
                               r"package locations")


def not_in_wheelhouse(name: str, package: str, requirement: str, wheelhouse: Path,
                      python: str) -> str:
    """The sentence for a package the stack's wheelhouse lacks, with the two ways out."""
    return ("environments.%s: %s is not in its wheelhouse %s, the stack's only source of "
            "wheels (with a wheelhouse no index is asked). Either add it and its dependencies "
            "there (`python3 -m pip download %s -d %s --python-version %s --only-binary "
            ":all:`), or remove `wheelhouse:` so the stack resolves from an index (for torch's "
            "CPU build: `index_url: https://download.pytorch.org/whl/cpu`)"
            % (name, package, wheelhouse, shlex.quote(requirement), wheelhouse, python))


def write(name: str, env: Environment, matrix_dir: Path, locks_dir: Path,
          pins: list[str] | None = None) -> Lock:
    """Resolve the environment and write its lock; with ``pins``, resolve those instead (a
    lock's own package==version list, to see what the index serves for them today)."""
    values = inputs(name, env, matrix_dir)
    wheelhouse = sources.wheelhouse(name, env, matrix_dir)
    try:
        text = resolve(pins or values["requirements"], env.python, values["platform"],
                       sources.index_url(name, env), wheelhouse)
    except UserError as exc:
        missing = NOT_IN_WHEELHOUSE.search(str(exc))
        if wheelhouse is None or missing is None:
            raise
        package = missing.group(1)
        asked = [r for r in (pins or values["requirements"])
                 if re.split(r"[<>=!~ ;\[]", r, maxsplit=1)[0].lower().replace("_", "-")
                 == package.lower().replace("_", "-")]
        raise UserError(not_in_wheelhouse(name, package, asked[0] if asked else package,
                                          wheelhouse, env.python))
    text = _host_free(text)
    header = ("# envbench lock of environment %s: written by `./noxw -s lock`, do not edit.\n"
              "# Resolved with uv for Python %s on %s.\n" % (name, env.python,
                                                              values["platform"]))
    tool = ["", "[tool.envbench]", "environment = %s" % json.dumps(name),
            "inputs-sha256 = %s" % json.dumps(inputs_sha256(values)),
            "uv-version = %s" % json.dumps(uv_version()),
            "inputs = %s" % json.dumps(json.dumps(values, sort_keys=True)), ""]
    path = path_for(locks_dir, name)
    users.write_text(path, header + text.rstrip("\n") + "\n" + "\n".join(tool))
    return read(path)


MAX_LOCK_BYTES = 16 << 20  # a CUDA stack's lock is about 20 kB


def read(path: Path) -> Lock:
    try:
        raw = files.read_regular(path, MAX_LOCK_BYTES)
        data = tomllib.loads(files.decode_utf8(raw))
    except (files.Unreadable, tomllib.TOMLDecodeError) as exc:
        raise UserError("%s: not a readable lock (%s); run `./noxw -s lock`" % (path, exc))
    tool = data.get("tool")
    tool = tool.get("envbench") if isinstance(tool, dict) else None
    if not isinstance(data.get("packages", []), list):
        raise UserError("%s: packages is not a list of [[packages]] tables; run `./noxw -s lock`"
                        % path)
    if not isinstance(tool, dict) or not isinstance(tool.get("inputs-sha256"), str):
        raise UserError("%s: not an envbench lock (no [tool.envbench] inputs-sha256); run "
                        "`./noxw -s lock`" % path)
    try:
        recorded = json.loads(tool.get("inputs") or "{}")
    except (TypeError, ValueError):
        recorded = None
    if not isinstance(recorded, dict):
        raise UserError("%s: [tool.envbench] inputs is not the JSON the kit writes; run "
                        "`./noxw -s lock`" % path)
    return Lock(environment=str(tool.get("environment", path.name)), path=path,
                sha256=hashlib.sha256(raw).hexdigest(), inputs_sha256=tool["inputs-sha256"],
                uv_version=str(tool.get("uv-version", "?")), wheels=_wheels(data, str(path)),
                python=str(recorded.get("python") or ""),
                platform=str(recorded.get("platform") or ""))


class LockState(enum.Enum):
    CURRENT = "current"  # written from the matrix's present pins, Python, platform, index
    STALE = "stale"      # the matrix changed since: refused until `./noxw -s lock` runs
    MISSING = "missing"  # never written


@dataclass(frozen=True)
class LockStatus:
    state: LockState
    lock: Lock | None  # the file's lock, current or stale; None when missing


def status(name: str, env: Environment, matrix_dir: Path, locks_dir: Path) -> LockStatus:
    path = path_for(locks_dir, name)
    if not path.exists():
        return LockStatus(LockState.MISSING, None)
    current = read(path)
    wanted = inputs_sha256(inputs(name, env, matrix_dir))
    state = LockState.CURRENT if current.inputs_sha256 == wanted else LockState.STALE
    return LockStatus(state, current)


def ensure(name: str, env: Environment, matrix_dir: Path, locks_dir: Path, frozen: bool,
           out: TextIO) -> Lock:
    """The environment's current lock: created when missing (and said), refused when stale."""
    found = status(name, env, matrix_dir, locks_dir)
    where = path_for(locks_dir, name)
    if found.state is LockState.CURRENT and found.lock is not None:
        return found.lock
    if found.state is LockState.STALE:
        raise UserError("%s is stale: the matrix changed %s's pins, Python, platform, index or "
                        "wheelhouse since it was written; run `./noxw -s lock`" % (where, name))
    if frozen:
        raise UserError("%s is missing and --frozen forbids creating it; run `./noxw -s lock`"
                        % where)
    print("%s: no lock yet, resolving it into %s" % (name, where), file=out, flush=True)
    started = time.perf_counter()
    made = write(name, env, matrix_dir, locks_dir)
    print("%s: locked %d wheels in %.1f s" % (name, len(made.wheels),
                                               time.perf_counter() - started), file=out)
    return made
