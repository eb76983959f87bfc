"""Getting a machine ready, in one place: `.ci/run`, `nox -s tests` and `nox -s demo` all
call this module, so a fresh machine with only Python gets what they need the same way.

- a Docker engine: the one that answers, or, on Debian/Ubuntu as root or with passwordless
  sudo, Debian's docker.io installed and dockerd started (and said); elsewhere one sentence
  with the command to run;
- a Debian base image: in the engine, else pulled where a registry answers, else built
  locally with debootstrap;
- that base with Python (python3, venv), for pip stacks built with the network off;
- a wheelhouse of a torch CPU build for the base's Python, fetched by the host's pip.

Importing this module needs only the standard library: `.ci/run` runs
`python3 -m envbench.provision engine` before anything is installed.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from envbench import cache
from envbench.errors import UserError

DOCKER_INSTALL = "sudo apt-get install -y docker.io && sudo systemctl start docker"
PYTORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def _say(out: TextIO, text: str) -> None:
    print("[setup] %s" % text, file=out, flush=True)


def privileged() -> list[str] | None:
    """The command prefix that runs as root here ([] as root, sudo -n where it needs no
    password), or None when this user cannot."""
    if os.geteuid() == 0:
        return []
    if shutil.which("sudo") and subprocess.run(["sudo", "-n", "true"], capture_output=True,
                                               timeout=20).returncode == 0:
        return ["sudo", "-n"]
    return None


def debian_like() -> bool:
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return False
    return any(word in text for word in ("ID=debian", "ID=ubuntu", "ID_LIKE=debian",
                                         'ID_LIKE="debian', "ID_LIKE=ubuntu"))


def apt_install(packages: list[str], out: TextIO) -> None:
    """Install Debian packages that are missing, as root or with passwordless sudo."""
    prefix = privileged()
    if prefix is None or not debian_like():
        raise UserError("%s needed: install them (on Debian or Ubuntu: sudo apt-get install %s)"
                        % (", ".join(packages), " ".join(packages)))
    _say(out, "installing %s (apt-get)" % " ".join(packages))
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for command in (["apt-get", "update", "-qq"],
                    ["apt-get", "install", "-y", "-qq", *packages]):
        proc = subprocess.run(prefix + command, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            tail = " ".join((proc.stderr or proc.stdout).split())[-400:]
            raise UserError("`%s` failed: %s" % (" ".join(command), tail))


def _engine_answers() -> bool:
    try:
        import docker
    except ImportError:  # before anything is installed (.ci/run): the docker CLI asks
        return shutil.which("docker") is not None and subprocess.run(
            ["docker", "info"], capture_output=True, timeout=30).returncode == 0
    try:
        docker.from_env(timeout=10).ping()
        return True
    except Exception:  # noqa: BLE001 - any failure to reach it means "not yet"
        return False


def ensure_engine(out: TextIO = sys.stdout, log: Path | None = None) -> None:
    """A Docker engine that answers this user, started (and installed) where it may be."""
    if _engine_answers():
        return
    prefix = privileged()
    if prefix is None or not debian_like() or sys.platform != "linux":
        raise UserError("no Docker engine answers, and this kit can start one only on "
                        "Debian or Ubuntu as root or with passwordless sudo. Run: %s"
                        % DOCKER_INSTALL)
    if shutil.which("dockerd") is None:
        apt_install(["docker.io"], out)
    log = log or Path(os.environ.get("TMPDIR", "/tmp")) / "envbench-dockerd.log"
    # Not root: the socket goes to this user's group, so this user can reach the engine.
    group = [] if os.geteuid() == 0 else ["--group", str(os.getgid())]
    _say(out, "starting dockerd (log: %s)" % log)
    command = " ".join(["nohup", "dockerd", *group, ">", str(log), "2>&1", "&"])
    subprocess.run(prefix + ["sh", "-c", command], check=True)
    deadline = time.monotonic() + 90
    while not _engine_answers():
        if time.monotonic() > deadline:
            tail = log.read_text()[-1500:] if log.exists() else "(no log)"
            raise UserError("dockerd did not come up within 90 s; the end of its log:\n%s"
                            % tail)
        time.sleep(0.5)
    _say(out, "the Docker engine is up")


def ensure_base(client: Any, out: TextIO = sys.stdout) -> str:
    """A Debian base image of this host's release: the engine's, a pulled one, or one built
    with debootstrap (the registry may be out of reach, the package mirror is not)."""
    from envbench.engine import connection
    from envbench.images import baseimage

    codename = baseimage.host_codename()
    local = baseimage.tag_for(codename)
    if connection.image_or_none(client, local) is not None:
        return local
    official = "debian:%s-slim" % codename
    if connection.image_or_none(client, official) is not None:
        return official
    try:
        client.images.pull(official)
        _say(out, "pulled %s" % official)
        return official
    except connection.ENGINE_ERRORS as exc:
        _say(out, "no registry answers (%s): building %s with debootstrap instead"
             % (connection.explain(exc)[:120], local))
    prefix = privileged()
    if prefix is None:
        raise UserError("no base image: the registry does not answer and debootstrap needs "
                        "root. Run: sudo %s -m envbench base-image" % sys.executable)
    if shutil.which("debootstrap") is None:
        apt_install(["debootstrap"], out)
    return baseimage.ensure(client, codename, out, prefix)


def ensure_python_base(client: Any, base: str, out: TextIO = sys.stdout) -> str:
    """The base with python3 and venv (apt, with the engine's network, once): pip stacks on
    it need no apt, so they are built with the network off."""
    from envbench.engine import connection

    tag = "envbench/python-%s" % base.replace("/", "-").replace(":", "-")
    tag = tag[:120] + ":latest"
    if connection.image_or_none(client, tag) is not None:
        return tag
    _say(out, "building %s (%s with python3 and venv)" % (tag, base))
    dockerfile = ("FROM %s\nRUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install"
                  " -y --no-install-recommends python3 python3-venv && rm -rf "
                  "/var/lib/apt/lists/*\n" % base)
    import io
    import tarfile

    spool = io.BytesIO()
    with tarfile.open(fileobj=spool, mode="w") as tar:
        info = tarfile.TarInfo("Dockerfile")
        data = dockerfile.encode()
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    spool.seek(0)
    try:
        client.images.build(fileobj=spool, custom_context=True, tag=tag, rm=True,
                             forcerm=True, pull=False)
    except connection.ENGINE_ERRORS as exc:
        raise UserError("building %s failed: %s" % (tag, connection.explain(exc)))
    return tag


def ensure_wheelhouse(torch: str, python: str, out: TextIO = sys.stdout) -> Path:
    """torch's CPU build and its dependencies for Python ``python``, fetched once by the
    host's pip (containers cannot reach the index here): PyTorch's CPU index first, then the
    host's own configuration (its index or local wheels)."""
    folder = cache.root() / ("wheelhouse-torch-%s-py%s" % (torch, python.replace(".", "")))
    if any(folder.glob("torch-%s*.whl" % torch)):
        return folder
    _say(out, "fetching torch %s (CPU build) for Python %s into %s" % (torch, python, folder))
    command = [sys.executable, "-m", "pip", "download", "-q", "torch==%s" % torch,
               "--only-binary", ":all:", "--python-version", python, "-d", str(folder)]
    proc = subprocess.run(command + ["--extra-index-url", PYTORCH_CPU_INDEX],
                          capture_output=True, text=True)
    if proc.returncode != 0:  # PyTorch's index out of reach: the host's configuration alone
        proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0 or not any(folder.glob("torch-%s*.whl" % torch)):
        tail = " ".join((proc.stderr or proc.stdout).split())[-400:]
        raise UserError("could not fetch torch %s for Python %s: %s" % (torch, python, tail))
    return folder


def kit_requirements() -> list[str]:
    """The kit's own Python packages (pyproject's dependencies) and what installs it."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib

    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml")
                            .read_text())
    return ["nox>=2024.3", "setuptools>=68", "wheel", *project["project"]["dependencies"]]


def ensure_kit_wheelhouse(python: str, out: TextIO = sys.stdout) -> Path:
    """The kit's Python packages for Python ``python``, for machines without an index (the
    local launcher's VMs): fetched once by the host's pip, refreshed when the list changes."""
    wanted = kit_requirements()
    digest = hashlib.sha256("\n".join(wanted).encode()).hexdigest()[:12]
    folder = cache.root() / ("wheelhouse-kit-py%s-%s" % (python.replace(".", ""), digest))
    if (folder / "COMPLETE").exists():
        return folder
    _say(out, "fetching the kit's Python packages for Python %s into %s" % (python, folder))
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "-q", *wanted,
                           "--only-binary", ":all:", "--python-version", python,
                           "-d", str(folder)], capture_output=True, text=True)
    if proc.returncode != 0:
        tail = " ".join((proc.stderr or proc.stdout).split())[-400:]
        raise UserError("could not fetch the kit's packages for Python %s: %s" % (python, tail))
    (folder / "COMPLETE").write_text("\n".join(wanted) + "\n")
    return folder


# What `nox -s tests` needs beyond Python packages: debootstrap (the local base image),
# Chromium (the report's screenshot test), and Debian's torch 1.13 stack, on which bench's
# tests run a second time (with jsonschema, which checks its outputs there too).
TEST_PACKAGES = {
    "debootstrap": "debootstrap", "chromium": "chromium",
    # The cloud fan-out's tests reach their sshd "VMs" with ssh and rsync.
    "openssh-client": "ssh", "rsync": "rsync",
    "python3-torch": "torch", "python3-torchvision": "torchvision", "python3-pil": "PIL",
    "python3-numpy": "numpy", "python3-pytest": "pytest", "python3-jsonschema": "jsonschema",
}


def ensure_test_tools(out: TextIO = sys.stdout) -> None:
    missing = []
    for package, probe in TEST_PACKAGES.items():
        if package in ("debootstrap", "chromium", "openssh-client", "rsync"):
            if shutil.which(probe) is None:
                missing.append(package)
        elif subprocess.run(["/usr/bin/python3", "-c", "import %s" % probe],
                            capture_output=True).returncode != 0:
            missing.append(package)
    if missing:
        apt_install(missing, out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m envbench.provision", description=__doc__)
    parser.add_argument("what", choices=("engine", "tests"),
                        help="engine: a Docker engine that answers; tests: that, and what "
                             "`nox -s tests` needs")
    args = parser.parse_args(argv)
    try:
        if args.what == "tests":
            ensure_test_tools()
        ensure_engine()
    except UserError as exc:
        print("error: %s" % exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
