"""Local "VMs" for the fan-out: sshd containers, reached over ssh on 127.0.0.1 only.

The same task as SkyPilot's runs here the same way: the workdir and file mounts are synced
over ssh (rsync), setup and the run script run over ssh under the task's env, and results come
back over a per-cluster ssh config alias. It is how the fan-out is tested without a cloud,
and how a user can rehearse a cloud matrix before paying for one (`--launcher local`).

What differs from a cloud VM, and why:
- The VM's cells run on this machine's Docker engine (its socket is mounted), as sibling
  containers: so the VM's home is a folder of this machine mounted at the same path, and
  the paths bench mounts into cells mean the same on both sides.
- The VM has no package index (containers here cannot reach one): pip installs the kit's
  Python packages from a wheelhouse this machine fetched (PIP_NO_INDEX, PIP_FIND_LINKS).
- Pools: infra ``ssh/local`` is the only pool; any other infra, and any accelerators, fail to
  provision, as SkyPilot fails for a pool or GPU it does not have.
"""
from __future__ import annotations

import hashlib
import io
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from envbench import cache
from envbench.cloud.launcher import LineSink, ProvisionFailed, Remote
from envbench.engine import connection, textbuild
from envbench.images import baseimage, wheelhouse
from envbench.user_errors import UserError

POOL = "local"
LABEL = "envbench.cluster"
OWNER_LABEL = "envbench.launcher-pid"  # the fan-out process whose VM it is (see sweep)
SSH_WAIT_S = 60
ENV_FILE = "~/.envbench-task-env"  # the task's envs and secrets, mode 600 (see _send_env)
# root's home becomes $1 (usermod refuses while root runs a process, as this shell does).
SET_HOME_AND_SERVE = ('sed -i "s#^root:\\([^:]*\\):0:0:\\([^:]*\\):[^:]*:#root:\\1:0:0:\\2:$1:#" '
                      '/etc/passwd && exec /usr/sbin/sshd -D -e')

# Each VM gets its own host key and the launcher's public key when it is created (see
# _secrets): the image has no host key of its own, and the authorized key lives outside the
# home, owned by the VM's root, whoever owns the home on this machine (sshd's StrictModes
# refuses a key file that another user owns, which a non-root launcher's would be).
HOST_KEY = "/etc/ssh/ssh_host_ed25519_key"
AUTHORIZED_KEYS = "/etc/ssh/envbench_authorized_keys"
IMAGE_RECIPE = """FROM {base}
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \\
      openssh-server rsync python3-pip ca-certificates && rm -rf /var/lib/apt/lists/* \\
 && mkdir -p /run/sshd && rm -f /etc/ssh/ssh_host_* \\
 && printf 'PermitRootLogin prohibit-password\\nPasswordAuthentication no\\nUseDNS no\\n\\
HostKey {host_key}\\nAuthorizedKeysFile {authorized_keys}\\n' \\
      > /etc/ssh/sshd_config.d/envbench.conf
CMD ["/usr/sbin/sshd", "-D", "-e"]
"""


def ensure_image(client: Any, base: str, out: TextIO = sys.stdout) -> str:
    """The VM image: the python base with sshd and rsync (apt, once; cached by recipe)."""
    recipe = IMAGE_RECIPE.format(base=base, host_key=HOST_KEY, authorized_keys=AUTHORIZED_KEYS)
    tag = "envbench/sshd-vm:%s" % hashlib.sha256(recipe.encode()).hexdigest()[:16]
    if connection.image_or_none(client, tag) is not None:
        return tag
    print("building %s (sshd and rsync on %s): the local launcher's VM" % (tag, base),
          file=out, flush=True)
    try:
        textbuild.build(client, recipe, tag)
    except connection.ENGINE_ERRORS as exc:
        raise UserError("building the local VM image failed: %s" % connection.explain(exc))
    return tag


def _quote_remote(path: str) -> str:
    """A remote path for a shell: ``~/`` stays unquoted so the remote shell expands it."""
    if path.startswith("~/"):
        return "~/" + shlex.quote(path[2:])
    return shlex.quote(path)


