"""Nothing in a Slurm target's shared_dir is trusted by its name (#50): the kit's folders
there are the user's and nobody else's to write, a content-named copy is hashed again before
it is used, an image file is held to the sha256 the kit recorded when it wrote it, and the
job checks that file again on the node before it loads it."""
from __future__ import annotations

import hashlib
import io
import os
import stat
import subprocess
from pathlib import Path

import pytest
from cifar_fixture import write_cifar
from test_workload_inputs import _matrix, _weights

from envbench.cells import dataset
from envbench.cells import expansion as cellmod
from envbench.matrix.models import Settings
from envbench.matrix.workloads import resolve_all
from envbench.slurm import images, jobcells, script, staging, trust
from envbench.user_errors import UserError

NOBODY = 65534


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVBENCH_CACHE", str(tmp_path / "cache"))


def test_the_kits_folders_are_the_users_alone_and_anyone_elses_is_refused(tmp_path):
    old = os.umask(0o002)  # a project's umask: group-writable by default
    try:
        made = trust.kit_folder(tmp_path / "shared" / "images")
    finally:
        os.umask(old)
    assert stat.S_IMODE(made.stat().st_mode) == 0o755
    assert stat.S_IMODE(made.parent.stat().st_mode) == 0o755
    # Yours, but others may write into it: anything in it could be theirs.
    loose = tmp_path / "loose"
    loose.mkdir()
    os.chmod(loose, 0o775)
    with pytest.raises(UserError, match=r"is yours but others may write into it \(mode 775\)"):
        trust.kit_folder(loose)
    # A link where a folder should be.
    (tmp_path / "link").symlink_to(made)
    with pytest.raises(UserError, match="is a link, not a folder"):
        trust.kit_folder(tmp_path / "link")


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user takes root")
def test_a_folder_someone_else_owns_is_named_with_its_owner_and_not_written_into(tmp_path):
    theirs = tmp_path / "shared" / "inputs"
    theirs.mkdir(parents=True)
    os.chown(theirs, NOBODY, NOBODY)
    weights = _weights(tmp_path / "w")
    m = _matrix(tmp_path / "m", "{weights: %s}" % weights)
    given = resolve_all(m, tmp_path / "m")["ft"].inputs[0]
    with pytest.raises(UserError) as caught:
        staging.copy_input(given, tmp_path / "shared", io.StringIO())
    assert "%s belongs to %s, not to you" % (theirs, trust.owner_name(NOBODY)) \
        in str(caught.value)
    assert list(theirs.iterdir()) == []


def test_an_image_file_is_held_to_the_digest_the_kit_recorded(tmp_path):
    manifest = trust.Manifest()
    archive = trust.kit_folder(tmp_path / "shared" / "images") / "abc.tar"
    out = io.StringIO()
    assert not manifest.trusted(archive, "image archive", out)  # not there: made
    # A file the kit has no record of writing (planted, or an older kit's) is not used.
    archive.write_bytes(b"someone's image")
    assert not manifest.trusted(archive, "image archive", out)
    assert not archive.exists()
    assert "abc.tar (owned by %s) is not the image archive this kit wrote there for you (no " \
        "run of yours recorded writing it): removed, and made again" \
        % trust.owner_name(os.geteuid()) in out.getvalue()
    # Recorded (in the user's cache, outside every shared_dir): used as it is, read again.
    archive.write_bytes(b"the image")
    manifest.record(archive, hashlib.sha256(b"the image").hexdigest())
    again = trust.Manifest()
    assert again.path.parent == tmp_path / "cache"
    out = io.StringIO()
    assert again.trusted(archive, "image archive", out) and out.getvalue() == ""
    # Its bytes changed since: removed and made again.
    archive.write_bytes(b"the image, changed")
    assert not again.trusted(archive, "image archive", out)
    assert "its sha256 differs from the one recorded" in out.getvalue()
    assert not archive.exists()


def test_a_content_named_copy_is_hashed_again_and_made_again_when_it_is_not_its_name(
        tmp_path):
    shared = tmp_path / "shared"
    weights = _weights(tmp_path / "w")
    m = _matrix(tmp_path / "m", "{weights: %s}" % weights)
    given = resolve_all(m, tmp_path / "m")["ft"].inputs[0]
    copied = staging.copy_input(given, shared, io.StringIO())
    (copied / "model.safetensors").write_bytes(b"other weights")
    out = io.StringIO()
    assert staging.copy_input(given, shared, out) == copied
    assert "is not input weights's copy its name says (its sha256 differs): removed, and " \
        "made again" in out.getvalue()
    assert (copied / "model.safetensors").read_bytes() == \
        (weights / "model.safetensors").read_bytes()
    # The workload's copy.
    cell = cellmod.Cell("env", "cluster", 0, {}, Settings().model_dump(),
                        workload=resolve_all(m, tmp_path / "m")["ft"])
    code = staging.copy_workload(cell, shared, io.StringIO())
    code.write_text("def build(ctx):\n    return {'changed': 1}\n")
    out = io.StringIO()
    assert staging.copy_workload(cell, shared, out) == code
    assert "is not workload ft's copy its name says" in out.getvalue()
    assert code.read_text() == (tmp_path / "m" / "ft.py").read_text()
    # The data set's copy.
    data_dir = Path(write_cifar(str(tmp_path / "cifar"), per_batch=10, test_count=10))
    data = dataset.identity_of(data_dir)
    where = staging.copy_data(data_dir, data, shared, io.StringIO())
    batch = where / dataset.FOLDER / "data_batch_1"
    batch.write_bytes(batch.read_bytes()[:-1] + b"!")
    out = io.StringIO()
    assert staging.copy_data(data_dir, data, shared, out) == where
    assert "is not the data set its name says (its files' sha256 differs)" in out.getvalue()
    assert dataset.digest(where) == data.sha256


