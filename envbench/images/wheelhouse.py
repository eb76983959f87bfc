"""Wheelhouses fetched by the host's pip for machines that cannot reach an index themselves:
a torch CPU build for a base's Python (the demo's and the tests' pip stack), and the kit's own
packages (the local launcher's VMs)."""
from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path
from typing import TextIO

from envbench import cache, download, provision, users
from envbench.images.wheelcache import sha256_of
from envbench.user_errors import UserError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the host may run 3.10
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

PYTORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
INDEX_ANSWER_S = 10  # how long PyTorch's index has to answer before pip is pointed at it


def folder_for(torch: str, python: str, extra: tuple[str, ...] = ()) -> Path:
    """Where ensure_wheelhouse keeps this torch's wheelhouse: known before it is fetched, so
    a matrix can name it while the fetch runs beside other work."""
    name = "wheelhouse-torch-%s-py%s" % (torch, python.replace(".", ""))
    if extra:
        name += "-" + hashlib.sha256("\n".join(sorted(extra)).encode()).hexdigest()[:8]
    return cache.root() / name


def ensure_wheelhouse(torch: str, python: str, out: TextIO = sys.stdout,
                      extra: tuple[str, ...] = ()) -> Path:
    """torch's CPU build and its dependencies for Python ``python``, with numpy (pip stacks
    lock it by default) and ``extra`` packages (what a workload needs, e.g. einops), fetched
    once by the host's pip (containers cannot reach the index here): PyTorch's CPU index
    first, then the host's own configuration (its index or local wheels). A marker written
    last says the folder is whole; an interrupted fetch is resumed (pip skips the files it
    has). Another set of extras is another folder: a wheelhouse's listing is a lock's input."""
    folder = folder_for(torch, python, extra)
    wanted = ["torch==%s" % torch, "numpy", *sorted(extra)]
    marker = folder / "COMPLETE"
    if marker.exists() and marker.read_text().split() == wanted:
        return folder
    provision.say(out, "fetching torch %s (CPU build) and numpy%s for Python %s into %s"
                  % (torch, "".join(", " + e for e in sorted(extra)), python, folder))

    def pip_download(packages: list[str]) -> list[str]:
        return [sys.executable, "-m", "pip", "download", "-q", *packages, "--only-binary",
                ":all:", "--python-version", python, "-d", str(folder)]

    command = pip_download(wanted[:2])
    # PyTorch's CPU index alone, first: as an extra index beside the default one, pip would
    # take the highest version across both, which for torch is a CUDA build. Asked once
    # first: pip retries each package 5 times, and an index out of reach cost 85 s (measured
    # in the demo) before the host's configuration was tried.
    # Through pip's own proxy and certificate authority: the way pip's fetch will go.
    pip = provision.pip_settings()
    unreachable = download.answers(PYTORCH_CPU_INDEX + "/torch/", INDEX_ANSWER_S,
                                   pip.get("cert"), pip.get("proxy"))
    proc = None
    if unreachable is None:
        proc = subprocess.run(command + ["--index-url", PYTORCH_CPU_INDEX],
                              capture_output=True, text=True)
    else:
        provision.say(out, "PyTorch's CPU index does not answer (%s): torch %s comes from "
                      "this host's pip configuration" % (unreachable, torch))
    if proc is None or proc.returncode != 0:  # out of reach: the host's configuration alone
        proc = subprocess.run(command, capture_output=True, text=True,
                              env=provision.index_environment())
    if proc.returncode == 0 and extra:  # a workload's packages: from the host's index
        proc = subprocess.run(pip_download(sorted(extra)), capture_output=True, text=True,
                              env=provision.index_environment())
    # torch-2.1 must not pass for torch-2.13: the version ends at '-' or at a local '+'.
    if proc.returncode != 0 or not any(folder.glob("torch-%s-*.whl" % torch)) and \
            not any(folder.glob("torch-%s+*.whl" % torch)):
        tail = " ".join((proc.stderr or proc.stdout).split())[-400:]
        raise UserError("could not fetch torch %s%s for Python %s: %s"
                        % (torch, "".join(", " + e for e in sorted(extra)), python, tail))
    marker.write_text("\n".join(wanted) + "\n")
    users.own_like_folder(folder, tree=True)
    return folder