class LocalLauncher:
    name = "local sshd containers"

    def __init__(self, client: Any, image: str, state: Path, wheelhouse: Path,
                 out: TextIO = sys.stdout) -> None:
        self.client = client
        self.image = image
        self.state = state.resolve()
        self.wheelhouse = wheelhouse.resolve()
        self.out = out
        self.key = self.state / "id_ed25519"
        self._jobs: dict[str, subprocess.Popen[str]] = {}
        self._lock = threading.Lock()
        self.state.mkdir(parents=True, exist_ok=True)
        if not self.key.exists():
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C",
                            "envbench-local-launcher", "-f", str(self.key)], check=True)

    # --- the machine's own environment (what a VM image would carry)
    def machine_env(self) -> dict[str, str]:
        return {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(self.wheelhouse),
                "PIP_BREAK_SYSTEM_PACKAGES": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                "PIP_ROOT_USER_ACTION": "ignore"}

    def home(self, cluster: str) -> Path:
        return self.state / "vms" / cluster

    def remote(self, cluster: str) -> Remote:
        return Remote(cluster, ["ssh", "-F", str(self.state / "ssh" / cluster)])

    # --- Launcher
    def launch(self, cluster: str, task: dict[str, Any], out: LineSink) -> Remote:
        infra = (task.get("resources") or {}).get("infra") or ""
        accelerators = (task.get("resources") or {}).get("accelerators")
        if infra != "ssh/%s" % POOL:
            raise ProvisionFailed("no SSH node pool serves infra %r (the local launcher has "
                                  "one pool: ssh/%s)" % (infra or "any cloud", POOL))
        if accelerators:
            raise ProvisionFailed("no node in pool %s has %s" % (POOL, accelerators))
        remote = self._start(cluster, out)
        self._sync(remote, task, out)
        envs = dict(self.machine_env(), **{k: str(v) for k, v in
                                            (task.get("envs") or {}).items()})
        envs.update({k: str(v) for k, v in (task.get("secrets") or {}).items()})
        self._send_env(remote, envs)
        if task.get("setup"):
            out("running setup")
            code = self._ssh(remote, envs, task["setup"], out)
            if code != 0:
                raise ProvisionFailed("setup exited with code %d on %s" % (code, cluster))
        out("running the task")
        with self._lock:
            self._jobs[cluster] = self._popen(remote, envs, task["run"])
        return remote

    def wait(self, cluster: str, out: LineSink) -> int:
        proc = self._jobs[cluster]
        assert proc.stdout is not None
        for line in proc.stdout:
            out(line.rstrip("\n"))
        return proc.wait()

    def down(self, cluster: str) -> None:
        with self._lock:
            proc = self._jobs.pop(cluster, None)
        # The VM, then the cells it started on the shared engine (a real VM's go with it),
        # then its home (a real VM's disk goes with it too).
        for label in ("%s=%s" % (LABEL, cluster), "envbench.host=%s" % cluster):
            for container in self.client.containers.list(all=True,
                                                         filters={"label": label}):
                container.remove(force=True)
        if proc is not None and proc.poll() is None:
            proc.kill()
        self._remove_home(cluster)
        for leftover in (self.state / "hostkeys" / cluster,
                         self.state / "hostkeys" / ("%s.pub" % cluster)):
            leftover.unlink(missing_ok=True)

    def _remove_home(self, cluster: str) -> None:
        """The VM's home, as its disk would go. What the VM's root wrote there is root's on
        this machine too: a launcher that is not root has it emptied by a throwaway
        container first (as root, no network, only that folder mounted)."""
        home = self.home(cluster)
        if not home.is_dir():
            return
        if os.getuid() != 0:
            try:
                self.client.containers.run(
                    self.image, ["find", "/home-to-empty", "-mindepth", "1", "-delete"],
                    entrypoint=[], user="0:0", network_mode="none", remove=True,
                    volumes={str(home): {"bind": "/home-to-empty", "mode": "rw"}})
            except connection.ENGINE_ERRORS as exc:
                print("could not empty %s: %s" % (home, connection.explain(exc)),
                      file=self.out, flush=True)
        shutil.rmtree(home, ignore_errors=True)

    def _host_key(self, cluster: str) -> str:
        """A new host key for this VM, made here; its public half (for known_hosts)."""
        key = self.state / "hostkeys" / cluster
        key.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        for old in (key, Path("%s.pub" % key)):
            old.unlink(missing_ok=True)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", cluster, "-f",
                        str(key)], check=True, capture_output=True)
        return " ".join(Path("%s.pub" % key).read_text().split()[:2])

    def _secrets(self, cluster: str) -> bytes:
        """A tar of the VM's host key and the launcher's public key, owned by the VM's root."""
        spool = io.BytesIO()
        with tarfile.open(fileobj=spool, mode="w") as tar:
            for path, data, mode in (
                    (HOST_KEY, (self.state / "hostkeys" / cluster).read_bytes(), 0o600),
                    (AUTHORIZED_KEYS, Path(str(self.key) + ".pub").read_bytes(), 0o644)):
                info = tarfile.TarInfo(path.lstrip("/"))
                info.size, info.mode, info.uid, info.gid = len(data), mode, 0, 0
                tar.addfile(info, io.BytesIO(data))
        return spool.getvalue()

    def sweep(self) -> list[str]:
        """VMs left by a launcher process that is gone (killed before its teardown): taken
        down with their cells and homes. A VM whose launcher still runs is another fan-out's,
        left alone."""
        gone = []
        for container in self.client.containers.list(all=True, filters={"label": LABEL}):
            labels = container.labels or {}
            if _alive(labels.get(OWNER_LABEL)):
                continue
            cluster = labels.get(LABEL) or container.name
            self.down(cluster)
            gone.append(cluster)
        if gone:
            print("removed %d local VM(s) left by an earlier run: %s"
                  % (len(gone), ", ".join(sorted(gone))), file=self.out, flush=True)
        return gone

    def clusters(self) -> list[str]:
        return sorted({(c.labels or {}).get(LABEL) or c.name for c in
                       self.client.containers.list(all=True, filters={"label": LABEL})})

    def costs(self, clusters: list[str]) -> dict[str, float]:
        return {}  # no provider's accounting here: the fan-out estimates from price x time

    # --- the steps
    def _start(self, cluster: str, out: LineSink) -> Remote:
        home = self.home(cluster)
        for other in self.client.containers.list(all=True,
                                                 filters={"label": "%s=%s" % (LABEL, cluster)}):
            owner = (other.labels or {}).get(OWNER_LABEL)
            if owner != str(os.getpid()) and _alive(owner):
                raise ProvisionFailed("%s is in use by another fan-out (pid %s); its VM is "
                                      "left alone" % (cluster, owner))
        self.down(cluster)  # a VM of that name left by a killed run (its home goes too)
        home.mkdir(parents=True, exist_ok=True)  # a new VM starts empty
        home.chmod(0o755)
        host_public = self._host_key(cluster)
        try:
            # The VM's home is this machine's folder at the same path (see the docstring).
            container = self.client.containers.create(
                self.image, ["sh", "-c", SET_HOME_AND_SERVE, "vm", str(home)],
                name=cluster, labels={LABEL: cluster, OWNER_LABEL: str(os.getpid())},
                hostname=cluster,
                # Published on 127.0.0.1 only: nothing talks to a container's own address.
                ports={"22/tcp": ("127.0.0.1", None)},
                volumes={str(home): {"bind": str(home), "mode": "rw"},
                         str(self.wheelhouse): {"bind": str(self.wheelhouse), "mode": "ro"},
                         "/var/run/docker.sock": {"bind": "/var/run/docker.sock",
                                                  "mode": "rw"}})
            container.put_archive("/", self._secrets(cluster))
            container.start()
            container.reload()
            published = (container.attrs["NetworkSettings"]["Ports"] or {}).get("22/tcp")
            if not published:
                raise ProvisionFailed("the VM container stopped at once (%s): %s" % (
                    container.status, " ".join(container.logs().decode(errors="replace")
                                               .split())[-300:]))
            port = published[0]["HostPort"]
        except connection.ENGINE_ERRORS as exc:
            raise ProvisionFailed(connection.explain(exc))
        config = self.state / "ssh" / cluster
        config.parent.mkdir(parents=True, exist_ok=True)
        known = self.state / "ssh" / ("%s.known_hosts" % cluster)
        # The VM's host key is checked: it was made here for this VM (a port on 127.0.0.1
        # that another process took would not have it).
        known.write_text("%s %s\n" % (cluster, host_public))
        config.write_text("\n".join([
            "Host %s" % cluster, "  HostName 127.0.0.1", "  Port %s" % port, "  User root",
            "  IdentityFile %s" % self.key, "  IdentitiesOnly yes", "  BatchMode yes",
            "  HostKeyAlias %s" % cluster, "  StrictHostKeyChecking yes",
            "  UserKnownHostsFile %s" % known, "  LogLevel ERROR",
            "  ServerAliveInterval 15", ""]))
        remote = self.remote(cluster)
        out("up: %s (ssh %s, port %s on 127.0.0.1)" % (container.short_id, cluster, port))
        deadline = time.monotonic() + SSH_WAIT_S
        while True:
            probe = subprocess.run([*remote.ssh, cluster, "true"], capture_output=True,
                                   text=True, timeout=30, start_new_session=True)
            if probe.returncode == 0:
                return remote
            if time.monotonic() > deadline:
                raise ProvisionFailed("sshd on %s did not answer in %d s: %s"
                                      % (cluster, SSH_WAIT_S, probe.stderr.strip()[-300:]))
            time.sleep(0.5)

    def _sync(self, remote: Remote, task: dict[str, Any], out: LineSink) -> None:
        """The workdir (what git does not ignore, as SkyPilot syncs it), then file mounts."""
        ssh = " ".join(map(shlex.quote, remote.ssh))
        steps = []
        if task.get("workdir"):
            steps.append(["rsync", "-a", "--delete", "--exclude", ".git",
                          "--filter", ":- .gitignore", "-e", ssh,
                          str(task["workdir"]).rstrip("/") + "/",
                          "%s:%s/" % (remote.alias, remote.workdir)])
        for dest, src in (task.get("file_mounts") or {}).items():
            parent = os.path.dirname(dest.rstrip("/")) or "."
            subprocess.run([*remote.ssh, remote.alias, "mkdir -p %s" % _quote_remote(parent)],
                           capture_output=True, check=False, start_new_session=True)
            source = str(src).rstrip("/") + ("/" if os.path.isdir(src) else "")
            steps.append(["rsync", "-a", "-e", ssh, source,
                          "%s:%s%s" % (remote.alias, dest.rstrip("/"),
                                       "/" if os.path.isdir(src) else "")])
        for command in steps:
            proc = subprocess.run(command, capture_output=True, text=True,
                                  start_new_session=True)
            if proc.returncode != 0:
                raise ProvisionFailed("syncing %s failed: %s"
                                      % (command[-2], " ".join(proc.stderr.split())[-300:]))
        out("synced the workdir%s" % (" and %d file mounts" % len(task["file_mounts"])
                                      if task.get("file_mounts") else ""))

    def _send_env(self, remote: Remote, envs: dict[str, str]) -> None:
        """The task's environment, secrets included, into a file only the VM's user reads,
        sent over ssh's stdin: never on a command line, where `ps` on either side shows it."""
        exports = "".join("export %s=%s\n" % (k, shlex.quote(v)) for k, v in envs.items())
        proc = subprocess.run([*remote.ssh, remote.alias,
                               "umask 077 && cat > %s" % ENV_FILE], input=exports, text=True,
                              capture_output=True, timeout=60, start_new_session=True)
        if proc.returncode != 0:
            raise ProvisionFailed("could not hand the task's environment to %s: %s"
                                  % (remote.alias, " ".join(proc.stderr.split())[-300:]))

    def _command(self, envs: dict[str, str], script: str) -> str:
        del envs  # in ENV_FILE (see _send_env)
        return ". %s && cd ~/sky_workdir && bash -c %s" % (ENV_FILE, shlex.quote(script))

    def _popen(self, remote: Remote, envs: dict[str, str],
               script: str) -> subprocess.Popen[str]:
        # Its own session: a Ctrl-C at the terminal reaches the kit, which tears the VM down;
        # an ssh that died of it first would look like a job that failed.
        return subprocess.Popen([*remote.ssh, remote.alias, self._command(envs, script)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                stdin=subprocess.DEVNULL, errors="replace",
                                start_new_session=True)

    def _ssh(self, remote: Remote, envs: dict[str, str], script: str, out: LineSink) -> int:
        proc = self._popen(remote, envs, script)
        assert proc.stdout is not None
        for line in proc.stdout:
            out(line.rstrip("\n"))
        return proc.wait()


def _alive(pid_text: str | None) -> bool:
    """Whether the launcher process that started a VM still runs on this machine."""
    try:
        os.kill(int(pid_text or ""), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True  # another user's process: it exists
    return True


def make(out: TextIO = sys.stdout) -> LocalLauncher:
    """The local launcher with its image and wheelhouse (built and fetched once)."""
    missing = [tool for tool in ("ssh", "ssh-keygen", "rsync") if shutil.which(tool) is None]
    if missing:
        raise UserError("the local launcher reaches its VMs with ssh and rsync; %s missing "
                        "here (on Debian or Ubuntu: sudo apt-get install openssh-client rsync)"
                        % ", ".join(missing))
    client = connection.connect()
    base = os.environ.get("ENVBENCH_PYTHON_BASE") or baseimage.ensure_python_base(
        client, baseimage.ensure_base(client, out), out)
    image = ensure_image(client, base, out)
    python = client.containers.run(image, ["python3", "-c", "import sys; print('%d.%d' "
                                                           "% sys.version_info[:2])"],
                                   remove=True).decode().strip()
    kit_wheels = wheelhouse.ensure_kit_wheelhouse(python, out)
    launcher = LocalLauncher(client, image, cache.root() / "local-vms", kit_wheels, out)
    launcher.sweep()
    return launcher