def test_the_job_checks_an_image_file_on_the_node_before_it_uses_it(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    archive = tmp_path / "images" / "abc.tar"
    archive.parent.mkdir()
    archive.write_bytes(b"the image")
    line = script.checked(str(archive), hashlib.sha256(b"the image").hexdigest())

    def job() -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", "RUN=%s\n%s\necho the steps ran" % (run, line)],
                              capture_output=True, text=True, timeout=30)

    assert job().stdout == "the steps ran\n" and not (run / script.REFUSED).exists()
    archive.write_bytes(b"another image")
    stopped = job()
    assert stopped.returncode == 1 and "the steps ran" not in stopped.stdout
    assert "abc.tar on the node is not the file the login node wrote" in stopped.stderr
    # What the login node then fails each unrun cell with, in one line.
    said = jobcells._refused(run)
    assert said.startswith(str(archive)) and "run the same command again" in said
    assert script.checked(str(archive), None) == "true"  # --print: nothing written to check


# Apptainer is not packaged for this machine's Debian: a stand-in that does what `apptainer
# build --force OUT docker-archive://IN` does to the files (writes OUT from IN). What is
# tested is the job's shell around it and the login node's records, not Apptainer.
STAND_IN = """#!/bin/sh
[ "$1" = build ] && [ "$2" = --force ] || exit 2
src=${4#docker-archive://}
{ echo SIF; cat "$src"; } > "$3"
"""


def test_a_sif_the_job_built_is_recorded_and_a_later_job_checks_it_not_its_name(tmp_path):
    shared = tmp_path / "shared"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "apptainer").write_text(STAND_IN)
    (bin_dir / "apptainer").chmod(0o755)
    image_id = "sha256:" + "ab" * 32
    archive = images.archive_path(shared, image_id)
    trust.kit_folder(archive.parent)
    archive.write_bytes(b"the image")
    sif = Path(images.reference("apptainer", shared, image_id))
    first_run = trust.kit_folder(shared / "runs" / "first")

    def job(use: script.ImageUse, run: Path) -> subprocess.CompletedProcess:
        env = dict(os.environ, PATH="%s:%s" % (bin_dir, os.environ["PATH"]),
                   SLURM_JOB_ID="7")
        return subprocess.run(["bash", "-c", "RUN=%s\n%s\necho the steps ran"
                               % (run, script.prepare_image(use))],
                              capture_output=True, text=True, timeout=30, env=env)

    built = script.ImageUse("apptainer", str(archive), str(sif),
                            hashlib.sha256(b"the image").hexdigest())
    assert job(built, first_run).stdout == "the steps ran\n"
    assert sif.read_bytes() == b"SIF\nthe image"
    assert list(sif.parent.glob("*.partial*")) == []
    # The login node takes the job's digest in: the SIF is now known by its bytes.
    manifest = trust.Manifest()
    assert images.take_in_made(first_run, shared, manifest) == [sif]
    assert manifest.digests[str(sif)] == hashlib.sha256(b"SIF\nthe image").hexdigest()
    assert images.take_in_made(first_run, shared, manifest) == []  # once
    out = io.StringIO()
    assert trust.Manifest().trusted(sif, "SIF", out) and out.getvalue() == ""
    # A later job is given the digest: it checks the SIF on its node and builds nothing.
    later = script.ImageUse("apptainer", str(archive), str(sif), built.archive_sha256,
                            sif_sha256=manifest.digests[str(sif)])
    line = script.prepare_image(later)
    assert "apptainer build" not in line
    later_run = trust.kit_folder(shared / "runs" / "later")
    assert job(later, later_run).stdout == "the steps ran\n"
    # Changed between the login node's look and the node's: the job stops before its steps.
    sif.write_bytes(b"SIF\nsomeone's image")
    stopped = job(later, later_run)
    assert stopped.returncode == 1 and "the steps ran" not in stopped.stdout
    assert jobcells._refused(later_run).startswith(str(sif))
    # On the login node, the changed SIF is removed, so that the next job builds it again.
    out = io.StringIO()
    assert not trust.Manifest().trusted(sif, "SIF", out) and not sif.exists()
    assert "is not the SIF this kit wrote there for you (its sha256 differs" in out.getvalue()


def test_only_a_sifs_name_and_a_digest_are_taken_in(tmp_path):
    shared, run = tmp_path / "shared", tmp_path / "run"
    made = run / script.MADE
    made.mkdir(parents=True)
    (made / ("ab" * 32 + ".sif.sha256")).write_text("not a digest\n")
    (made / "other.sif.sha256").write_text("0" * 64 + "\n")
    (made / ("cd" * 32 + ".sif.sha256")).symlink_to(made / "other.sif.sha256")
    assert images.take_in_made(run, shared, trust.Manifest()) == []
