"""Fair CPU baselines: threads, quota and cores derived from the target and the host."""
from __future__ import annotations

from pathlib import Path

import pytest

from envbench.cells import cellspec, expansion, resources
from envbench.engine import sandbox
from envbench.matrix import models
from envbench.matrix.models import Target
from envbench.results.identity import SYNTHETIC as SYNTHETIC_DATA

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("host, expected", [(2, 2), (32, 32)])
def test_every_default_cpu_cell_runs_one_thread_per_host_core(host, expected):
    """The default matrix's CPU target names no cpus: its cells use the whole host, with as
    many torch threads as it has cores (not torch's default, not one)."""
    m = models.load(ROOT / "matrix.yaml")
    cpu_cells = [c for c in expansion.expand(m) if m.targets[c.target].device == "cpu"]
    assert cpu_cells
    for cell in cpu_cells:
        p = expansion.prepare(cell, m.targets[cell.target], host, SYNTHETIC_DATA, None)
        assert (p.resources.threads, p.resources.threads_from) == (expected, "host")
        assert p.args[p.args.index("--threads") + 1] == str(expected)
        assert p.resources.cpus is None and p.resources.cpuset is None


@pytest.mark.parametrize("target, host, threads, cpus, cpuset, source", [
    (Target(device="cpu", cpus=8), 32, 8, 8, "0-7", "cpus"),
    (Target(device="cpu", cpus=8), 2, 2, 2, "0-1", "cpus"),       # capped to the host
    (Target(device="cpu", cpus=1), 4, 1, 1, "0", "cpus"),
    (Target(device="cpu", cpuset="2-3,6"), 8, 3, 3, "2-3,6", "cpuset"),
    (Target(device="cpu", cpus=4, cpuset="4-7"), 8, 4, 4, "4-7", "cpus"),
    (Target(device="cpu"), 16, 16, None, None, "host"),
    (Target(device="cuda", gpus=2), 64, 64, None, None, "host"),
])
def test_threads_quota_and_cores_agree(target, host, threads, cpus, cpuset, source):
    res = resources.plan(target, host)
    assert (res.threads, res.cpus, res.cpuset, res.threads_from) == (threads, cpus, cpuset,
                                                                      source)
    limits = _docker(res)
    assert limits.get("nano_cpus") == (cpus * 10**9 if cpus else None)
    assert limits.get("cpuset_cpus") == cpuset


def _docker(res: resources.Resources) -> dict:
    """The limits as the engine gets them: the cell's spec rendered for Docker."""
    spec = cellspec.cell_spec("a__cpu__r0", "sha256:0", "sha256:0", "envbench/a:0", [], res,
                              cellspec.CellFiles(results="/tmp/x"), None)
    return sandbox.docker_options(spec)


def test_an_explicit_thread_count_wins_and_says_so():
    res = resources.plan(Target(device="cpu", cpus=8), 32, threads=3)
    assert (res.threads, res.threads_from, res.cpus) == (3, "matrix", 8)
    assert "3 threads (as the matrix says)" in res.describe()


def test_memory_and_swap_limits():
    no_swap = _docker(resources.plan(Target(device="cpu", memory="4g"), 2))
    assert no_swap["mem_limit"] == no_swap["memswap_limit"] == 4 * 2**30
    swap = resources.plan(Target(device="cpu", memory="512m", swap="1g"), 2)
    limits = _docker(swap)
    assert limits["mem_limit"] == 512 * 2**20 and limits["memswap_limit"] == 512 * 2**20 + 2**30
    assert "memory 512m + swap 1g" in swap.describe()
    assert models.size_bytes("1024") == 1024
    with pytest.raises(ValueError):
        models.size_bytes("1t")
