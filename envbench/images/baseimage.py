"""The Debian base images the kit builds on: the engine's, a pulled one, or one built locally
(debootstrap -> docker import) for hosts without a registry; and that base with Python.

The release is the stacks' (Debian's torch 1.13 is bookworm's, and a pip stack's Python picks
the release that has it), never the host's: an Ubuntu 24.04 host asked for `debian:noble-slim`
and debootstrapped "noble", and neither exists. Debian is debootstrapped from Debian's
archive on any host, checked with Debian's keyring (Ubuntu ships it as debian-archive-keyring):
the mirror is the one this host's apt uses where it is a Debian one, so the image is built
from wherever the host is allowed to fetch packages, else Debian's own.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, TextIO

import docker

from envbench import provision
from envbench.engine import connection, textbuild
from envbench.engine.connection import image_or_none
from envbench.user_errors import UserError

REPOSITORY = "envbench/debian"
# The demo's release, and the default base's: Debian's python3-torch 1.13 is bookworm's.
KIT_RELEASE = "bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
DEBIAN_KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
SCRIPTS = Path("/usr/share/debootstrap/scripts")


def host_mirror() -> str | None:
    """The first Debian archive URI in the host's apt sources (deb822 or one-line form)."""
    candidates = [Path("/etc/apt/sources.list.d/debian.sources"), Path("/etc/apt/sources.list")]
    candidates += sorted(Path("/etc/apt/sources.list.d").glob("*.sources"))
    candidates += sorted(Path("/etc/apt/sources.list.d").glob("*.list"))
    for path in candidates:
        try:
            text = path.read_text()
        except OSError:
            continue
        for match in re.finditer(r"^(?:URIs:\s*|deb\s+(?:\[[^\]]*\]\s+)?)(\S+)", text, re.M):
            uri = match.group(1)
            if "security" not in uri and uri.rstrip("/").endswith("/debian"):
                return uri
    return None


def tag_for(codename: str) -> str:
    return "%s:%s" % (REPOSITORY, codename)


def debootstrap_command(release: str, rootfs: Path, mirror: str | None,
                        scripts: Path = SCRIPTS, keyring: Path = DEBIAN_KEYRING) -> list[str]:
    """debootstrap of a Debian release on any host: Debian's keyring named (an Ubuntu host's
    debootstrap defaults to Ubuntu's), and where this debootstrap is older than the release
    (Ubuntu 22.04's has no trixie script) the sid script, which makes every current release."""
    command = ["debootstrap", "--variant=minbase"]
    if keyring.is_file():
        command.append("--keyring=%s" % keyring)
    command += [release, str(rootfs), mirror or DEBIAN_MIRROR]
    if not (scripts / release).exists() and (scripts / "sid").exists():
        command.append(str(scripts / "sid"))
    return command


def ensure(client: docker.DockerClient, codename: str | None = None,
           out: TextIO = sys.stdout, as_root: list[str] | None = None) -> str:
    """Build envbench/debian:<codename> unless the engine has it; return the tag.

    ``as_root`` prefixes the commands that need root (debootstrap, packing the tree,
    removing it): [] when this process is root, e.g. ["sudo", "-n"] otherwise.
    """
    as_root = as_root or []
    codename = codename or KIT_RELEASE
    tag = tag_for(codename)
    if image_or_none(client, tag) is not None:
        print("%s exists, not rebuilt" % tag, file=out, flush=True)
        return tag
    if shutil.which("debootstrap") is None:
        raise UserError("debootstrap is not installed (apt-get install debootstrap "
                        "debian-archive-keyring); it builds the local base image %s" % tag)
    tmp = Path(tempfile.mkdtemp(prefix="envbench-rootfs-"))
    try:
        rootfs = tmp / "rootfs"
        command = debootstrap_command(codename, rootfs, host_mirror())
        print("building %s: %s" % (tag, " ".join(command)), file=out, flush=True)
        proc = subprocess.run(as_root + command, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
        if proc.returncode != 0:
            tail = "\n    ".join(proc.stdout.splitlines()[-15:])
            raise UserError("debootstrap failed (exit %d):\n    %s" % (proc.returncode, tail))
        # Keep the image small and its apt usable: no cached .debs, no stale lists.
        subprocess.run(as_root + ["find", str(rootfs / "var/cache/apt/archives"),
                                  str(rootfs / "var/lib/apt/lists"), "-maxdepth", "1",
                                  "-type", "f", "-delete"], check=True)
        archive = tmp / "rootfs.tar"
        subprocess.run(as_root + ["tar", "-C", str(rootfs), "--numeric-owner", "-cf",
                                  str(archive), "."], check=True)
        repository, _, version = tag.partition(":")
        client.api.import_image_from_file(str(archive), repository=repository, tag=version)
    finally:
        subprocess.run(as_root + ["rm", "-rf", str(tmp)], check=False)
    if image_or_none(client, tag) is None:
        raise UserError("docker import of %s did not produce the image" % tag)
    print("built %s" % tag, file=out, flush=True)
    return tag


def ensure_base(client: Any, out: TextIO = sys.stdout, codename: str = KIT_RELEASE) -> str:
    """A Debian base image of the release asked (the demo's: bookworm), whatever the host
    runs: the engine's, a pulled one, or one built with debootstrap (the registry may be out
    of reach, the package mirror is not)."""
    local = tag_for(codename)
    if connection.image_or_none(client, local) is not None:
        return local
    official = "debian:%s-slim" % codename
    if connection.image_or_none(client, official) is not None:
        return official
    try:
        client.images.pull(official)
        provision.say(out, "pulled %s" % official)
        return official
    except connection.ENGINE_ERRORS as exc:
        provision.say(out, "no registry answers (%s): building %s with debootstrap instead"
             % (connection.explain(exc)[:120], local))
    prefix = provision.privileged()
    if prefix is None:
        raise UserError("no base image: the registry does not answer and debootstrap needs "
                        "root. Run: sudo %s -m envbench base-image" % sys.executable)
    if shutil.which("debootstrap") is None or not DEBIAN_KEYRING.is_file():
        provision.apt_install(["debootstrap", "debian-archive-keyring"], out)
    return ensure(client, codename, out, prefix)


def python_tag(base: str) -> str:
    """The tag of ``base`` with python3 and venv added (ensure_python_base)."""
    return ("envbench/python-%s" % base.replace("/", "-").replace(":", "-"))[:120] + ":latest"


def ensure_python_base(client: Any, base: str, out: TextIO = sys.stdout) -> str:
    """The base with python3 and venv (apt, with the engine's network, once): pip stacks on
    it need no apt, so they are built with the network off."""
    tag = python_tag(base)
    if connection.image_or_none(client, tag) is not None:
        return tag
    provision.say(out, "building %s (%s with python3 and venv)" % (tag, base))
    dockerfile = ("FROM %s\nRUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install"
                  " -y --no-install-recommends python3 python3-venv && rm -rf "
                  "/var/lib/apt/lists/*\n" % base)
    try:
        textbuild.build(client, dockerfile, tag)
    except connection.ENGINE_ERRORS as exc:
        raise UserError("building %s failed: %s" % (tag, connection.explain(exc)))
    return tag
