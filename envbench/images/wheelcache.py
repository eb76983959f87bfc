"""One host cache of wheels, addressed by sha256: filled once, verified on arrival, shared.

A wheel lives at CACHE/wheels/<sha256>/<file name>; every image that locks it reads that one
file into its build context, so two environments never hold two copies. Filling is safe
when runs overlap: a wheel is written under a temporary name and renamed once its hash is
right. A wheel from a wheelhouse is hard-linked where the file system allows, else copied.
A wheel the lock names without a URL and without a wheelhouse is asked of the environment's
index by the host's own pip (its configuration: index, mirror, certificates, proxy), pinned by
version and sha256 for the image's Python and platform: the lock names no host.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TextIO

from envbench import cache, download, provision, redact, users
from envbench.images.lock import Lock, Wheel
from envbench.user_errors import UserError

BLOCK = 1 << 20


def path_for(wheel: Wheel, root: Path | None = None) -> Path:
    """CACHE/wheels/<sha256>/<file name>; both parts were checked when the lock was read,
    and the result is checked again to lie in the cache (a second line of defence)."""
    folder = (root or cache.root()) / "wheels"
    path = folder / wheel.sha256 / wheel.filename
    if os.path.normpath(path).rsplit(os.sep, 2)[0] != os.path.normpath(folder):
        raise UserError("%s: %s would lie outside the wheel cache: refused" % (
            wheel.package, wheel.filename))
    return path


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def _arrive(wheel: Wheel, source: Path | None, root: Path, out: TextIO) -> Path:
    final = path_for(wheel, root)
    users.cache_dirs(final.parent)
    fd, name = tempfile.mkstemp(prefix=".part-", dir=final.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        if source is not None:
            tmp.unlink()
            try:
                os.link(source, tmp)
            except OSError:
                shutil.copyfile(source, tmp)
        elif wheel.url:
            download.fetch(wheel.url, tmp, out, wheel.filename[:60], timeout=120,
                           max_bytes=wheel.size)
        got = sha256_of(tmp)
        if got != wheel.sha256:
            raise UserError("%s: sha256 %s, but the lock says %s: the file is corrupt or not "
                            "the one locked; nothing was kept" % (wheel.filename, got,
                                                                   wheel.sha256))
        os.replace(tmp, final)
        users.own_like_folder(final)
    finally:
        if tmp.exists():
            tmp.unlink()
    return final


PLATFORM = re.compile(r"(x86_64|aarch64)-manylinux_2_(\d+)")
OLDEST_GLIBC = 17  # manylinux2014: older wheels are not what any current stack locks


def pip_platforms(platform_tag: str) -> list[str]:
    """pip's --platform values for a lock's platform: pip takes each tag literally, so a
    manylinux_2_36 image lists every manylinux_2_N down to 2_17 (and manylinux2014), which
    its glibc runs."""
    match = PLATFORM.fullmatch(platform_tag)
    if match is None:
        raise UserError("a lock's platform %r is not ARCH-manylinux_2_N" % platform_tag[:60])
    arch, newest = match.group(1), int(match.group(2))
    tags = ["manylinux_2_%d_%s" % (n, arch) for n in range(newest, OLDEST_GLIBC - 1, -1)]
    return tags + ["manylinux2014_%s" % arch]


def pip_download_command(wheels: list[Wheel], lock: Lock, index_url: str | None,
                         requirements: Path, dest: Path) -> list[str]:
    """The host pip's download of exactly these files: each package at its locked version
    with its locked sha256 (--require-hashes), no dependencies (the lock lists them all),
    for the image's Python and platform. The environment's index when the matrix names one,
    else whatever index pip is configured with."""
    lines: dict[str, str] = {}
    for wheel in wheels:
        key = "%s==%s" % (wheel.package, wheel.version)
        lines[key] = lines.get(key, key) + " --hash=sha256:%s" % wheel.sha256
    requirements.write_text("\n".join(lines.values()) + "\n")
    # --no-cache-dir: the kit's cache is the one copy; pip's would hold the gigabytes twice.
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
               "--no-cache-dir", "--progress-bar", "off", "--require-hashes", "-r",
               str(requirements),
               "--python-version", lock.python, "--implementation", "cp", "-d", str(dest)]
    for tag in pip_platforms(lock.platform):
        command += ["--platform", tag]
    if index_url is not None:
        command += ["--index-url", index_url]
    return command


def fetch_through_index(wheels: list[Wheel], lock: Lock, index_url: str | None, root: Path,
                        out: TextIO) -> Path:
    """A folder of the cache (the same file system: they are linked into place) holding the
    files, by name, fetched by the host's pip. Its output is passed on line by line: a CUDA
    stack is gigabytes, and a user should see which file is coming."""
    if not lock.python or not lock.platform:
        raise UserError("%s names wheels without URLs but records no Python or platform; run "
                        "`./noxw -s lock` again" % lock.path)
    staging = root / "wheels" / ".fetch"
    users.cache_dirs(staging)
    dest = Path(tempfile.mkdtemp(prefix="pip-", dir=staging))
    command = pip_download_command(wheels, lock, index_url, dest / "requirements.txt", dest)
    said: list[str] = []
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, errors="replace", env=provision.index_environment())
    assert proc.stdout is not None
    for line in proc.stdout:
        line = line.strip()
        if line.startswith(("Downloading", "Saved", "File was already")):
            print("  %s" % redact.credentials(line)[:160], file=out, flush=True)
        elif line.startswith(("ERROR", "Expected sha256", "Got ")) or " from http" in line:
            said = (said + [line[:300]])[-6:]
    if proc.wait() != 0:
        shutil.rmtree(dest, ignore_errors=True)
        raise UserError("%s: pip could not fetch the locked wheels through %s: %s; nothing "
                        "was kept" % (lock.environment, redact.credentials(index_url) if index_url
                                      else "its configured index",
                                      " ".join(" ".join(said).split())[-600:] or
                                      "it exited with status %d" % proc.returncode))
    return dest


def ensure(lock: Lock, wheelhouse: Path | None, out: TextIO = sys.stdout,
           root: Path | None = None, index_url: str | None = None) -> list[Path]:
    """Every wheel of the lock in the cache, fetched where missing; their cache paths. Through
    the index, a version the lock lists several files of is served by the one pip takes."""
    root = root or cache.root()
    for wheel in lock.wheels:
        _drop_if_not_it(wheel, root, out)
    through_index = wheelhouse is None
    missing = [w for w in lock.wheels if not _served(w, lock, root, through_index)]
    if missing:
        total = sum(w.size or 0 for w in missing)
        print("%s: fetching %d wheel(s)%s into %s" % (
            lock.environment, len(missing), " (%.1f MB)" % (total / 1e6) if total else "",
            root / "wheels"), file=out, flush=True)
    by_index = [w for w in missing if w.url is None and through_index]
    staging = fetch_through_index(by_index, lock, index_url, root, out) if by_index else None
    fetched = _arrived(by_index, staging, lock) if staging else {}
    try:
        return _place(lock, wheelhouse, fetched, root, out)
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)


def _files_of_its_version(wheel: Wheel, lock: Lock) -> list[Wheel]:
    """Every file the lock lists for this wheel's package and version: a package may publish
    several wheels of one version that all fit the image (regex: a manylinux2014 and a
    manylinux_2_28 build), and the image's pip installs whichever of them it is given."""
    return [w for w in lock.wheels if (w.package, w.version) == (wheel.package, wheel.version)]


