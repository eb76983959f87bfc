"""./noxw on a machine that stands in for a freshly rented VM: Debian's python3 without venv,
ensurepip or pip, a non-root user with passwordless sudo (as on Lambda's images), the host's
engine socket mounted with or without group access, and (so that the package index answers
inside, as it does on a real VM) the host's CA bundle named in SSL_CERT_FILE and PIP_CERT.

What it shows: the one command starts from nothing (uv fetched and hash-checked, nox
installed, the session's venv made by uv); with group access the doctor reaches the engine;
without it the doctor and the demo name the usermod fix, and the demo starts no second
dockerd (it used to install docker.io through sudo and wait 90 s for a dockerd that could not
start); in a container without an engine, the first line says it is a container, not a VM.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from e2e_support import ROOT

from envbench import provision
from envbench.engine import reach, textbuild

pytestmark = pytest.mark.e2e

USER = "vmuser"
RECIPE = """FROM {base}
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y \\
      --no-install-recommends python3 ca-certificates sudo && rm -rf /var/lib/apt/lists/* \\
 && useradd --create-home --shell /bin/sh --uid 4242 {user} \\
 && echo '{user} ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/{user}
USER {user}
WORKDIR /home/{user}
"""


def _ca_bundle() -> str | None:
    """The CA bundle pip is configured with here (its `cert`), else SSL_CERT_FILE's."""
    proc = subprocess.run([sys.executable, "-m", "pip", "config", "list"],
                          capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        key, _, value = line.partition("=")
        if key.endswith(".cert") and value.strip("'\""):
            return value.strip("'\"")
    return os.environ.get("SSL_CERT_FILE")


@pytest.fixture(scope="module")
def vm_image(client, base_tag) -> str:
    recipe = RECIPE.format(base=base_tag, user=USER)
    tag = "envbench-test/fresh-vm:%s" % hashlib.sha256(recipe.encode()).hexdigest()[:12]
    if not client.images.list(name=tag):
        textbuild.build(client, recipe, tag)
    return tag


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """The repository as a clone has it (tracked and new files), owned by the VM's user."""
    folder = tmp_path_factory.mktemp("vm") / "envbench"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, files):
        source = ROOT / name
        if source.is_symlink():  # as a clone has it (envbench/images/templates is one)
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            os.symlink(os.readlink(source), folder / name)
        elif source.is_file():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, folder / name)
    cache = folder.parent / "cache"
    cache.mkdir()
    subprocess.run(["chown", "-R", "4242:4242", str(folder.parent)], check=True)
    return folder


def _run(client, image: str, checkout: Path, script: str, socket: bool, group: bool,
         timeout: int = 900, index: bool = True, cache: Path | None = None,
         at_host_paths: bool = False) -> tuple[int, str, float]:
    """``index``: name the host's package index in ENVBENCH_INDEX_URL, as the cloud fan-out
    does for its VMs. ``cache``: the VM's ~/.cache (default: the one the module shares).
    ``at_host_paths``: the checkout and the cache (ENVBENCH_CACHE) at the paths they have
    here, so that the folders a cell's container mounts from the VM are the host engine's
    too (on a real VM the engine and the kit share one file system)."""
    cache = cache or checkout.parent / "cache"
    inside = (checkout, cache) if at_host_paths else \
        (Path("/home/%s/envbench" % USER), Path("/home/%s/.cache" % USER))
    command = ["docker", "run", "--rm", "--network", "bridge",
               "-v", "%s:%s" % (checkout, inside[0]), "-v", "%s:%s" % (cache, inside[1])]
    if at_host_paths:
        command += ["-e", "ENVBENCH_CACHE=%s" % (inside[1] / "envbench")]
    if socket:
        command += ["-v", "/var/run/docker.sock:/var/run/docker.sock"]
    if group:
        command += ["--group-add", str(os.stat("/var/run/docker.sock").st_gid)]
    bundle = _ca_bundle()
    if bundle:
        command += ["-v", "%s:/etc/envbench-ca.pem:ro" % bundle,
                    "-e", "SSL_CERT_FILE=/etc/envbench-ca.pem",
                    "-e", "PIP_CERT=/etc/envbench-ca.pem"]
    url = provision.package_index()
    if index and url:
        command += ["-e", "ENVBENCH_INDEX_URL=%s" % url]
    started = time.monotonic()
    proc = subprocess.run(command + [image, "sh", "-c", "cd %s && %s" % (inside[0], script)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout)
    return proc.returncode, proc.stdout, time.monotonic() - started


def test_the_image_is_a_bare_vm(client, vm_image, checkout):
    code, out, _ = _run(client, vm_image, checkout, "python3 -c 'import ensurepip' ; "
                        "python3 -m pip --version ; python3 -m venv /tmp/v ; id -u",
                        socket=False, group=False)
    assert "No module named 'ensurepip'" in out and "No module named pip" in out
    assert "apt install python3" in out  # Debian's venv refuses without python3-venv
    assert "4242" in out  # not root


def test_with_nothing_set_it_gets_the_distributions_pip_and_reaches_the_doctor(
        client, vm_image, checkout, tmp_path):
    """A stock VM: no pip, no index named, passwordless sudo. ./noxw says it installs
    Debian's python3-pip, asks it for its default index and goes on to the doctor."""
    cache = tmp_path / "cache"  # its own: the uv and nox fetched here are under test
    cache.mkdir()
    subprocess.run(["chown", "4242:4242", str(cache)], check=True)
    code, out, took = _run(client, vm_image, checkout,
                           "./noxw -s doctor -- --kind cpu --synthetic; echo doctor-exit=$?; "
                           "python3 -m pip --version; rm -rf .nox",  # the others' cold start
                           socket=True, group=True, index=False, cache=cache)
    assert ("[noxw] no pip here to name the package index: installing the distribution's "
            "python3-pip (sudo -n apt-get update -qq && sudo -n env "
            "DEBIAN_FRONTEND=noninteractive apt-get install") in out, out[-3000:]
    assert "[noxw] fetching uv 0.13.9" in out, out[-3000:]
    assert re.search(r"✔ Docker engine \S+ answers as this user, without sudo", out), out[-3000:]
    assert re.search(r"\n\d+ check\(s\), \d+ to fix", out), out[-3000:]
    assert re.search(r"doctor-exit=[01]\b", out) and "Traceback" not in out
    assert re.search(r"^pip \S+ from /usr/lib/python3/dist-packages/pip", out, re.M), out[-1000:]
    print("stock VM, nothing set: ./noxw -s doctor cold in %.1f s (apt's pip included)" % took)


def test_without_pip_sudo_or_an_index_it_says_what_to_set(client, vm_image, checkout,
                                                          tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    subprocess.run(["chown", "4242:4242", str(cache)], check=True)
    # A user without passwordless sudo: the distribution's pip cannot be had.
    code, out, _ = _run(client, vm_image, checkout, "sudo -n rm /etc/sudoers.d/vmuser && "
                        "./noxw --version", socket=False, group=False, index=False,
                        cache=cache)
    assert code != 0
    assert ("no package index is configured here, and no pip is installed to name its "
            "default (nor could this user install the distribution's python3-pip without a "
            "password): set ENVBENCH_INDEX_URL") in out, out[-2000:]
    assert "installing the distribution's python3-pip" not in out
    assert "Traceback" not in out
    code, out, _ = _run(client, vm_image, checkout, "ENVBENCH_INDEX_URL=ftp://mirror/simple "
                        "./noxw --version", socket=False, group=False, index=False,
                        cache=cache)
    assert code != 0
    assert "ENVBENCH_INDEX_URL='ftp://mirror/simple' is not an http(s) URL" in out, out[-2000:]


def test_noxw_starts_from_nothing_and_the_doctor_reaches_the_engine(client, vm_image,
                                                                    checkout):
    code, out, cold = _run(client, vm_image, checkout, "./noxw --version && ./noxw -s doctor",
                           socket=True, group=True)
    assert "[noxw] fetching uv 0.13.9" in out, out[-3000:]
    assert "installing nox (bootstrap/noxw-requirements.txt, hashes checked)" in out
    assert "Creating virtual environment (uv)" in out
    assert re.search(r"✔ Docker engine \S+ answers as this user, without sudo", out), out[-3000:]
    assert "Traceback" not in out
    # The doctor ran all its checks and counted them; some fail here (no GPU, no registry).
    assert re.search(r"\n\d+ check\(s\), \d+ to fix", out)
    code, warm_out, warm = _run(client, vm_image, checkout, "./noxw --version",
                                socket=True, group=True)
    assert code == 0 and "[noxw]" not in warm_out, warm_out  # nothing fetched again
    print("noxw cold (uv, nox, the doctor's venv and checks): %.1f s; warm `./noxw "
          "--version`: %.1f s (both with `docker run`'s start)" % (cold, warm))
    print(out[out.index("envbench doctor"):])


def test_without_group_access_it_names_the_usermod_fix_and_starts_no_dockerd(
        client, vm_image, checkout):
    code, out, took = _run(client, vm_image, checkout,
                           "./noxw -s doctor; ./noxw -s demo; echo demo-exit=$?; "
                           "dpkg -s docker.io >/dev/null 2>&1 && echo docker.io-installed; "
                           "grep -lx dockerd /proc/[0-9]*/comm 2>/dev/null || echo no-dockerd",
                           socket=True, group=False)
    sentence = ("this user cannot reach the Docker engine at /var/run/docker.sock (permission "
                "denied")
    assert "✘ Docker engine: " + sentence in out, out[-3000:]
    assert "fix: add this user to the docker group: `sudo usermod -aG docker $USER`" in out
    assert "demo-exit=1" in out
    assert "error: " + sentence in out or sentence in out.split("envbench demo", 1)[1]
    assert "starting dockerd" not in out and "installing docker.io" not in out
    assert "docker.io-installed" not in out and "no-dockerd" in out
    assert "Traceback" not in out
    assert took < 300, "the demo refused at once, not after waiting for a dockerd"
    print(out)


def test_a_container_without_an_engine_is_told_it_is_not_a_vm(client, vm_image, checkout):
    # An ordinary container (no CAP_SYS_ADMIN, no socket), as on RunPod or a Kubernetes pod.
    code, out, _ = _run(client, vm_image, checkout, "./noxw -s doctor", socket=False,
                        group=False)
    assert ("✘ Docker engine: " + reach.CONTAINER % "/.dockerenv") in out, out[-3000:]
    assert code != 0 and "Traceback" not in out
    print(out)
