"""Ownership under sudo: only what the kit creates changes owner, never through a link."""
from __future__ import annotations

import io
import os

import pytest

from envbench import users

pytestmark = pytest.mark.skipif(os.getuid() != 0, reason="only root can act for another user")


@pytest.fixture
def as_sudo(monkeypatch):
    monkeypatch.setenv("SUDO_UID", "4242")
    monkeypatch.setenv("SUDO_GID", "4243")


def test_existing_folders_and_links_keep_their_owners(tmp_path, as_sudo):
    existing = tmp_path / "reports"
    existing.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (existing / "results").symlink_to(elsewhere)  # a link planted where results go
    users.prepare_dirs(existing, existing / "results", existing / "logs" / "deep")
    assert existing.stat().st_uid == 0
    assert elsewhere.stat().st_uid == 0 and (existing / "results").lstat().st_uid == 0
    assert (existing / "logs").stat().st_uid == 4242  # created here: the caller's
    assert (existing / "logs" / "deep").stat().st_gid == 4243


def test_own_never_follows_a_link(tmp_path, as_sudo):
    target = tmp_path / "root-file"
    target.write_text("x")
    link = tmp_path / "result.json"
    link.symlink_to(target)
    users.own(link)
    assert target.stat().st_uid == 0 and link.lstat().st_uid == 0
    mine = tmp_path / "written.json"
    mine.write_text("{}")
    users.own(mine)
    assert mine.stat().st_uid == 4242


def _owners(folder):
    return {p.relative_to(folder).as_posix(): p.lstat().st_uid for p in folder.rglob("*")}


def test_the_report_and_the_cloud_runs_are_the_callers(tmp_path, as_sudo):
    """Every file of a report (and REPORTS/cloud/runs.json), written as root under sudo, is
    the caller's, so the caller can open, move and delete it without sudo."""
    from report_fixture import write_set

    from envbench.report import pages
    from envbench.results import clusters
    from envbench.results.clusters import ClusterRun

    results = tmp_path / "results"
    write_set(results)
    reports = tmp_path / "reports"
    pages.render_files([results], reports)
    clusters.write(reports, "local", [ClusterRun("vm", "envbench-vm", "CPU VM", "ssh/local",
                                                 0.05, "matrix")])
    assert _owners(reports) == {"cloud": 4242, "cloud/runs.json": 4242, "index.html": 4242,
                                "summary.md": 4242, "results.csv": 4242}


def test_what_the_kit_writes_in_a_new_folder_is_the_callers_folder_and_all(tmp_path, as_sudo):
    """users.write_text: how locks, task YAMLs, cloud logs and reports are written."""
    users.write_text(tmp_path / "locks" / "env.pylock.toml", "lock\n")
    assert _owners(tmp_path) == {"locks": 4242, "locks/env.pylock.toml": 4242}
    assert tmp_path.stat().st_uid == 0  # it existed: not the kit's to hand over


def test_the_cache_follows_its_folders_owner(tmp_path, as_sudo):
    """A cache in the caller's home (sudo -E) becomes the caller's; in root's home (sudo's
    usual HOME) it stays root's: the kit never hands root's folders away."""
    import tarfile

    from cifar_fixture import write_cifar

    from envbench.cells import dataset

    write_cifar(str(tmp_path / "src"), per_batch=20, test_count=20)
    archive = tmp_path / "cifar-10-python.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(str(tmp_path / "src" / dataset.FOLDER), arcname=dataset.FOLDER)
    md5 = dataset.md5sum(archive)
    callers_home = tmp_path / "home"
    callers_home.mkdir()
    os.chown(callers_home, 4242, 4243)
    roots_home = tmp_path / "root-home"
    roots_home.mkdir()
    for home in (callers_home, roots_home):
        dataset.fetch(home / ".cache" / "envbench" / "cifar10", url=archive.as_uri(), md5=md5,
                      out=io.StringIO())
    mine = _owners(callers_home)
    assert mine[".cache/envbench/cifar10/cifar-10-python.tar.gz"] == 4242
    assert mine[".cache/envbench/cifar10/%s/data_batch_1" % dataset.FOLDER] == 4242
    assert set(mine.values()) == {4242}, mine
    assert set(_owners(roots_home).values()) == {0}
