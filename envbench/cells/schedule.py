"""The order cells run in: rounds, each one repeat of every measurement, shuffled.

Running every repeat of A, then every repeat of B, puts whatever drifts during a matrix (a
neighbour on a shared host, a GPU warming into its thermal limit, a filling page cache) on
one side only, where it reads as a difference between the stacks. In rounds, shuffled from
a recorded seed (Google Benchmark's random interleaving, asv's interleave rounds), drift
falls on every measurement alike; the seed replays an order. `grouped` keeps the old order
(every repeat of a cell together, the planned repeats only), for comparison.
"""
from __future__ import annotations

import random
import secrets
from dataclasses import dataclass, replace

from envbench.cells.expansion import Cell

MODES = ("interleaved", "grouped")


@dataclass(frozen=True)
class Slot:
    """A cell in its place: the round it runs in and its position in that round's order."""

    cell: Cell
    round: int
    position: int

    def record(self, mode: str, seed: int, max_repeats: int | None = None) -> dict[str, object]:
        """The result's order section; ``max_repeats`` where the run's repeats are auto (its
        verdicts then spend the share of their level that their look was given)."""
        out: dict[str, object] = {"mode": mode, "seed": seed, "round": self.round,
                                  "position": self.position}
        if max_repeats is not None:
            out["max_repeats"] = max_repeats
        return out


def new_seed() -> int:
    return secrets.randbelow(2**31)


def rounds(cells: list[Cell], mode: str, seed: int) -> list[list[Slot]]:
    """Round r holds repeat r of every measurement. Interleaved: each round's order is
    shuffled (one generator from ``seed`` for the whole run). Grouped: the matrix's order,
    every repeat of a measurement before the next measurement."""
    if mode == "grouped":
        return [[Slot(cell, cell.repeat, position) for position, cell in enumerate(cells)]]
    by_round: dict[int, list[Cell]] = {}
    for cell in cells:
        by_round.setdefault(cell.repeat, []).append(cell)
    rng = random.Random(seed)
    out = []
    for number in sorted(by_round):
        members = list(by_round[number])
        rng.shuffle(members)
        out.append([Slot(cell, number, position) for position, cell in enumerate(members)])
    return out


def extra_round(cells: list[Cell], number: int, mode: str, seed: int) -> list[Slot]:
    """A round added after the planned ones (more repeats where the answer is open, or the
    re-run of a contended repeat), shuffled from the run's seed and the round's number."""
    members = list(cells)
    if mode == "interleaved":
        random.Random("%d/%d" % (seed, number)).shuffle(members)
    return [Slot(cell, number, position) for position, cell in enumerate(members)]


def another_repeat(cell: Cell, repeat: int) -> Cell:
    return replace(cell, repeat=repeat)
