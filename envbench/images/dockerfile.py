"""Dockerfiles rendered from templates/*.j2, content-hash tags, builds through the Docker SDK."""
from __future__ import annotations

import hashlib
import io
import re
import shlex
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import docker
import jinja2

import bench
from bench.fingerprint import source_names
from envbench.engine.connection import ENGINE_ERRORS, explain, image_or_none
from envbench.errors import UserError
from envbench.images import wheelcache
from envbench.images.lock import Lock
from envbench.matrix import grammars, sources
from envbench.matrix.models import Environment
from envbench.users import own

# Package data, so that a plain (non-editable) install builds images from any folder.
TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"
BENCH_DIR = Path(bench.__file__).resolve().parent
REPOSITORY = "envbench"
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass(frozen=True)
class Plan:
    """Everything that decides an image's content; its hash is the tag."""

    name: str
    env: Environment
    dockerfile: str
    base: str
    # bench/'s sources as read once: the tag and the build context come from the same bytes.
    bench_files: tuple[tuple[str, bytes], ...]
    lock: Lock | None = None          # a pip stack's wheels, by hash; None: Debian's packages
    wheelhouse: Path | None = None    # where wheels locked from a wheelhouse are found

    @property
    def tag(self) -> str:
        digest = hashlib.sha256()
        digest.update(self.dockerfile.encode())
        for name, content in self.bench_files:
            digest.update(name.encode() + b"\0" + content)
        if self.lock is not None:
            digest.update(("lock %s\n" % self.lock.sha256).encode())
        # The matrix checked that the lower-cased name is a valid, unique repository component.
        return "%s/%s:%s" % (REPOSITORY, self.name.lower(), digest.hexdigest()[:16])

    @property
    def offline(self) -> bool:
        """Built with no network: everything but apt packages arrives in the context."""
        return not self.env.apt and self.env.source == "pip"

    @property
    def labels(self) -> dict[str, str]:
        env = self.env
        return {
            "org.opencontainers.image.title": "envbench %s" % self.name,
            "org.opencontainers.image.base.name": self.base,
            "org.opencontainers.image.source": "envbench",
            "envbench.environment": self.name,
            "envbench.python": env.python,
            "envbench.torch": env.torch or "debian",
            "envbench.torchvision": env.torchvision or "",
            "envbench.cuda": env.cuda or "",
            "envbench.source": env.source,
            "envbench.lock.sha256": self.lock.sha256 if self.lock else "",
        }


def default_base(env: Environment) -> str:
    return "debian:bookworm-slim" if env.source == "debian" else "python:%s-slim" % env.python


def plan(name: str, env: Environment, matrix_dir: Path, lock: Lock | None = None) -> Plan:
    """The image of an environment: its Dockerfile rendered, its tag computed. A pip stack's
    image needs its lock (see envbench.lock); without one the plan is a draft whose tag
    is not the one a build would have."""
    where = "environments.%s" % name
    if env.dockerfile:
        template_path = (matrix_dir / env.dockerfile).resolve()
        if not template_path.is_file():
            raise UserError("%s.dockerfile: %s does not exist" % (where, template_path))
    else:
        template_path = TEMPLATES_DIR / ("%s.Dockerfile.j2" % env.kind)
    wheelhouse = sources.wheelhouse(name, env, matrix_dir)
    base = sources.checked(sources.expand(env.base, where + ".base"),
                           grammars.image_reference, where + ".base") \
        if env.base else default_base(env)
    sources.index_url(name, env)  # checked here too: `check` must refuse what a lock would
    apt = list(env.apt)
    if env.source == "debian":
        apt = ["python3", "python3-torch", "python3-torchvision"] + apt
    loader = jinja2.FileSystemLoader([str(template_path.parent), str(TEMPLATES_DIR)])
    jinja = jinja2.Environment(loader=loader, undefined=jinja2.StrictUndefined,
                               keep_trailing_newline=True, autoescape=False)  # noqa: S701 - not HTML
    # Every value a RUN line takes goes through `sh` (shell quoting) on top of the checks.
    jinja.filters["sh"] = shlex.quote
    try:
        text = jinja.get_template(template_path.name).render(
            name=name, template=template_path.name, base=base, source=env.source, apt=apt,
            python=env.python, torch=env.torch, cuda=env.cuda)
    except jinja2.TemplateError as exc:
        raise UserError("%s.dockerfile: %s cannot be rendered (%s)"
                        % (where, template_path, exc))
    bench_files = tuple((name, (BENCH_DIR / name).read_bytes())
                        for name in source_names(str(BENCH_DIR)))
    return Plan(name, env, text, base, bench_files, lock, wheelhouse)


