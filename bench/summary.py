"""A run's summary figures from its epochs: no torch, so the host's tests and the mutation
run exercise it directly."""
from __future__ import annotations

import statistics


def summarise(epochs, weights_digest, forward_dtype):
    """The first epoch pays for warm-up (allocator, caches, lazy init, compilation), so the
    run's epoch time and throughput are medians over the epochs after it; a one-epoch run
    has only that one to report."""
    walls = [e["wall_s"] for e in epochs]
    rates = [e["samples_per_s"] for e in epochs]
    steady = walls[1:] or walls
    return {
        "epoch_s_median": statistics.median(steady) if steady else None,
        "first_epoch_s": walls[0] if walls else None,
        "samples_per_s": statistics.median(rates[1:] or rates) if rates else None,
        "final_test_acc": epochs[-1]["test_acc"] if epochs else None,
        "final_test_loss": epochs[-1].get("test_loss") if epochs else None,
        "weights_sha256": weights_digest,
        "forward_dtype": forward_dtype,
    }
