"""Writes small CIFAR-10-shaped sets in the official python layout (for tests and smoke runs).

The official files are pickles of {'batch_label', 'labels', 'data' (uint8 N×3072), 'filenames'}.
The images here are learnable: each class is a fixed colour template plus noise.
"""
from __future__ import annotations

import os
import pickle

import numpy as np

from bench.rules import CIFAR_FOLDER as FOLDER

LABEL_NAMES = ["airplane", "automobile", "bird", "cat", "deer",
               "dog", "frog", "horse", "ship", "truck"]


def make_batch(count: int, rng: np.random.Generator, templates: np.ndarray, name: str) -> dict:
    labels = rng.integers(0, 10, size=count)
    noise = rng.integers(0, 256, size=(count, 3072))
    data = ((templates[labels].astype(np.int64) + noise) // 2).astype(np.uint8)
    return {
        "batch_label": name,
        "labels": [int(x) for x in labels],
        "data": data,
        "filenames": ["img_%s_%05d.png" % (name.replace(" ", "_"), i) for i in range(count)],
    }


def write_cifar(root: str, per_batch: int = 200, test_count: int = 200, seed: int = 0) -> str:
    """Create ROOT/cifar-10-batches-py/ with data_batch_1..5, test_batch, batches.meta."""
    folder = os.path.join(root, FOLDER)
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(seed)
    templates = rng.integers(0, 256, size=(10, 3072))
    files = [("data_batch_%d" % i, per_batch, "training batch %d of 5" % i) for i in range(1, 6)]
    files.append(("test_batch", test_count, "testing batch 1 of 1"))
    for filename, count, label in files:
        with open(os.path.join(folder, filename), "wb") as f:
            pickle.dump(make_batch(count, rng, templates, label), f, protocol=2)
    with open(os.path.join(folder, "batches.meta"), "wb") as f:
        pickle.dump({"label_names": LABEL_NAMES, "num_cases_per_batch": per_batch,
                     "num_vis": 3072}, f, protocol=2)
    return root


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("root")
    parser.add_argument("--per-batch", type=int, default=200)
    parser.add_argument("--test-count", type=int, default=200)
    args = parser.parse_args()
    print(write_cifar(args.root, args.per_batch, args.test_count))
