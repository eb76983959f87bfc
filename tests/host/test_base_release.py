"""The kit's Debian base is made from Debian's archive whatever the host runs: the release is
the stacks', debootstrap is handed Debian's keyring and, where it is older than the release,
the sid script. An Ubuntu 24.04 host asked for debian:noble-slim and debootstrapped "noble"."""
from __future__ import annotations

import subprocess
from pathlib import Path

from envbench.images import baseimage, bases
from envbench.matrix.models import Environment


def _scripts(tmp_path: Path, *names: str) -> Path:
    folder = tmp_path / "scripts"
    folder.mkdir()
    for name in names:
        (folder / name).write_text("# a debootstrap script\n")
    return folder


def test_debootstrap_gets_debians_keyring_and_mirror_on_a_host_that_is_not_debian(tmp_path):
    keyring = tmp_path / "debian-archive-keyring.gpg"
    keyring.write_bytes(b"keys")
    scripts = _scripts(tmp_path, "bookworm", "sid", "noble", "jammy")
    # An Ubuntu host: its apt names no Debian mirror, so Debian's own is used.
    assert baseimage.debootstrap_command("bookworm", tmp_path / "root", None, scripts,
                                         keyring) == [
        "debootstrap", "--variant=minbase", "--keyring=%s" % keyring, "bookworm",
        str(tmp_path / "root"), "http://deb.debian.org/debian"]
    # A Debian host's own mirror is kept (it is where this host may fetch packages).
    assert baseimage.debootstrap_command("bookworm", tmp_path / "root",
                                         "http://mirror.example/debian", scripts,
                                         keyring)[-1] == "http://mirror.example/debian"


def test_a_release_newer_than_the_hosts_debootstrap_uses_the_sid_script(tmp_path):
    """Ubuntu 22.04's debootstrap has no trixie script; sid's makes every current release."""
    scripts = _scripts(tmp_path, "bookworm", "sid")
    command = baseimage.debootstrap_command("trixie", tmp_path / "root", None, scripts,
                                            tmp_path / "no-keyring.gpg")
    assert command[-2:] == ["http://deb.debian.org/debian", str(scripts / "sid")]
    assert not any(word.startswith("--keyring") for word in command)  # none to name


def test_this_hosts_debootstrap_takes_the_command_for_each_kit_release(tmp_path):
    """The real debootstrap (installed with the tests) runs each command the kit makes as far
    as listing the release's packages: Debian's archive answers, its Release file is checked
    against the keyring named, and the script exists (nothing is unpacked)."""
    for release in sorted(set(bases.DEBIAN_PYTHON) | {baseimage.KIT_RELEASE}):
        command = baseimage.debootstrap_command(release, tmp_path / release, None)
        proc = subprocess.run(command[:1] + ["--print-debs"] + command[1:],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0 and "base-files" in proc.stdout.split(), \
            (command, proc.stdout[-500:], proc.stderr[-500:])


def test_the_release_is_the_stacks_never_the_hosts():
    assert baseimage.KIT_RELEASE == bases.kit_release(Environment(source="debian",
                                                                  python="3.11"))
    assert bases.kit_release(Environment(python="3.13", torch="2.14.1")) == "trixie"
    assert baseimage.tag_for(baseimage.KIT_RELEASE) == "envbench/debian:bookworm"