def _context(p: Plan, wheels: list[Path]) -> tempfile.SpooledTemporaryFile[bytes]:
    """The build context as a tar: the Dockerfile, bench/'s sources, and for a pip stack the
    locked wheels (read from the host cache) with requirements.lock."""
    spool = tempfile.SpooledTemporaryFile(max_size=64 * 2**20)
    with tarfile.open(fileobj=spool, mode="w") as tar:
        def add_text(name: str, text: str) -> None:
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))

        add_text("Dockerfile", p.dockerfile)
        for name, content in p.bench_files:
            info = tarfile.TarInfo("bench/%s" % name)
            info.size, info.mode = len(content), 0o644
            tar.addfile(info, io.BytesIO(content))
        if p.lock is not None:
            add_text("requirements.lock", p.lock.requirements_text())
            for path in wheels:
                tar.add(str(path), arcname="wheels/%s" % path.name)
    spool.seek(0)
    return spool


def ensure_base(client: docker.DockerClient, base: str, allow_pull: bool, out: TextIO) -> Any:
    """The base image, from the local engine; pulled only when allowed and said aloud."""
    image = image_or_none(client, base)
    if image is not None:
        return image
    hint = ("Build or load it into this engine (for a local Debian base: `nox -s base-image`), "
            "or set the environment's base: to an image the engine has.")
    if not allow_pull:
        raise UserError("base image %s is not in the local engine and --offline forbids "
                        "pulling. %s" % (base, hint))
    print("pulling base image %s (not in the local engine)" % base, file=out, flush=True)
    try:
        return client.images.pull(base)
    except ENGINE_ERRORS as exc:
        raise UserError("base image %s is not in the local engine and could not be pulled "
                        "(%s). %s" % (base, explain(exc)[:300], hint))


def base_digest(image: Any) -> str:
    digests = image.attrs.get("RepoDigests") or []
    return digests[0] if digests else image.id


def build(client: docker.DockerClient, p: Plan, log_dir: Path, allow_pull: bool = True,
          out: TextIO = sys.stdout, nocache: bool = False) -> Any:
    """Build the image for a plan unless its tag exists; stream the log; return the image."""
    existing = image_or_none(client, p.tag)
    if existing is not None:
        print("%s: %s exists, not rebuilt" % (p.name, p.tag), file=out, flush=True)
        return existing
    ensure_base(client, p.base, allow_pull, out)
    wheels = wheelcache.ensure(p.lock, p.wheelhouse, out) if p.lock is not None else []
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / ("build-%s.log" % p.name)
    print("%s: building %s with the network %s (log: %s)"
          % (p.name, p.tag, "off" if p.offline else "on, for apt", log_path),
          file=out, flush=True)
    lines: list[str] = []
    try:
        _stream_build(client, p, wheels, log_path, lines, out, nocache)
    except ENGINE_ERRORS as exc:
        tail = "\n    ".join(lines[-15:])
        raise UserError("building %s failed: %s%s" % (p.name, explain(exc),
                                                      "; last lines:\n    " + tail if tail else ""))
    own(log_path)
    image = image_or_none(client, p.tag)
    if image is None:
        raise UserError("building %s reported success but %s is missing" % (p.name, p.tag))
    return image


def _stream_build(client: docker.DockerClient, p: Plan, wheels: list[Path], log_path: Path,
                  lines: list[str], out: TextIO, nocache: bool) -> None:
    if log_path.is_symlink():
        log_path.unlink()  # never write through a link planted in the log folder
    with log_path.open("w") as log, _context(p, wheels) as context:
        log.write(p.dockerfile + "\n---\n")
        options = {"network_mode": "none"} if p.offline else {}
        stream = client.api.build(fileobj=context, custom_context=True, tag=p.tag, rm=True,
                                  forcerm=True, pull=False, decode=True, labels=p.labels,
                                  nocache=nocache, **options)
        for chunk in stream:
            text = chunk.get("stream") or chunk.get("status") or ""
            if "error" in chunk:
                text = "ERROR: %s\n" % chunk["error"]
            # The engine colours a step's stderr; terminal escapes are no part of the message.
            text = ANSI_ESCAPE.sub("", text)
            if not text:
                continue
            log.write(text)
            log.flush()
            for line in text.splitlines():
                if line.strip():
                    lines.append(line)
                    print("  %s | %s" % (p.name, line), file=out, flush=True)
            if "error" in chunk:
                tail = "\n    ".join(lines[-15:])
                raise UserError("building %s failed; last lines of %s:\n    %s"
                                % (p.name, log_path, tail))
