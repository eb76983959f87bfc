"""Dockerfiles rendered from images/*.j2, content-hash tags, and builds through the Docker SDK."""
from __future__ import annotations

import hashlib
import io
import os
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

from bench.fingerprint import source_names
from envbench import dockerinput
from envbench.engine import ENGINE_ERRORS, explain, image_or_none
from envbench.errors import UserError
from envbench.matrix import Environment
from envbench.users import own

ROOT = Path(__file__).resolve().parent.parent
IMAGES_DIR = ROOT / "images"
BENCH_DIR = ROOT / "bench"
REPOSITORY = "envbench"
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass(frozen=True)
class Plan:
    """Everything that decides an image's content; its hash is the tag."""

    name: str
    env: Environment
    dockerfile: str
    base: str
    wheelhouse: Path | None
    # bench/'s sources as read once: the tag and the build context come from the same bytes.
    bench_files: tuple[tuple[str, bytes], ...]

    @property
    def tag(self) -> str:
        digest = hashlib.sha256()
        digest.update(self.dockerfile.encode())
        for name, content in self.bench_files:
            digest.update(name.encode() + b"\0" + content)
        for name, size in _wheel_listing(self.wheelhouse):
            digest.update(("%s %d\n" % (name, size)).encode())
        # The matrix checked that the lower-cased name is a valid, unique repository component.
        return "%s/%s:%s" % (REPOSITORY, self.name.lower(), digest.hexdigest()[:16])

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
        }


def _wheel_listing(folder: Path | None) -> list[tuple[str, int]]:
    if folder is None:
        return []
    return sorted((p.name, p.stat().st_size) for p in folder.iterdir() if p.is_file())


def default_base(env: Environment) -> str:
    return "debian:bookworm-slim" if env.source == "debian" else "python:%s-slim" % env.python


def _expand(value: str, where: str) -> str:
    """${VAR} and ${VAR:-default} in matrix strings come from the environment, as in a shell;
    an unset variable without a default is a clear error."""
    def sub(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if os.environ.get(name):
            return os.environ[name].rstrip("/")
        if default is not None:
            return default.rstrip("/")
        raise UserError("%s: ${%s} is not set (see README, 'Offline and custom indexes')"
                        % (where, name))
    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}", sub, value)


def _checked(value: str, check: Any, where: str) -> str:
    """A value after ${VAR} expansion, checked as strictly as one written in the matrix."""
    problem = check(value)
    if problem is not None:
        raise UserError("%s: %s" % (where, problem))
    return value


def plan(name: str, env: Environment, matrix_dir: Path) -> Plan:
    where = "environments.%s" % name
    if env.dockerfile:
        template_path = (matrix_dir / env.dockerfile).resolve()
        if not template_path.is_file():
            raise UserError("%s.dockerfile: %s does not exist" % (where, template_path))
    else:
        template_path = IMAGES_DIR / ("%s.Dockerfile.j2" % env.kind)
    wheelhouse = None
    if env.wheelhouse:
        wheelhouse = (matrix_dir / _expand(env.wheelhouse, where + ".wheelhouse")).resolve()
        if not wheelhouse.is_dir() or not any(wheelhouse.glob("*.whl")):
            raise UserError("%s.wheelhouse: %s holds no wheels (fill it with `pip download "
                            "torch==%s -d DIR`)" % (where, wheelhouse, env.torch))
    base = _checked(_expand(env.base, where + ".base"), dockerinput.image_reference,
                    where + ".base") if env.base else default_base(env)
    index_url = _checked(_expand(env.index_url, where + ".index_url"), dockerinput.index_url,
                         where + ".index_url") if env.index_url else None
    apt = list(env.apt)
    if env.source == "debian":
        apt = ["python3", "python3-torch", "python3-torchvision"] + apt
    requirements = ["torch==%s" % env.torch] if env.torch and env.source == "pip" else []
    if env.torchvision and env.source == "pip":
        requirements.append("torchvision==%s" % env.torchvision)
    loader = jinja2.FileSystemLoader([str(template_path.parent), str(IMAGES_DIR)])
    jinja = jinja2.Environment(loader=loader, undefined=jinja2.StrictUndefined,
                               keep_trailing_newline=True, autoescape=False)  # noqa: S701 - not HTML
    # Every value a RUN line takes goes through `sh` (shell quoting) on top of the checks.
    jinja.filters["sh"] = shlex.quote
    try:
        text = jinja.get_template(template_path.name).render(
            name=name, template=template_path.name, base=base, source=env.source, apt=apt,
            python=env.python, torch=env.torch, cuda=env.cuda, index_url=index_url,
            wheelhouse=wheelhouse is not None, requirements=requirements)
    except jinja2.TemplateError as exc:
        raise UserError("%s.dockerfile: %s cannot be rendered (%s)"
                        % (where, template_path, exc))
    bench_files = tuple((name, (BENCH_DIR / name).read_bytes())
                        for name in source_names(str(BENCH_DIR)))
    return Plan(name, env, text, base, wheelhouse, bench_files)


def _context(p: Plan) -> tempfile.SpooledTemporaryFile[bytes]:
    """The build context as a tar: the Dockerfile, bench/'s sources and the wheelhouse."""
    spool = tempfile.SpooledTemporaryFile(max_size=64 * 2**20)
    with tarfile.open(fileobj=spool, mode="w") as tar:
        dockerfile = p.dockerfile.encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile)
        tar.addfile(info, io.BytesIO(dockerfile))
        for name, content in p.bench_files:
            info = tarfile.TarInfo("bench/%s" % name)
            info.size, info.mode = len(content), 0o644
            tar.addfile(info, io.BytesIO(content))
        if p.wheelhouse is not None:
            for path in sorted(p.wheelhouse.iterdir()):
                if path.is_file():
                    tar.add(str(path), arcname="wheelhouse/%s" % path.name)
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
          out: TextIO = sys.stdout) -> Any:
    """Build the image for a plan unless its tag exists; stream the log; return the image."""
    existing = image_or_none(client, p.tag)
    if existing is not None:
        print("%s: %s exists, not rebuilt" % (p.name, p.tag), file=out, flush=True)
        return existing
    ensure_base(client, p.base, allow_pull, out)
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / ("build-%s.log" % p.name)
    print("%s: building %s (log: %s)" % (p.name, p.tag, log_path), file=out, flush=True)
    lines: list[str] = []
    try:
        _stream_build(client, p, log_path, lines, out)
    except ENGINE_ERRORS as exc:
        tail = "\n    ".join(lines[-15:])
        raise UserError("building %s failed: %s%s" % (p.name, explain(exc),
                                                      "; last lines:\n    " + tail if tail else ""))
    own(log_path)
    image = image_or_none(client, p.tag)
    if image is None:
        raise UserError("building %s reported success but %s is missing" % (p.name, p.tag))
    return image


def _stream_build(client: docker.DockerClient, p: Plan, log_path: Path, lines: list[str],
                  out: TextIO) -> None:
    if log_path.is_symlink():
        log_path.unlink()  # never write through a link planted in the log folder
    with log_path.open("w") as log, _context(p) as context:
        log.write(p.dockerfile + "\n---\n")
        stream = client.api.build(fileobj=context, custom_context=True, tag=p.tag, rm=True,
                                  forcerm=True, pull=False, decode=True, labels=p.labels)
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
