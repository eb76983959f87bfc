"""Images built through the Docker SDK: the build context (Dockerfile, bench/, locked wheels),
the base image (never pulled by surprise), and the build's log streamed as it comes."""
from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
import tarfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TextIO

import docker

from envbench.engine import textbuild
from envbench.engine.connection import ENGINE_ERRORS, explain, image_or_none
from envbench.images import archs, wheelcache, wheelstack
from envbench.images.dockerfile import Plan
from envbench.user_errors import UserError
from envbench.users import own

ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass(frozen=True)
class BuiltImage:
    """An environment's image as built (or found) in the engine, and the base it came from."""

    plan: Plan
    image: Any                # docker.models.images.Image
    base_digest: str | None   # None: the base is no longer in the engine

    @property
    def record(self) -> dict[str, Any]:
        """The result's env.image section."""
        return {"tag": self.plan.tag, "id": self.image.id, "base": self.plan.base,
                "base_digest": self.base_digest,
                "lock_sha256": self.plan.lock.sha256 if self.plan.lock else None}


@dataclass(frozen=True)
class BuildFailure:
    """Why an environment's image could not be built, and the tag it would have had (None
    where it could not even be planned)."""

    message: str
    tag: str | None


CONTEXT_CHUNK = 1 << 20


def _write_context(sink: BinaryIO, p: Plan, wheels: list[Path]) -> None:
    """The build context as a tar: the Dockerfile, bench/'s sources, and for a pip stack the
    locked wheels (read from the host cache) with requirements.lock."""
    with tarfile.open(fileobj=sink, mode="w|") as tar:
        def add_text(name: str, text: str) -> None:
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))

        add_text("Dockerfile", p.dockerfile)
        folders = sorted({name.rsplit("/", 1)[0] for name, _ in p.bench_files if "/" in name})
        for folder in folders:  # bench's subpackages, readable by the cell's user
            info = tarfile.TarInfo("bench/%s" % folder)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for name, content in p.bench_files:
            info = tarfile.TarInfo("bench/%s" % name)
            info.size, info.mode = len(content), 0o644
            tar.addfile(info, io.BytesIO(content))
        if p.lock is not None:
            add_text("requirements.lock", p.lock.requirements_text())
            for path in wheels:
                tar.add(str(path), arcname="wheels/%s" % path.name)


@contextlib.contextmanager
def _context(p: Plan, wheels: list[Path]) -> Iterator[Iterator[bytes]]:
    """The build context, sent as it is written: a thread writes the tar into a pipe and the
    request streams it (chunked), so a CUDA stack's 3 GB of wheels are not first copied into
    a temporary file (measured on the CUDA image test: its disk peak fell from 24 GB above
    where it started to 19 GB)."""
    read_end, write_end = os.pipe()
    failed: list[BaseException] = []

    def write() -> None:
        try:
            with os.fdopen(write_end, "wb") as sink:
                _write_context(sink, p, wheels)
        except BrokenPipeError:
            pass  # the engine stopped reading (the build failed): its own error says why
        except BaseException as exc:  # handed to the reading side, which raises it
            failed.append(exc)

    source = os.fdopen(read_end, "rb")
    writer = threading.Thread(target=write, name="build-context", daemon=True)
    writer.start()

    def chunks() -> Iterator[bytes]:
        yield from iter(lambda: source.read(CONTEXT_CHUNK), b"")
        writer.join()
        if failed:  # the tar ended early: say why, not the engine's "unexpected EOF"
            raise UserError("writing %s's build context failed: %s" % (p.name, failed[0]))

    try:
        yield chunks()
    finally:
        source.close()  # a writer still blocked on the pipe gets EPIPE and ends
        writer.join(timeout=60)