def _served(wheel: Wheel, lock: Lock, root: Path, through_index: bool) -> bool:
    """The cache holds this file, or (for a wheel fetched through the index, where pip
    chooses the file) another file the lock lists for its version, hash-checked as well."""
    if path_for(wheel, root).is_file():
        return True
    return through_index and wheel.url is None and any(
        path_for(other, root).is_file() for other in _files_of_its_version(wheel, lock))


def _arrived(asked: list[Wheel], staging: Path, lock: Lock) -> dict[str, Path]:
    """The files pip saved, by name: for each package and version, pip takes one of the
    files the lock lists (the one it ranks best for the platform), so the others of that
    version are not expected. A version of which no listed file arrived is an error."""
    arrived = {w.filename: staging / w.filename for w in asked
               if (staging / w.filename).is_file() and not (staging / w.filename).is_symlink()}
    for wheel in asked:
        files = _files_of_its_version(wheel, lock)
        if not any(f.filename in arrived for f in files):
            raise UserError("%s: pip fetched none of the %d file(s) the lock lists for %s %s "
                            "(%s) through the index: nothing was kept; run `./noxw -s lock` "
                            "if the index no longer serves them" % (
                                lock.environment, len(files), wheel.package, wheel.version,
                                ", ".join(f.filename for f in files)[:300]))
    return arrived


def _drop_if_not_it(wheel: Wheel, root: Path, out: TextIO) -> None:
    """A cached file that cannot be the locked wheel (a link, not a regular file, or another
    size than the lock's) is removed, so that it is fetched again and hash-checked: the
    cache is shared, and what lies there is read (its torch version) before any build."""
    path = path_for(wheel, root)
    if not (path.exists() or path.is_symlink()):
        return
    wrong = None
    if path.is_symlink() or not path.is_file():
        wrong = "not a regular file"
    elif wheel.size is not None and path.stat().st_size != wheel.size:
        wrong = "%d bytes, the lock says %d" % (path.stat().st_size, wheel.size)
    if wrong is not None:
        print("%s in the wheel cache is %s: fetching it again" % (wheel.filename, wrong),
              file=out, flush=True)
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def _place(lock: Lock, wheelhouse: Path | None, fetched: dict[str, Path], root: Path,
           out: TextIO) -> list[Path]:
    paths = []
    through_index = wheelhouse is None
    for wheel in lock.wheels:
        path = path_for(wheel, root)
        if not path.is_file():
            source = fetched.get(wheel.filename)
            if source is None and wheel.url is None and through_index:
                continue  # pip took another file the lock lists for this version
            if source is None and wheel.url is None:
                source = (wheelhouse / wheel.filename) if wheelhouse else None
                if source is None or not source.is_file():
                    raise UserError("%s: %s is locked from a wheelhouse but not in %s"
                                    % (lock.environment, wheel.filename, wheelhouse))
                if wheelhouse is not None and \
                        not source.resolve().is_relative_to(wheelhouse.resolve()):
                    raise UserError("%s: %s in the wheelhouse is a link to %s, outside it: "
                                    "refused" % (lock.environment, wheel.filename,
                                                 source.resolve()))
            path = _arrive(wheel, source, root, out)
        paths.append(path)
    return paths
