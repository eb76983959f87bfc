"""The base image of a stack that names none: the registry's (python:X-slim, debian:bookworm-
slim) where the engine has it or a registry answers, else the kit's own Debian base, built
with debootstrap from the host's apt mirror as the demo's is, where its Python is the
stack's. A host with no registry then builds the default stacks as it builds the demo.

The base is part of the Dockerfile, hence of the image's tag: a stack built on the kit's base
is another image than one built on the registry's, and its results say which base it had.
"""
from __future__ import annotations

import shutil
import sys
from typing import TextIO

import docker

from envbench import provision
from envbench.engine import connection
from envbench.images import baseimage, dockerfile
from envbench.matrix import sources
from envbench.matrix.models import Environment
from envbench.user_errors import UserError

# The Python of each Debian release debootstrap can make here: a pip stack built on the kit's
# base needs the same Python as its lock (its wheels are for one CPython).
DEBIAN_PYTHON = {"bullseye": "3.9", "bookworm": "3.11", "trixie": "3.13"}


def kit_release(env: Environment) -> str | None:
    """The Debian release of the kit's base for this stack (None: no release has its Python).
    A Debian stack's default is bookworm, whatever its python: says."""
    if env.source == "debian":
        return "bookworm"
    return next((code for code, python in DEBIAN_PYTHON.items() if python == env.python), None)


def kit_base(env: Environment) -> str | None:
    """The tag of the kit's own base for this stack, or None where no release fits."""
    release = kit_release(env)
    if release is None:
        return None
    debian = baseimage.tag_for(release)
    return debian if env.source == "debian" else baseimage.python_tag(debian)


def known(client: docker.DockerClient | None, env: Environment) -> str | None:
    """The default base as far as the engine tells without any network (for tags before a
    build): the kit's own where the engine has it and not the registry's; else None (the
    registry's, dockerfile.default_base). Chooser decides in the same order."""
    if env.base or client is None:
        return None
    kit = kit_base(env)
    try:
        if kit is None or connection.image_or_none(client, dockerfile.default_base(env)):
            return None
        return kit if connection.image_or_none(client, kit) is not None else None
    except connection.ENGINE_ERRORS:
        return None


def base_of(name: str, env: Environment) -> str:
    """The base a stack names (expanded), else the registry's default."""
    if env.base:
        return sources.expand(env.base, "environments.%s.base" % name)
    return dockerfile.default_base(env)


def needs_registry(client: docker.DockerClient, name: str, env: Environment) -> bool:
    """Whether a stack's base can only come from a registry: its own `base:` or the default
    is not in the engine, and the kit's base is neither there nor buildable here
    (debootstrap needs root or passwordless sudo)."""
    if connection.image_or_none(client, base_of(name, env)) is not None:
        return False
    if env.base or kit_base(env) is None:
        return True
    return known(client, env) is None and provision.privileged() is None


def registry_sentence(env: Environment) -> str:
    """What to do where a stack's default base has no registry and no kit base fits."""
    return ("the kit's own Debian bases have Python %s: set python: to one of them, or load "
            "%s into this engine (`docker load`)"
            % (", ".join(DEBIAN_PYTHON.values()), dockerfile.default_base(env)))


class Chooser:
    """Decides each default base once per run, pulling or building it as needed."""

    def __init__(self, client: docker.DockerClient, allow_pull: bool, out: TextIO) -> None:
        self.client = client
        self.allow_pull = allow_pull
        self.out = out
        self._registry: str | None = None   # why the registry did not answer, once asked
        self._chosen: dict[str, str | None] = {}

    def base(self, name: str, env: Environment) -> str | None:
        """The base ``plan(default=...)`` takes: None for the registry's (in the engine now),
        the kit's tag otherwise. UserError with the fix where neither can be had."""
        if env.base:
            return None
        default = dockerfile.default_base(env)
        if default not in self._chosen:
            self._chosen[default] = self._decide(name, env, default)
        return self._chosen[default]

    def _decide(self, name: str, env: Environment, default: str) -> str | None:
        """The same order as known(): the registry's base in the engine, else the kit's in
        the engine (no network asked), else a pull, else the kit's built."""
        if connection.image_or_none(self.client, default) is not None:
            return None
        local = known(self.client, env)
        if local is not None:
            print("%s: building on the kit's own base %s (%s is not in this engine)"
                  % (name, local, default), file=self.out, flush=True)
            return local
        kit = kit_base(env)
        if self.allow_pull and self._registry is None:
            try:
                print("pulling base image %s (not in the local engine)" % default,
                      file=self.out, flush=True)
                self.client.images.pull(default)
                return None
            except connection.ENGINE_ERRORS as exc:
                self._registry = connection.explain(exc)[:160]
        why = self._registry or "--offline forbids pulling"
        if kit is None:
            raise UserError("environments.%s: its base %s is not in this engine and cannot be "
                            "pulled (%s); %s" % (name, default, why, registry_sentence(env)))
        print("%s: %s is not in this engine and cannot be pulled (%s): building the kit's own "
              "base %s instead (debootstrap, as the demo does)" % (name, default, why, kit),
              file=self.out, flush=True)
        self._build(env, kit)
        return kit

    def _build(self, env: Environment, kit: str) -> None:
        release = kit_release(env)
        assert release is not None
        debian = baseimage.tag_for(release)
        if connection.image_or_none(self.client, debian) is None:
            prefix = provision.privileged()
            if prefix is None:
                raise UserError("no base image: no registry answers and debootstrap needs "
                                "root. Run: sudo %s -m envbench base-image, or load %s into "
                                "this engine" % (sys.executable, kit))
            if shutil.which("debootstrap") is None or not baseimage.DEBIAN_KEYRING.is_file():
                provision.apt_install(["debootstrap", "debian-archive-keyring"], self.out)
            baseimage.ensure(self.client, release, self.out, prefix)
        if kit != debian:
            baseimage.ensure_python_base(self.client, debian, self.out)
