"""Ownership under sudo: only what the kit creates changes owner, never through a link."""
from __future__ import annotations

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
