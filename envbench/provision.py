"""Getting a machine ready, in one place: `.ci/run`, `./noxw -s tests` and `./noxw -s demo` all
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
import ipaddress
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import TextIO

from bench import pipconfig
from bench.pipconfig import PIP_DEFAULT_QUERY
from bench.urls import http_url, without_credentials
from envbench import stopping
from envbench.engine import reach
from envbench.user_errors import BadInput, UserError

ANSWER_TIMEOUT_S = 10  # a ping that takes longer is "not answering"
DOCKER_INSTALL = "sudo apt-get install -y docker.io && sudo systemctl start docker"


def say(out: TextIO, text: str) -> None:
    print("[setup] %s" % text, file=out, flush=True)




def pip_settings() -> dict[str, str]:
    """pip's settings by name ('index-url', 'cert', 'proxy', ...) as pip weighs them
    (bench.pipconfig reads them, for ./noxw too); a file passed over is said on stderr."""
    return pipconfig.pip_settings(warn=lambda text: say(sys.stderr, text))


def index_environment(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for the host's pip and uv: ENVBENCH_INDEX_URL, where set, is the
    index both use (PIP_INDEX_URL, UV_DEFAULT_INDEX), over their own configuration. One
    setting then reaches noxw's uv, the locks, the wheel fetch and the doctor alike."""
    env = dict(os.environ if base is None else base)
    named = env.get("ENVBENCH_INDEX_URL")
    if named and not http_url(named):
        # Said here, once, rather than as pip's traceback where pip is handed it.
        raise BadInput("ENVBENCH_INDEX_URL=%r is not an http(s) URL: give the package index's "
                       "simple URL (https://…/simple)" % without_credentials(named[:200]))
    if named:
        env["PIP_INDEX_URL"] = named
        env["UV_DEFAULT_INDEX"] = named
        env.pop("UV_INDEX_URL", None)
    return env


