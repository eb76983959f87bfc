"""Getting a machine ready, in one place: `.ci/run`, `nox -s tests` and `nox -s demo` all
call this module, so a fresh machine with only Python gets what they need the same way.

- a Docker engine: the one that answers, or, on Debian/Ubuntu as root or with passwordless
  sudo, Debian's docker.io installed and dockerd started (and said); elsewhere one sentence
  with the command to run;
- Debian packages, as root or with passwordless sudo (debootstrap, and what the tests need:
  Chromium, ssh and rsync, Debian's torch 1.13 stack).

The base images and wheelhouses built on top of this live with the images
(envbench.images.baseimage, envbench.images.wheelhouse).

Importing this module needs only the standard library: `.ci/run` runs
`python3 -m envbench.provision engine` before anything is installed.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import TextIO

from envbench.errors import UserError

DOCKER_INSTALL = "sudo apt-get install -y docker.io && sudo systemctl start docker"


def say(out: TextIO, text: str) -> None:
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
    say(out, "installing %s (apt-get)" % " ".join(packages))
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
    say(out, "starting dockerd (log: %s)" % log)
    command = " ".join(["nohup", "dockerd", *group, ">", str(log), "2>&1", "&"])
    subprocess.run(prefix + ["sh", "-c", command], check=True)
    deadline = time.monotonic() + 90
    while not _engine_answers():
        if time.monotonic() > deadline:
            tail = log.read_text()[-1500:] if log.exists() else "(no log)"
            raise UserError("dockerd did not come up within 90 s; the end of its log:\n%s"
                            % tail)
        time.sleep(0.5)
    say(out, "the Docker engine is up")


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