def ensure_base(client: docker.DockerClient, base: str, allow_pull: bool, out: TextIO) -> Any:
    """The base image, from the local engine; pulled only when allowed and said aloud."""
    image = image_or_none(client, base)
    if image is not None:
        return image
    hint = ("Build or load it into this engine (for a local Debian base: `./noxw -s base-image`), "
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
    return str(digests[0] if digests else image.id)


def build(client: docker.DockerClient, p: Plan, log_dir: Path, allow_pull: bool = True,
          out: TextIO = sys.stdout, nocache: bool = False, tidy: bool = True) -> Any:
    """Build the image for a plan unless its tag exists; stream the log; return the image.
    ``tidy``: remove builder stages once it ends. Builds that run side by side pass False and
    tidy once after the last: a stage another build is still copying from must stay."""
    existing = image_or_none(client, p.tag)
    if existing is not None:
        print("%s: %s exists, not rebuilt" % (p.name, p.tag), file=out, flush=True)
        return existing
    ensure_base(client, p.base, allow_pull, out)
    wheels = wheelcache.ensure(p.lock, p.wheelhouse, out, index_url=p.index_url) \
        if p.lock is not None else []
    wrong = wheelstack.mismatch(wheels, p.env.cuda)
    if wrong is not None:
        raise UserError("building %s failed before it began: %s; read from the locked wheel, "
                        "so no image layer was written" % (p.name, wrong))
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / ("build-%s.log" % p.name)
    print("%s: building %s with the network %s (log: %s)"
          % (p.name, p.tag, "off" if p.offline else "on, for apt", log_path),
          file=out, flush=True)
    lines: list[str] = []
    built = False
    try:
        _stream_build(client, p, wheels, log_path, lines, out, nocache)
        built = True
    except ENGINE_ERRORS as exc:
        tail = "\n    ".join(lines[-15:])
        raise UserError("building %s failed: %s%s" % (p.name, explain(exc),
                                                      "; last lines:\n    " + tail if tail else ""))
    finally:
        if tidy:
            remove_builder_stages(client, out)
        if not built:
            remove_partial_image(client, lines, out)
    own(log_path)
    image = image_or_none(client, p.tag)
    if image is None:
        raise UserError("building %s reported success but %s is missing" % (p.name, p.tag))
    return label_archs(client, p, image, out) if p.env.cuda else image


def remove_builder_stages(client: docker.DockerClient, out: TextIO) -> None:
    """The builder stage's image of a pip stack (labelled envbench.stage=builder) holds the
    wheels and the installed venv: the legacy builder keeps it, untagged, beside the image
    (8.9 GB next to a 5.9 GB CUDA 13 image, measured). Removed once the build ends; its
    untagged parents go with it."""
    try:
        stages = client.images.list(filters={"dangling": True,
                                             "label": "envbench.stage=builder"})
    except ENGINE_ERRORS:
        return
    freed = 0
    for stage in stages:
        try:
            size = int(stage.attrs.get("Size") or 0)
            client.images.remove(str(stage.id))
            freed += size
        except ENGINE_ERRORS:
            continue  # in use by a build still running: the next build removes it
    if freed:
        print("removed the builder stage's image (%.2f GB)" % (freed / 1e9), file=out,
              flush=True)


# The legacy builder prints each finished step's image as " ---> 3a4cf548a692".
STEP_IMAGE = re.compile(r"^\s*---> ([0-9a-f]{12,64})\s*$")


def remove_partial_image(client: docker.DockerClient, lines: list[str], out: TextIO) -> None:
    """A failed build leaves its last finished step as an untagged image that nothing names
    (a CUDA stack failing after its venv was copied: 6 GB). Removed with its untagged parents,
    unless it is tagged (the base, where the first step failed) or another image builds on it
    (a shared cached layer: the engine refuses, and it stays)."""
    last = next((m.group(1) for m in map(STEP_IMAGE.match, reversed(lines)) if m), None)
    if last is None:
        return
    try:
        image = client.images.get(last)
        if image.tags:
            return
        size = int(image.attrs.get("Size") or 0)
        client.images.remove(str(image.id))
    except ENGINE_ERRORS:
        return  # gone already (a builder stage), or a layer other images still use
    print("removed the failed build's partial image (%.2f GB)" % (size / 1e9), file=out,
          flush=True)


# torch._C._cuda_getArchFlags() lists the compiled architectures without a GPU (its public
# get_arch_list() says [] where no GPU is visible, as at build time).
ARCH_QUERY = "import torch; print(torch._C._cuda_getArchFlags())"


def label_archs(client: docker.DockerClient, p: Plan, image: Any, out: TextIO) -> Any:
    """Record a CUDA image's compiled architectures as its envbench.cuda.archs label (a
    one-line build FROM it, under the same tag), for the GPU check before later runs."""
    if (image.labels or {}).get(archs.LABEL):
        return image
    try:
        text = client.containers.run(image.id, entrypoint=["python3", "-c", ARCH_QUERY],
                                     remove=True, network_mode="none").decode()
    except ENGINE_ERRORS as exc:
        print("%s: its CUDA architectures could not be read (%s); the GPU check will use "
              "the published list" % (p.name, explain(exc)[:200]), file=out, flush=True)
        return image
    flags = " ".join(archs.Archs.parse(text, p.tag).flags)
    if not flags:
        return image
    dockerfile = "FROM %s\nLABEL %s=%s\n" % (image.id, archs.LABEL, json.dumps(flags))
    try:
        textbuild.build(client, dockerfile, p.tag, network_mode="none")
    except ENGINE_ERRORS as exc:
        raise UserError("labelling %s with its architectures failed: %s" % (p.name,
                                                                           explain(exc)))
    print("%s: compiled for %s" % (p.name, flags), file=out, flush=True)
    return image_or_none(client, p.tag) or image


def _stream_build(client: docker.DockerClient, p: Plan, wheels: list[Path], log_path: Path,
                  lines: list[str], out: TextIO, nocache: bool) -> None:
    if log_path.is_symlink():
        log_path.unlink()  # never write through a link planted in the log folder
    with log_path.open("w") as log, _context(p, wheels) as context:
        log.write(p.dockerfile + "\n---\n")
        options: dict[str, Any] = {"network_mode": "none"} if p.offline else {}
        # docker-py hands fileobj to requests as the body, which sends an iterator chunked
        # (its stubs say IO[bytes]).
        body: Any = context
        stream = client.api.build(fileobj=body, custom_context=True, tag=p.tag, rm=True,
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
