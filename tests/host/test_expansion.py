"""Cells: the cross product, the filters, --quick, and bench's command line and config."""
from __future__ import annotations

import pytest
from test_matrix import GOOD

from bench import result
from envbench.cells import expansion
from envbench.errors import UserError
from envbench.matrix import models
from envbench.results.identity import SYNTHETIC, DataIdentity


@pytest.fixture
def m() -> models.Matrix:
    return models.parse(GOOD)


def test_cells_are_envs_times_compatible_targets_times_sweep_times_repeats(m):
    all_cells = expansion.expand(m)
    # a: cpu only; g: gpu + cpu -> 3 pairs x 4 sweep points x 3 repeats
    assert len(all_cells) == 3 * 4 * 3 == m.cell_count()
    stems = {expansion.prepare(c, m.targets[c.target], 2, SYNTHETIC, "sha256:x").file_stem
             for c in all_cells}
    assert len(stems) == len(all_cells)
    assert {c.target for c in all_cells if c.environment == "a"} == {"cpu"}
    variants = {tuple(sorted(c.variant.items())) for c in all_cells}
    assert (("amp", "bf16"), ("batch_size", 32)) in variants


def test_filters_and_quick(m):
    assert {c.target for c in expansion.expand(m, kind="cuda")} == {"gpu"}
    only = expansion.expand(m, envs=["g"], targets=["cpu"])
    assert {(c.environment, c.target) for c in only} == {("g", "cpu")}
    quick = expansion.expand(m, quick=True)
    assert len(quick) == 3 * 4 and all(c.settings["epochs"] == 1 and c.quick for c in quick)
    with pytest.raises(UserError, match="unknown environment nope"):
        expansion.expand(m, envs=["nope"])


def test_bench_args_carry_the_cell_settings_and_the_planned_threads(m):
    cell = next(c for c in expansion.expand(m) if c.variant == {"batch_size": 32, "amp": "bf16"}
                and c.target == "gpu")
    p = expansion.prepare(cell, m.targets["gpu"], 4, DataIdentity("cifar10", "a" * 64),
                      "sha256:x")
    args = p.command()
    assert args[:2] == ["--device", "cuda"]
    assert args[args.index("--batch-size") + 1] == "32"
    assert args[args.index("--amp") + 1] == "bf16"
    assert args[args.index("--data") + 1] == "/data"
    assert args[args.index("--threads") + 1] == "4"  # the host's cores: the target sets none
    assert args[-2:] == ["--out", "/results/%s.json" % p.file_stem]
    cpu_cell = next(c for c in expansion.expand(m) if c.target == "cpu")
    synthetic = expansion.prepare(cpu_cell, m.targets["cpu"], 32, SYNTHETIC, "sha256:x")
    assert "--synthetic" in synthetic.args
    assert synthetic.args[synthetic.args.index("--threads") + 1] == "8"  # cpus: 8


def test_the_host_knows_the_config_bench_will_record(m):
    """bench's own parser turns the command line into the config section: every required
    key is there, with the values the cell asked for."""
    cell = expansion.expand(m)[0]
    p = expansion.prepare(cell, m.targets[cell.target], 2, SYNTHETIC, None)
    assert set(result.REQUIRED["config"]) <= set(p.config)
    assert p.config["batch_size"] == cell.settings["batch_size"]
    assert p.config["threads"] == p.resources.threads == 2
    assert p.config["synthetic"] is True and p.config["data"] is None
