"""The local launcher as a user who is not root, as on a developer's machine, and the VMs'
host keys checked.

As root, the tests could not see what a user's launcher met: the VM's sshd refused an
authorized_keys owned by the user (StrictModes), and what the VM's root wrote into the VM's
home (a folder of this machine) could not be removed afterwards. Here a real user in the
docker group runs `envbench cloud --launcher local`, and the test checks that the cell ran,
its result came home, and the VM and every file of its home are gone.
"""
from __future__ import annotations

import io
import os
import pwd
import shutil
import subprocess
import sysconfig
import tempfile
from pathlib import Path

import pytest
from e2e_support import ROOT
from test_cloud_fanout import MATRIX, _vms

from envbench import cache
from envbench.cloud import local

pytestmark = pytest.mark.e2e

USER = "envbench-launcher"
SYSTEM_PYTHON = "/usr/bin/python3"  # this test's interpreter may live in root's home
SITE = Path(sysconfig.get_paths()["purelib"])  # the test environment's packages, the kit's too
# -S: none of the system's packages (Debian's own typing_extensions), only the test's.
RUN_KIT = ("import runpy, site, sys; site.addsitedir(sys.argv.pop(1)); "
           "runpy.run_module('envbench', run_name='__main__', alter_sys=True)")


def _reachable_by_others(path: Path) -> bool:
    """Whether another user can read ``path`` (every folder above it searchable)."""
    for folder in [path, *path.parents]:
        mode = folder.stat().st_mode
        if not mode & 0o001 or (folder == path and not mode & 0o004):
            return False
    return True


@pytest.fixture
def launcher_user(client):
    if os.getuid() != 0:
        pytest.skip("creating a user for the test needs root (CI runs as root)")
    if not Path(SYSTEM_PYTHON).exists():
        pytest.skip("no %s to run the kit as %s" % (SYSTEM_PYTHON, USER))
    for needed in (ROOT, SITE):
        if not _reachable_by_others(needed):
            pytest.skip("%s is not readable by other users here: the kit cannot run as %s"
                        % (needed, USER))
    subprocess.run(["userdel", USER], capture_output=True)
    home = Path(tempfile.mkdtemp(prefix="envbench-launcher-"))
    # runuser sets HOME from the account, as a login would: the account's home is this folder.
    subprocess.run(["useradd", "--no-create-home", "--home-dir", str(home), "--shell",
                    "/bin/sh", "-G", "docker", USER], check=True, capture_output=True)
    try:
        entry = pwd.getpwnam(USER)
        os.chown(home, entry.pw_uid, entry.pw_gid)
        home.chmod(0o755)
        yield entry, home
    finally:
        subprocess.run(["userdel", USER], capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


def _owned_by_others(folder: Path, uid: int) -> list[str]:
    found = []
    for path in [folder, *folder.rglob("*")]:
        if path.lstat().st_uid != uid:
            found.append(str(path))
    return found


def test_a_user_who_is_not_root_runs_the_local_fan_out_and_leaves_nothing(
        client, first_run, e2e_env, launcher_user):
    entry, home = launcher_user
    # What the root test run already fetched, handed to the user: the kit's wheelhouse (with
    # its manifest) and nothing else of root's cache.
    made = local.make(io.StringIO())
    user_cache = home / "cache"
    shutil.copytree(made.wheelhouse, user_cache / made.wheelhouse.name)
    (home / "locks").mkdir()
    matrix = home / "matrix.yaml"
    matrix.write_text(MATRIX)
    for path in [home, *home.rglob("*")]:
        os.chown(path, entry.pw_uid, entry.pw_gid, follow_symlinks=False)
    env = dict(e2e_env, HOME=str(home), USER=USER, LOGNAME=USER,
               ENVBENCH_CACHE=str(user_cache), ENVBENCH_LOCKS=str(home / "locks"))
    env.pop("SUDO_UID", None)
    env.pop("SUDO_GID", None)
    proc = subprocess.run(["runuser", "-u", USER, "--", SYSTEM_PYTHON, "-S", "-c", RUN_KIT,
                           str(SITE), "cloud", "--launcher", "local", "--matrix", str(matrix),
                           "--target", "vm-a", "--synthetic", "--reports", str(home / "reports")],
                          cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=1500)
    out = proc.stdout
    print(out)
    assert proc.returncode == 0, out[-4000:]
    assert "Traceback" not in out
    assert "results home via rsync over ssh" in out and "1 result (1 ok)" in out
    results = list((home / "reports" / "results").glob("*.json"))
    assert len(results) == 1
    # The VM, its cells and its home are gone, and nothing under the user's folder belongs
    # to anyone else (the VM's root wrote into its home; the launcher had that emptied).
    assert not _vms(client)
    vms = user_cache / "local-vms" / "vms"
    assert not vms.exists() or not list(vms.iterdir()), list(vms.iterdir())
    assert _owned_by_others(home, entry.pw_uid) == []
    assert cache.root() != user_cache  # the test's own cache was not the one used


def test_a_vm_answers_only_with_the_host_key_made_for_it(client, base_tag, tmp_path):
    """ssh checks each VM's host key, made by the launcher for that VM: the same port with
    another key (a VM in its place) is refused."""
    launcher = local.make(io.StringIO())
    lines: list[str] = []
    cluster = "envbench-test-hostkey"
    try:
        remote = launcher._start(cluster, lines.append)
        ok = subprocess.run([*remote.ssh, cluster, "echo", "in"], capture_output=True,
                            text=True, timeout=60)
        assert ok.returncode == 0 and ok.stdout.strip() == "in", ok.stderr
        known = launcher.state / "ssh" / ("%s.known_hosts" % cluster)
        other = tmp_path / "other"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)],
                       check=True)
        known.write_text("%s %s\n" % (cluster, " ".join(
            Path("%s.pub" % other).read_text().split()[:2])))
        refused = subprocess.run([*remote.ssh, cluster, "echo", "in"], capture_output=True,
                                 text=True, timeout=60)
        assert refused.returncode != 0 and "in" not in refused.stdout
        assert "Host key verification failed" in refused.stderr, refused.stderr
    finally:
        launcher.down(cluster)
    assert not launcher.home(cluster).exists()
    assert not (launcher.state / "hostkeys" / cluster).exists()
