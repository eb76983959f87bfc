"""A run's summary figures from its epochs: no torch, so the host's tests and the mutation
run exercise it directly."""
from __future__ import annotations

import statistics
from typing import Sequence, TypeVar

T = TypeVar("T")


def steady(values: Sequence[T]) -> Sequence[T]:
    """A run's per-epoch figures (walls, rates) without its first epoch, which pays for
    warm-up (allocator, caches, lazy init, compilation); a one-epoch run has only that one.
    The rule bench summarises by and the host checks a summary against (results/crossfoot)."""
    return values[1:] or values


def summarise(epochs, weights_digest, forward_dtype):
    """The run's epoch time and throughput are medians over its steady epochs."""
    walls = [e["wall_s"] for e in epochs]
    rates = [e["samples_per_s"] for e in epochs]
    return {
        "epoch_s_median": statistics.median(steady(walls)) if walls else None,
        "first_epoch_s": walls[0] if walls else None,
        "samples_per_s": statistics.median(steady(rates)) if rates else None,
        "final_test_acc": epochs[-1]["test_acc"] if epochs else None,
        "final_test_loss": epochs[-1].get("test_loss") if epochs else None,
        "weights_sha256": weights_digest,
        "forward_dtype": forward_dtype,
    }
