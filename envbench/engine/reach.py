"""Whether this user can reach a Docker engine, and if not, why, in one sentence with its fix.

A first run on a rented machine meets three different situations that the SDK reports alike
("Error while fetching server API version"):
- an engine runs, but this user may not open its socket (outside the `docker` group, as on
  Lambda's images, Azure's HPC images and a fresh Docker install on Ubuntu);
- an engine exists (a socket that accepts connections, a running dockerd, an active docker
  service) but does not answer: starting a second dockerd beside it only fails on its pid file;
- no engine at all, on a VM (it can be installed and started) or in a container (RunPod,
  Vast.ai, a Kubernetes pod: the kit needs a machine with an engine, and says so first).

Standard library only: `envbench.provision` (run before anything is installed) uses it.
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

from envbench.user_errors import UserError

DEFAULT_SOCKET = Path("/var/run/docker.sock")
CAP_SYS_ADMIN = 21  # without it in the bounding set, a container cannot run dockerd

GROUP_FIX = ("add this user to the docker group: `sudo usermod -aG docker $USER`, then log in "
             "again (or run `newgrp docker` in this shell); or run the kit under sudo")
CONTAINER = ("this is a container, not a VM (%s): the kit needs a machine with a Docker engine "
             "(a cloud VM, or this container's host)")


@dataclass(frozen=True)
class Reach:
    """``kind``: ok, denied (socket exists, this user may not open it), silent (an engine
    exists but does not answer), context (the Docker context named does not exist),
    container (no engine, and none can run here), absent (no engine; one may be installed
    and started)."""

    kind: str
    sentence: str
    fix: str = ""

    @property
    def may_start_engine(self) -> bool:
        return self.kind == "absent"

    def message(self) -> str:
        return "%s; fix: %s" % (self.sentence, self.fix) if self.fix else self.sentence


def _docker_config_dir() -> Path:
    return Path(os.environ.get("DOCKER_CONFIG") or Path.home() / ".docker")


class MissingContext(UserError):
    """The context DOCKER_CONTEXT or config.json names has no endpoint on this machine: the
    docker CLI refuses to run, and so does the kit, rather than reach another engine."""

    def __init__(self, name: str, named_by: str):
        self.reach = Reach(
            "context", "the Docker context %s (named by %s) does not exist here" % (
                name, named_by),
            "`docker context ls` lists the contexts; %s to use this machine's engine"
            % ("unset DOCKER_CONTEXT" if named_by == "DOCKER_CONTEXT"
               else "`docker context use default`"))
        super().__init__(self.reach.message())


def _named_context() -> tuple[str | None, str]:
    """The context named, and what named it (DOCKER_CONTEXT, or config.json)."""
    name = os.environ.get("DOCKER_CONTEXT")
    if name:
        return name, "DOCKER_CONTEXT"
    try:
        with open(_docker_config_dir() / "config.json", encoding="utf-8") as f:
            name = json.load(f).get("currentContext")
    except (OSError, ValueError, AttributeError):
        name = None
    return name, "currentContext in %s" % (_docker_config_dir() / "config.json")


def current_context() -> str | None:
    """The Docker CLI's current context, as the CLI and the Docker SDK (7.2) choose it:
    DOCKER_CONTEXT, else config.json's currentContext; None for the built-in default."""
    name, _ = _named_context()
    return name if isinstance(name, str) and name and name != "default" else None


def context_host(name: str) -> str | None:
    """The docker endpoint of a context (rootless Docker and Docker Desktop each make one):
    contexts/meta/<sha256 of its name>/meta.json; None where it is not there."""
    meta = (_docker_config_dir() / "contexts" / "meta"
            / hashlib.sha256(name.encode("utf-8")).hexdigest() / "meta.json")
    try:
        with open(meta, encoding="utf-8") as f:
            host = json.load(f)["Endpoints"]["docker"]["Host"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return host if isinstance(host, str) and host else None


def context_tls(name: str) -> dict[str, object] | None:
    """A context's TLS material (contexts/tls/<id>/docker/{ca,cert,key}.pem) and whether it
    skips verification; None where it has none (a unix socket's context)."""
    context_id = hashlib.sha256(name.encode("utf-8")).hexdigest()
    folder = _docker_config_dir() / "contexts" / "tls" / context_id / "docker"
    found = {part: str(folder / ("%s.pem" % part)) for part in ("ca", "cert", "key")
             if (folder / ("%s.pem" % part)).is_file()}
    if not found:
        return None
    try:
        with open(_docker_config_dir() / "contexts" / "meta" / context_id / "meta.json",
                  encoding="utf-8") as f:
            skip = bool(json.load(f)["Endpoints"]["docker"].get("SkipTLSVerify"))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        skip = False
    return dict(found, verify=not skip)


def engine_host() -> tuple[str, str]:
    """The engine the `docker` CLI would use, and what named it: DOCKER_HOST, then the
    current context's endpoint, then this machine's default socket ("" and ""). A context
    named that does not exist is MissingContext."""
    named = os.environ.get("DOCKER_HOST", "")
    if named:
        return named, "DOCKER_HOST=%s" % named
    context = current_context()
    host = context_host(context) if context else None
    if context and host:
        return host, "the Docker context %s (%s)" % (context, host)
    if context:  # as the docker CLI, refused: not this machine's engine in its place
        raise MissingContext(context, _named_context()[1])
    return "", ""


def socket_path() -> Path | None:
    """The engine's local socket: that of DOCKER_HOST or the current context when it is a
    unix:// one, else the default; None for a remote engine (tcp://, ssh://), which only a
    connection can test."""
    host, _ = engine_host()
    if host.startswith("unix://"):
        return Path(host[len("unix://"):])
    return None if host else DEFAULT_SOCKET


def probe_socket(path: Path) -> int:
    """0 when something listens at ``path``, else the errno of connecting (EACCES: this user
    may not; ECONNREFUSED: a stale socket, nobody listens; ENOENT: none)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(5)
    try:
        sock.connect(str(path))
        return 0
    except OSError as exc:
        return exc.errno or errno.EIO
    finally:
        sock.close()


def ping(path: Path, timeout: float = 10) -> bool:
    """The engine's /_ping over its unix socket, with the standard library only (the task's
    set-up on a VM runs before anything is installed)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(str(path))
        sock.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
        answer = sock.recv(4096)
    except OSError:
        return False
    finally:
        sock.close()
    return answer.startswith(b"HTTP/1.") and b" 200 " in answer.split(b"\r\n", 1)[0]


