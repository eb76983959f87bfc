"""What a Slurm job's steps read, put in shared_dir from the login node: the data set, the
user's workload and its inputs, each under the digest of its content and copied once; and the
names a step's container runtime could not mount, refused before anything is copied.
"""
from __future__ import annotations

import os
import secrets
import shlex
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from bench import workloads as catalog
from bench.errors import WorkloadError
from envbench.cells import dataset
from envbench.cells import expansion as cellmod
from envbench.matrix import inputs as inputmod
from envbench.matrix.inputs import InputPlan
from envbench.results.identity import DataIdentity
from envbench.slurm import trust
from envbench.user_errors import UserError


def copy_data(data_dir: Path, data: DataIdentity, shared: Path, out: TextIO,
              copy: bool = True) -> Path:
    """The data set in shared_dir/data/DIGEST, copied once and hashed again whenever it is
    found there (the digest names its content: a copy whose bytes are not those is set
    aside and copied again). ``copy`` False (--print): the command that would copy it,
    printed, nothing written."""
    where = shared / "data" / (data.sha256 or "unnamed")
    if not copy:
        if not (where / dataset.FOLDER).is_dir():
            print("cp -r %s %s" % (shlex.quote(str(data_dir)), shlex.quote(str(where))),
                  file=out)
        return where
    trust.kit_folder(where.parent)
    if where.exists() or where.is_symlink():
        found = _digest_or_none(lambda: dataset.digest(where))
        if found is not None and found == data.sha256:
            return where
        trust.discard(where, "is not the data set its name says (%s)" % (
            "its files' sha256 differs" if found else "its files cannot be read"), out)
    print("copying the data set to %s" % where, file=out, flush=True)
    partial = where.with_name(".%s.%s.partial" % (where.name, secrets.token_hex(4)))
    try:
        shutil.copytree(data_dir, partial, symlinks=False)
        os.chmod(partial, trust.FOLDER_MODE)
        partial.replace(where)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return where


def _digest_or_none(digest: Callable[[], str]) -> str | None:
    """A copy's digest, or None where it cannot be read whole (a file missing, a link)."""
    try:
        return digest()
    except (OSError, UserError, WorkloadError):
        return None


def copy_workload(cell: cellmod.Cell, shared: Path, out: TextIO, copy: bool = True) -> Path:
    """The user's workload in shared_dir/workloads/SHA256/NAME (its digest names it), its
    bytecode caches left out; hashed again whenever it is found there (one whose digest is
    not its name's is set aside and copied again). ``copy`` False (--print): the command,
    printed."""
    plan = cell.workload
    assert plan.path is not None
    refuse_separators("workload %s" % plan.name, plan.path.name)
    where = shared / "workloads" / (plan.sha256 or "unhashed") / plan.path.name
    if not copy:
        if not where.exists():
            print("mkdir -p %s && rsync -a --exclude __pycache__ %s %s"
                  % (shlex.quote(str(where.parent)), shlex.quote(str(plan.path)),
                     shlex.quote(str(where.parent) + "/")), file=out)
        return where
    trust.kit_folder(where.parent.parent)
    if where.parent.exists() or where.parent.is_symlink():
        found = _digest_or_none(lambda: catalog.digest(str(where)))
        if found is not None and found == plan.sha256:
            trust.check_folder(where.parent)
            return where
        trust.discard(where.parent, "is not workload %s's copy its name says (%s)" % (
            plan.name, "its sha256 differs" if found else "it cannot be read whole"), out)
    print("copying workload %s to %s" % (plan.name, where), file=out, flush=True)
    trust.kit_folder(where.parent)
    if plan.path.is_dir():
        shutil.copytree(plan.path, where, symlinks=False,
                        ignore=shutil.ignore_patterns("__pycache__"))
    else:
        shutil.copy2(plan.path, where)
    return where


# Characters Podman's --mount and Apptainer's or Pyxis's src:dst lists read as separators.
MOUNT_SEPARATORS = frozenset(",:")


