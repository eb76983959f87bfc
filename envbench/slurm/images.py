"""Images for the nodes, in shared_dir/images, once per image ID: the engine's image saved as
an archive (what `podman load` and `apptainer build docker-archive://` take), and for Pyxis an
Enroot squashfs made from the engine on the login node; Apptainer's SIF is built on a node
by the job, which writes its sha256 where the login node records it. What exists is not made
again if its bytes are the ones the kit recorded (trust.Manifest), else it is set aside and
made again; what is made is written under a temporary name and renamed, so a killed run
leaves no half image that a later one would take for whole."""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, TextIO

from bench.rules import SHA256
from envbench import files
from envbench.slurm import script, trust
from envbench.slurm.script import ImageUse
from envbench.user_errors import UserError

SIF_NAME = re.compile(r"[0-9a-f]{64}\.sif")  # images.reference's, for an image ID


def folder(shared_dir: Path) -> Path:
    return shared_dir / "images"


def _hex(image_id: str) -> str:
    return image_id.split(":", 1)[-1]


def archive_path(shared_dir: Path, image_id: str) -> Path:
    return folder(shared_dir) / ("%s.tar" % _hex(image_id))


def reference(runtime: str, shared_dir: Path, image_id: str) -> str:
    """How a step names the image: Podman by its ID (the archive keeps Docker's), the
    others by the converted file."""
    if runtime == "podman":
        return _hex(image_id)
    suffix = ".sif" if runtime == "apptainer" else ".sqsh"
    return str(folder(shared_dir) / ("%s%s" % (_hex(image_id), suffix)))


def save_archive(client: Any, image_id: str, shared_dir: Path, out: TextIO,
                 manifest: trust.Manifest) -> tuple[Path, str]:
    """The image as `docker save` writes it, in shared_dir/images (kept if there and its
    bytes are the ones recorded); the archive and its sha256."""
    path = archive_path(shared_dir, image_id)
    trust.kit_folder(path.parent)
    if manifest.trusted(path, "image archive", out):
        return path, manifest.digests[str(path)]
    partial = path.with_name(path.name + ".partial-%d" % os.getpid())
    print("saving image %s for the nodes (%s)" % (_hex(image_id)[:12], path), file=out,
          flush=True)
    sha = hashlib.sha256()
    try:
        with open(partial, "wb") as handle:
            for chunk in client.images.get(image_id).save(named=False):
                sha.update(chunk)
                handle.write(chunk)
        os.replace(partial, path)
    except OSError as exc:  # the partial file goes in the finally below
        raise UserError("could not write the image archive %s: %s" % (path, exc.strerror
                                                                       or exc)) from None
    finally:
        partial.unlink(missing_ok=True)
    manifest.record(path, sha.hexdigest())
    return path, sha.hexdigest()


def enroot_import(tag: str, image_id: str, shared_dir: Path, out: TextIO,
                  manifest: trust.Manifest) -> Path:
    """Pyxis's squashfs, made from the engine's image by enroot on the login node (kept if
    there and its bytes are the ones recorded)."""
    path = Path(reference("pyxis", shared_dir, image_id))
    trust.kit_folder(path.parent)
    if manifest.trusted(path, "squashfs", out):
        return path
    if shutil.which("enroot") is None:
        raise UserError("runtime pyxis: enroot is not on this login node, which makes the "
                        "squashfs from the engine's image (enroot import dockerd://); install "
                        "enroot here, or use runtime: apptainer or podman")
    partial = path.with_name(path.name + ".partial")
    print("converting %s for Pyxis (%s)" % (tag, path), file=out, flush=True)
    proc = subprocess.run(["enroot", "import", "--output", str(partial), "dockerd://%s" % tag],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        partial.unlink(missing_ok=True)
        raise UserError("enroot import of %s failed: %s" % (tag, " ".join(
            (proc.stderr or proc.stdout).split())[-400:]))
    digest = trust.sha256_of(partial)
    os.replace(partial, path)
    manifest.record(path, digest)
    return path


def ready(runtime: str, client: Any, tag: str, image_id: str, shared_dir: Path,
          out: TextIO, manifest: trust.Manifest) -> ImageUse:
    """Make what the runtime's steps need of this image; how the job uses it, with the
    digests the node checks before it loads anything."""
    archive, digest = save_archive(client, image_id, shared_dir, out, manifest)
    squashfs = sif = None
    if runtime == "pyxis":
        made = enroot_import(tag, image_id, shared_dir, out, manifest)
        squashfs = manifest.digests[str(made)]
    if runtime == "apptainer":
        # Built on a node by an earlier job: used where its bytes are those that job
        # recorded (take_in_made), else removed here and built again by this job.
        path = Path(reference(runtime, shared_dir, image_id))
        if manifest.trusted(path, "SIF", out):
            sif = manifest.digests[str(path)]
    return ImageUse(runtime, str(archive), reference(runtime, shared_dir, image_id), digest,
                    squashfs, sif)


def take_in_made(run_dir: Path, shared_dir: Path, manifest: trust.Manifest) -> list[Path]:
    """Each SIF a job built on its node, recorded in the manifest with the sha256 the job
    wrote in its run folder (made by this run, the user's alone: trust.kit_folder), so that
    a later job checks the SIF instead of taking it by its name. What is not a SIF's name
    and digest is left out. The SIFs newly recorded."""
    recorded = []
    for entry in sorted((run_dir / script.MADE).glob("*.sif.sha256")):
        name = entry.name[:-len(".sha256")]
        try:
            digest = files.read_regular(entry, 65).decode("ascii").strip()
        except (files.Unreadable, UnicodeDecodeError):
            continue
        if not (SIF_NAME.fullmatch(name) and SHA256.fullmatch(digest)):
            continue
        sif = folder(shared_dir) / name
        if manifest.digests.get(str(sif)) != digest:
            manifest.record(sif, digest)
            recorded.append(sif)
    return recorded


def conversion_commands(runtime: str, tag: str, image_id: str, shared_dir: Path) -> list[str]:
    """What ready() does, as commands a user who submits by hand can run (--print)."""
    archive = archive_path(shared_dir, image_id)
    lines = ["docker save --output %s %s" % (archive, tag)]
    if runtime == "apptainer":
        lines.append("apptainer build %s docker-archive://%s  # on a node, or in the job"
                     % (reference(runtime, shared_dir, image_id), archive))
    elif runtime == "pyxis":
        lines.append("enroot import --output %s dockerd://%s"
                     % (reference(runtime, shared_dir, image_id), tag))
    else:
        lines.append("podman load --input %s  # in the job, on the node" % archive)
    return lines