def kit_requirements() -> list[str]:
    """The kit's own Python packages (pyproject's dependencies) and what installs it."""
    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml")
                            .read_text())
    return ["nox>=2024.3", "setuptools>=68", "wheel", *project["project"]["dependencies"]]


NOXW_REQUIREMENTS = Path(__file__).resolve().parents[2] / "bootstrap" / "noxw-requirements.txt"


MANIFEST = "MANIFEST.sha256"  # written last: the folder is whole, and these are its files


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.name != MANIFEST)


def write_manifest(folder: Path) -> None:
    """Record each fetched file's sha256, so that what the VMs install is what was fetched."""
    lines = ["%s  %s" % (sha256_of(p), p.name) for p in _files(folder)]
    (folder / MANIFEST).write_text("\n".join(lines) + "\n")


def check_manifest(folder: Path) -> None:
    """Refuse a wheelhouse whose files are not exactly those fetched: a file added (a planted
    nox-9999 wheel would win pip's resolution on the VM), changed, removed, or not a regular
    file. Names the file and how to start again."""
    listed: dict[str, str] = {}
    for line in (folder / MANIFEST).read_text().splitlines():
        digest, _, name = line.partition("  ")
        listed[name] = digest
    again = "; remove %s to fetch it again" % folder
    for path in _files(folder):
        if path.name not in listed:
            raise UserError("the kit's wheelhouse holds %s, which this machine did not fetch%s"
                            % (path.name, again))
        if path.is_symlink() or not path.is_file():
            raise UserError("the kit's wheelhouse holds %s, which is not a plain file%s"
                            % (path.name, again))
        if sha256_of(path) != listed.pop(path.name):
            raise UserError("the kit's wheelhouse file %s changed since it was fetched (its "
                            "sha256 differs)%s" % (path.name, again))
    if listed:
        raise UserError("the kit's wheelhouse lost %s since it was fetched%s"
                        % (", ".join(sorted(listed)), again))


def ensure_kit_wheelhouse(python: str, out: TextIO = sys.stdout) -> Path:
    """The kit's Python packages for Python ``python``, for machines without an index (the
    local launcher's VMs): fetched once by the host's pip, refreshed when the list changes.
    With them, what ./noxw installs there: uv's wheel and nox's hash-locked set. Every use
    checks the files against the sha256 manifest written when they were fetched."""
    wanted = kit_requirements()
    locked = NOXW_REQUIREMENTS.read_text()
    digest = hashlib.sha256(("\n".join(wanted) + locked).encode()).hexdigest()[:12]
    folder = cache.root() / ("wheelhouse-kit-py%s-%s" % (python.replace(".", ""), digest))
    if (folder / MANIFEST).exists():
        check_manifest(folder)
        return folder
    provision.say(out, "fetching the kit's Python packages for Python %s into %s"
                  % (python, folder))
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "-q", *wanted,
                           "--only-binary", ":all:", "--python-version", python,
                           "-d", str(folder)], capture_output=True, text=True)
    if proc.returncode == 0:  # separately: one hashed line puts pip in hash-checking mode
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--require-hashes",
                               "-r", str(NOXW_REQUIREMENTS), "--only-binary", ":all:",
                               "--python-version", python, "-d", str(folder)],
                              capture_output=True, text=True)
    if proc.returncode != 0:
        tail = " ".join((proc.stderr or proc.stdout).split())[-400:]
        raise UserError("could not fetch the kit's packages for Python %s: %s" % (python, tail))
    (folder / "COMPLETE").unlink(missing_ok=True)  # a marker of kits before the manifest
    write_manifest(folder)
    users.own_like_folder(folder, tree=True)
    return folder
