"""The per-cell /results folders: each new one empty and private to its cell, and those a
killed run left removed at the next start without following a link out of the folder."""
from __future__ import annotations

import os
from pathlib import Path

from envbench.cells import containerrun


def _mounts(tmp_path: Path) -> containerrun.Mounts:
    return containerrun.Mounts(tmp_path / "results", tmp_path / "logs", None,
                               tmp_path / "reports" / ".cells")


def test_each_cell_gets_a_new_empty_folder(tmp_path):
    mounts = _mounts(tmp_path)
    first = containerrun.cell_folder(mounts)
    (first / "left.json").write_text("{}")
    second = containerrun.cell_folder(mounts)
    assert first != second and first.parent == second.parent == mounts.cells_dir
    assert os.listdir(second) == []
    assert oct(second.stat().st_mode & 0o777) == "0o700"  # no other user reads a cell's output


def test_a_killed_runs_folders_are_removed_and_links_are_not_followed(tmp_path):
    mounts = _mounts(tmp_path)
    left = containerrun.cell_folder(mounts)
    (left / "half.json").write_text("{")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("kept")
    (mounts.cells_dir / "cell-link").symlink_to(outside)
    (mounts.cells_dir / "unrelated").mkdir()  # not one of the kit's: left alone
    assert containerrun.remove_cell_folders(mounts.cells_dir) == 2
    assert sorted(os.listdir(mounts.cells_dir)) == ["unrelated"]
    assert (outside / "keep.txt").read_text() == "kept"


def test_no_cells_folder_yet_is_nothing_to_remove(tmp_path):
    assert containerrun.remove_cell_folders(tmp_path / "absent") == 0