def refuse_separators(what: str, name: str) -> None:
    """A file or folder name that a Slurm step's mount list would split, refused before
    anything is copied or submitted (Docker takes mounts as objects and needs no such rule;
    shared_dir is held to it by the matrix)."""
    if MOUNT_SEPARATORS & set(name):
        raise UserError("%s: a file name holding ',' or ':' (%s) cannot be handed to a Slurm "
                        "step's container runtime, which reads them as separators: rename it"
                        % (what, name))


# The leaf under shared_dir/inputs/SHA256 a folder input's copy is: its digest leaves the
# folder's own name out, so two names of one content share one copy.
FOLDER_LEAF = "folder"


def refuse_unmountable(cells: list[cellmod.Cell]) -> None:
    """Every workload and input name a step would mount, checked before anything is built,
    copied or submitted."""
    for cell in cells:
        plan = cell.workload
        if plan.path is not None:
            refuse_separators("workload %s" % plan.name, plan.path.name)
        for given in plan.inputs:
            refuse_separators("input %s" % given.name, given.file_name or FOLDER_LEAF)


def copy_input(given: InputPlan, shared: Path, out: TextIO, copy: bool = True) -> Path:
    """A workload's input in shared_dir/inputs/SHA256/ (a file under its name, a folder as
    FOLDER_LEAF), copied once (its digest names its content) and hashed again where it
    landed before it is used: the nodes read that copy, not this host's disk. ``copy``
    False (--print): the command, printed."""
    leaf = given.file_name or FOLDER_LEAF
    refuse_separators("input %s" % given.name, leaf)
    folder = shared / "inputs" / given.sha256
    where = folder / leaf
    if not copy:
        if not where.exists():
            print("mkdir -p %s && cp -r %s %s"
                  % (shlex.quote(str(folder)), shlex.quote(str(given.path)),
                     shlex.quote(str(where))), file=out)
        return where
    trust.kit_folder(folder.parent)
    if folder.exists() or folder.is_symlink():
        found = _digest_or_none(lambda: inputmod.digest(
            where, "the copy of input %s" % given.name, inputmod.DigestCache(load=False), None,
            given.file_name)[0])
        if found is not None and found == given.sha256:
            trust.check_folder(folder)
            return where
        trust.discard(folder, "is not input %s's copy its name says (%s)" % (
            given.name, "its sha256 differs" if found else "it cannot be read whole"), out)
    print("copying input %s (%s) to %s" % (given.name, given.path, where), file=out,
          flush=True)
    # Copied beside, checked, then renamed into place whole: a copy cut short is never taken
    # for the input, and a copy in use (another run's job may be reading it) never removed.
    staging = folder.with_name(".%s.%s.partial" % (given.sha256, secrets.token_hex(6)))
    try:
        staging.mkdir(mode=trust.FOLDER_MODE)
        os.chmod(staging, trust.FOLDER_MODE)  # the umask's modes aside
        if given.path.is_dir():
            shutil.copytree(given.path, staging / leaf, symlinks=False)
        else:
            shutil.copy2(given.path, staging / leaf)
        landed, _, _ = inputmod.digest(staging / leaf, "the copy of input %s" % given.name,
                                       inputmod.DigestCache(load=False), out,
                                       given.file_name)
        if landed != given.sha256:
            raise UserError("input %s: the copy in %s has sha256 %s, not the %s of %s: it "
                            "changed while it was copied, or shared_dir lost bytes; run again"
                            % (given.name, shared / "inputs", landed, given.sha256,
                               given.path))
        try:
            staging.rename(folder)
        except OSError:
            if not where.exists():  # else another run put the same copy there first
                raise
    except OSError as exc:
        raise UserError("input %s: copying %s into %s failed (%s): free space there, or "
                        "make it writable" % (given.name, given.path, shared / "inputs",
                                              exc.strerror or exc))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return where