def dockerd_pids() -> list[int]:
    """dockerd processes on this machine (any user's), read from /proc."""
    pids = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if (entry / "comm").read_text().strip() == "dockerd":
                pids.append(int(entry.name))
        except (OSError, ValueError):
            continue
    return sorted(pids)


def docker_service_active() -> bool:
    if not Path("/run/systemd/system").is_dir() or shutil.which("systemctl") is None:
        return False
    return subprocess.run(["systemctl", "is-active", "--quiet", "docker.service"],
                          capture_output=True, timeout=20).returncode == 0


def container_marker() -> str | None:
    """What says this machine is a container, or None."""
    for marker in ("/.dockerenv", "/run/.containerenv"):
        if os.path.exists(marker):
            return marker
    try:
        cgroup = Path("/proc/1/cgroup").read_text()
    except OSError:
        return None
    for word in ("kubepods", "docker", "containerd", "libpod", "lxc"):
        if word in cgroup:
            return "a %s cgroup" % word
    return None


def can_run_dockerd() -> bool:
    """A privileged container (CAP_SYS_ADMIN in its bounding set) can run its own dockerd,
    as CI machines that are themselves containers do; an ordinary one cannot."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapBnd:"):
                return bool(int(line.split()[1], 16) >> CAP_SYS_ADMIN & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


def diagnose() -> Reach:
    """Why no engine answers this user (call it after a failed ping)."""
    try:
        path = socket_path()
        _, named_by = engine_host()
    except MissingContext as exc:
        return exc.reach
    undo = ("unset DOCKER_HOST" if os.environ.get("DOCKER_HOST") else
            "`docker context use default`")
    if path is None:
        return Reach("silent", "%s does not answer" % named_by,
                     "check that engine, or %s to use this machine's" % undo)
    code = probe_socket(path)
    if code == errno.EACCES:
        return Reach("denied", "this user cannot reach the Docker engine at %s (permission "
                     "denied: the socket belongs to group %s)" % (path, _group_of(path)),
                     GROUP_FIX)
    pids = dockerd_pids()
    if code != 0 and named_by:
        return Reach("silent", "%s: no engine listens there%s" % (
            named_by, " (a dockerd runs here, pid %s, at its own socket)"
            % ", ".join(map(str, pids)) if pids else ""),
            "%s to use this machine's engine, or point it at a running one" % undo)
    evidence = []
    if code == 0:
        evidence.append("its socket %s accepts connections" % path)
    if pids:
        evidence.append("dockerd runs (pid %s)" % ", ".join(map(str, pids)))
    if docker_service_active():
        evidence.append("the docker service is active")
    if evidence:
        return Reach("silent", "a Docker engine is there (%s) but does not answer"
                     % "; ".join(evidence),
                     "see `systemctl status docker` and `journalctl -u docker -n 50` (or "
                     "dockerd's own log); restart it with `sudo systemctl restart docker`")
    marker = container_marker()
    if marker and not can_run_dockerd():
        return Reach("container", CONTAINER % marker)
    where = ("a stale socket at %s that nobody listens on" % path if code == errno.ECONNREFUSED
             else "no socket at %s" % path)
    return Reach("absent", "no Docker engine on this machine (%s, no dockerd)" % where)


def _group_of(path: Path) -> str:
    try:
        import grp
        gid = path.stat().st_gid
        try:
            return grp.getgrgid(gid).gr_name
        except KeyError:
            return str(gid)
    except OSError:
        return "?"