def package_index() -> str | None:
    """The package index this host installs from, for a machine the kit sets up elsewhere
    (a cloud VM's ./noxw, where a stock image has no pip to name one): ENVBENCH_INDEX_URL,
    else the index pip is configured with, else pip's own default. None where none is an
    http(s) URL (an offline host's local folders mean nothing on a VM), or where it is one
    only this host or its network reaches."""
    named = (os.environ.get("ENVBENCH_INDEX_URL") or os.environ.get("UV_DEFAULT_INDEX")
             or os.environ.get("PIP_INDEX_URL") or pip_settings().get("index-url"))
    if not named:
        try:
            asked = subprocess.run([sys.executable, "-c", PIP_DEFAULT_QUERY],
                                   capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            return None
        named = asked.stdout.strip() if asked.returncode == 0 else None
    if not named or not named.startswith(("https://", "http://")):
        return None
    return None if _only_here(named) else named


def _only_here(url: str) -> bool:
    """An index no other machine reaches: this host (localhost, loopback) or a private,
    link-local address (a devpi beside the kit, a mirror on the office network). A VM told
    such an index would fail at its first fetch; it keeps its own default instead."""
    try:
        host = urllib.parse.urlsplit(url).hostname or ""
    except ValueError:  # "https://[::1/simple": no VM could use it either
        return True
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False  # a name: whether it resolves elsewhere is the VM's to find out
    return address.is_loopback or address.is_private or address.is_link_local


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
    # `sudo` drops DEBIAN_FRONTEND from the environment, so it goes on the command line; no
    # stdin, so a debconf question fails at once instead of waiting unseen.
    for command in (["apt-get", "update", "-qq"],
                    ["apt-get", "install", "-y", "-qq", *packages]):
        with stopping.deferred():  # a supervisor's SIGTERM waits for dpkg to finish
            proc = subprocess.run(prefix + ["env", "DEBIAN_FRONTEND=noninteractive", *command],
                                  capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            tail = " ".join((proc.stderr or proc.stdout).split())[-400:]
            raise UserError("`%s` failed: %s" % (" ".join(command), tail))


def _engine_answers() -> bool:
    try:
        import docker
    except ImportError:  # before anything is installed (.ci/run, a VM's set-up)
        path = reach.socket_path()
        if path is not None:
            return reach.ping(path, ANSWER_TIMEOUT_S)
        return shutil.which("docker") is not None and subprocess.run(
            ["docker", "info"], capture_output=True, timeout=30).returncode == 0
    host, _ = reach.engine_host()
    try:
        # The engine the docker CLI would use: a rootless or Desktop context's socket counts.
        engine = docker.DockerClient(base_url=host, timeout=ANSWER_TIMEOUT_S) \
            if host and not os.environ.get("DOCKER_HOST") else \
            docker.from_env(timeout=ANSWER_TIMEOUT_S)
        engine.ping()
        return True
    except Exception:  # noqa: BLE001 - any failure to reach it means "not yet"
        return False


def _socket_group() -> list[str]:
    """dockerd's --group for a user who is not root: this user's own group where it is a
    private one (named after the user, as Debian and Ubuntu make them), else `docker`; never
    a shared group such as `users`, which would hand the engine (root) to everyone in it."""
    if os.geteuid() == 0:
        return []
    import grp
    import pwd
    user = pwd.getpwuid(os.getuid()).pw_name
    try:
        own = grp.getgrgid(os.getgid())
    except KeyError:
        return ["--group", "docker"]
    return ["--group", own.gr_name] if own.gr_name == user and not own.gr_mem else \
        ["--group", "docker"]


def _systemd_unit() -> bool:
    """A docker.service that systemd manages here (it is started the way it is installed)."""
    return Path("/run/systemd/system").is_dir() and shutil.which("systemctl") is not None \
        and subprocess.run(["systemctl", "cat", "docker.service"], capture_output=True,
                           timeout=20).returncode == 0


def ensure_engine(out: TextIO = sys.stdout, log: Path | None = None) -> None:
    """A Docker engine that answers this user, started (and installed) where it may be.

    Never a second dockerd: where an engine exists but this user may not reach it, or it
    does not answer, or this is a container that cannot run one, the reason and its fix."""
    if _engine_answers():
        return
    found = reach.diagnose()
    if not found.may_start_engine:
        raise UserError(found.message())
    prefix = privileged()
    if prefix is None or not debian_like() or sys.platform != "linux":
        raise UserError("%s, and this kit can start one only on Debian or Ubuntu as root or "
                        "with passwordless sudo. Run: %s" % (found.sentence, DOCKER_INSTALL))
    if shutil.which("dockerd") is None:
        apt_install(["docker.io"], out)
    if _systemd_unit():
        say(out, "starting the docker service (systemctl start docker)")
        subprocess.run(prefix + ["systemctl", "start", "docker"], check=True,
                       stdin=subprocess.DEVNULL, timeout=120)
        log_hint = "`journalctl -u docker -n 50`"
    else:
        log = log or _private_log()
        say(out, "starting dockerd (log: %s)" % log)
        # Opened here, by this user, never following a link and never an existing file:
        # root's dockerd only inherits the descriptor. Arguments as a list, no shell.
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            subprocess.Popen(prefix + ["dockerd", *_socket_group()], stdout=fd,
                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True)
        finally:
            os.close(fd)
        log_hint = str(log)
    deadline = time.monotonic() + 90
    while not _engine_answers():
        if time.monotonic() > deadline:
            after = reach.diagnose()
            if after.kind == "denied":
                raise UserError("dockerd is up, but %s" % after.message())
            raise UserError("dockerd did not come up within 90 s; see %s%s" % (
                log_hint, _tail(log) if log is not None else ""))
        time.sleep(0.5)
    say(out, "the Docker engine is up")


def _private_log() -> Path:
    """A new folder only this user can enter, for dockerd's log (a fixed name in a shared
    /tmp could be a planted link)."""
    return Path(tempfile.mkdtemp(prefix="envbench-dockerd-")) / "dockerd.log"


def _tail(log: Path) -> str:
    try:
        return "; the end of its log:\n%s" % log.read_text(errors="replace")[-1500:]
    except OSError:
        return ""


# What `./noxw -s tests` needs beyond Python packages: debootstrap (the local base image),
# Chromium (the report's screenshot test), and Debian's torch 1.13 stack, on which bench's
# tests run a second time (with jsonschema, which checks its outputs there too).
TEST_PACKAGES = {
    "debootstrap": "debootstrap", "chromium": "chromium",
    # The cloud fan-out's tests reach their sshd "VMs" with ssh and rsync.
    "openssh-client": "ssh", "rsync": "rsync",
    # The Slurm path's tests start a one-node cluster and run its cells in Podman.
    "slurm-wlm": "slurmctld", "munge": "munged", "podman": "podman",
    "python3-torch": "torch", "python3-torchvision": "torchvision", "python3-pil": "PIL",
    "python3-numpy": "numpy", "python3-pytest": "pytest", "python3-jsonschema": "jsonschema",
    # bench's tests run on every core there too (noxfile.py's tests session)
    "python3-pytest-xdist": "xdist",
}


def ensure_test_tools(out: TextIO = sys.stdout) -> None:
    missing = []
    for package, probe in TEST_PACKAGES.items():
        if not package.startswith("python3-"):  # a command, not a module
            if shutil.which(probe) is None:
                missing.append(package)
        elif subprocess.run(["/usr/bin/python3", "-c", "import %s" % probe],
                            capture_output=True).returncode != 0:
            missing.append(package)
    if missing:
        apt_install(missing, out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m envbench.provision", description=__doc__)
    parser.add_argument("what", choices=("engine", "tests", "check"),
                        help="engine: a Docker engine that answers; tests: that, and what "
                             "`./noxw -s tests` needs; check: only say whether this user reaches "
                             "an engine, and if not why (exit 1), starting nothing")
    parser.add_argument("--quiet", action="store_true", help="check: the exit code only")
    args = parser.parse_args(argv)
    if args.what == "check":
        if _engine_answers():
            return 0
        if not args.quiet:
            print("error: %s" % reach.diagnose().message(), file=sys.stderr)
        return 1
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
