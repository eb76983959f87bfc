"""Scaling by nodes: a ddp cell across N nodes of a Slurm allocation against the same cell on
one node (the same stack, target, ranks per node and options), as MLPerf Training and the
scaling write-ups report it: epoch time and throughput at each node count, scaling
efficiency T1 / (N x TN), and the all-reduce bus bandwidth each multi-node cell measured
before its first epoch (bench.nodes; busbw = algbw x 2(n-1)/n, as nccl-tests reports).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from envbench.inference import stats
from envbench.report import grouping, scaling
from envbench.report.grouping import Group
from envbench.results.identity import variant_text

NODE_OPTIONS = ("nodes",)


def nodes_of(g: Group) -> int:
    return int(g.config.get("nodes") or 1)


def _across(g: Group, key: str) -> Any:
    """A figure every multi-node record of the group has (the first ok one's)."""
    for r in g.ok:
        value = (r.raw.get("parallel") or {}).get(key)
        if value is not None:
            return value
    return None


@dataclass
class NodeRow:
    group: Group
    one_node: Group
    nodes: int

    @property
    def efficiency(self) -> float | None:
        """T1 / (N x TN): 100% where N nodes take 1/N of one node's epoch."""
        t1, tn = self.one_node.epoch_s, self.group.epoch_s
        return t1 / (self.nodes * tn) if t1 and tn else None

    @property
    def speedup(self) -> float | None:
        t1, tn = self.one_node.epoch_s, self.group.epoch_s
        return t1 / tn if t1 and tn else None

    @property
    def busbw_gbps(self) -> float | None:
        """The median over the group's repeats of the bus bandwidth each measured."""
        said = [((r.raw.get("parallel") or {}).get("allreduce") or {}).get("busbw_gbps")
                for r in self.group.ok]
        values = [float(v) for v in said if v is not None]
        return stats.median(values) if values else None

    @property
    def interface(self) -> str | None:
        value = _across(self.group, "interface")
        return None if value is None else str(value)

    @property
    def hosts(self) -> list[str]:
        return list(_across(self.group, "hosts") or [])

    @property
    def ranks_per_node(self) -> int:
        """As recorded across nodes; on one node, every rank the cell ran."""
        value = _across(self.group, "ranks_per_node")
        return int(value) if value is not None else scaling.parallel_of(self.group).world_size

    @property
    def rest(self) -> str:
        return variant_text({k: v for k, v in self.group.variant.items()
                             if k not in NODE_OPTIONS})


def rows(groups: list[Group]) -> list[NodeRow]:
    """Each group across nodes with a one-node counterpart, and that counterpart's own row
    first (N = 1: the baseline every figure of its set is read against)."""
    ones: dict[str, Group] = {}
    for g in groups:
        if g.epoch_s is not None and nodes_of(g) == 1:
            ones.setdefault(grouping.signature(g, NODE_OPTIONS), g)
    out: list[NodeRow] = []
    for g in groups:
        count = nodes_of(g)
        one = ones.get(grouping.signature(g, NODE_OPTIONS))
        if count > 1 and g.epoch_s is not None and one is not None:
            if not any(row.group is one for row in out):
                out.append(NodeRow(one, one, 1))
            out.append(NodeRow(g, one, count))
    return sorted(out, key=lambda r: (r.group.environment, r.group.target, r.rest, r.nodes))
