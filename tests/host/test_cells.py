"""Cells: the cross product, the filters, --quick, stable ids and bench's command line."""
from __future__ import annotations

import pytest
from test_matrix import GOOD

from envbench import cells, matrix
from envbench.errors import UserError


@pytest.fixture
def m() -> matrix.Matrix:
    return matrix.parse(GOOD)


def test_cells_are_envs_times_compatible_targets_times_sweep_times_repeats(m):
    all_cells = cells.expand(m)
    # a: cpu only; g: gpu + cpu -> 3 pairs x 4 sweep points x 3 repeats
    assert len(all_cells) == 3 * 4 * 3
    assert len({c.id for c in all_cells}) == len(all_cells)
    assert {c.target for c in all_cells if c.environment == "a"} == {"cpu"}
    variants = {tuple(sorted(c.variant.items())) for c in all_cells}
    assert (("amp", "bf16"), ("batch_size", 32)) in variants


def test_filters_and_quick(m):
    assert {c.target for c in cells.expand(m, kind="cuda")} == {"gpu"}
    only = cells.expand(m, envs=["g"], targets=["cpu"])
    assert {(c.environment, c.target) for c in only} == {("g", "cpu")}
    quick = cells.expand(m, quick=True)
    assert len(quick) == 3 * 4 and all(c.settings["epochs"] == 1 for c in quick)
    with pytest.raises(UserError, match="unknown environment nope"):
        cells.expand(m, envs=["nope"])


def test_ids_are_stable_and_file_safe(m):
    first, again = cells.expand(m), cells.expand(m)
    assert [c.id for c in first] == [c.id for c in again]
    assert all("/" not in c.id and " " not in c.id for c in first)


def test_bench_args_carry_the_cell_settings(m):
    cell = next(c for c in cells.expand(m) if c.variant == {"batch_size": 32, "amp": "bf16"})
    args = cells.bench_args(cell, "cuda", synthetic=False)
    assert args[:2] == ["--device", "cuda"]
    assert args[args.index("--batch-size") + 1] == "32"
    assert args[args.index("--amp") + 1] == "bf16"
    assert args[args.index("--data") + 1] == "/data"
    assert args[-2:] == ["--out", "/results/%s.json" % cell.id]
    assert "--synthetic" in cells.bench_args(cell, "cpu", synthetic=True)
