"""bench's CIFAR reader against hand-made pickles, the generated layout, and bad files."""
from __future__ import annotations

import os
import pickle

import pytest
import torch

from bench import datasets as data
from bench.errors import DataError

np = pytest.importorskip("numpy", reason="numpy writes the official layout's test files")


def _write(path, obj):
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=2)


def test_reader_rebuilds_a_hand_made_batch(tmp_path):
    raw = np.arange(2 * 3072, dtype=np.int64).astype(np.uint8).reshape(2, 3072)
    _write(tmp_path / "b", {"batch_label": "x", "labels": [3, 7], "data": raw,
                            "filenames": ["a.png", "b.png"]})
    images, labels = data.read_batch(str(tmp_path / "b"))
    assert images.dtype == torch.uint8 and tuple(images.shape) == (2, 3, 32, 32)
    assert labels.tolist() == [3, 7]
    # Official layout: 1024 red, then 1024 green, then 1024 blue bytes, each row-major 32x32.
    assert images[1, 0, 0, 0].item() == raw[1, 0]
    assert images[0, 1, 0, 0].item() == raw[0, 1024]
    assert images[0, 2, 31, 31].item() == raw[0, 3071]
    assert images.flatten().tolist() == raw.flatten().tolist()


def test_reader_refuses_classes_other_than_arrays(tmp_path):
    class Evil:
        def __reduce__(self):
            return (os.system, ("true",))

    _write(tmp_path / "evil", {"labels": [0], "data": Evil()})
    with pytest.raises(DataError, match="evil.*refusing to load"):
        data.read_batch(str(tmp_path / "evil"))


def test_missing_and_truncated_files_name_the_file(tmp_path, cifar_dir):
    with pytest.raises(DataError, match="nowhere.*cifar-10-batches-py"):
        data.load_cifar(str(tmp_path / "nowhere"))
    with pytest.raises(DataError, match="data_batch_9: file not found"):
        data.read_batch(str(tmp_path / "data_batch_9"))
    whole = open(os.path.join(cifar_dir, data.FOLDER, "data_batch_1"), "rb").read()
    (tmp_path / "cut").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(DataError, match="cut: not a CIFAR-10 batch"):
        data.read_batch(str(tmp_path / "cut"))
    raw = np.zeros((2, 3072), dtype=np.uint8)
    _write(tmp_path / "short", {"labels": [1, 2, 3], "data": raw})
    with pytest.raises(DataError, match="short: truncated"):
        data.read_batch(str(tmp_path / "short"))


def test_generated_set_loads_with_limits(cifar_dir):
    (train_x, train_y), (test_x, test_y) = data.load_cifar(cifar_dir)
    assert tuple(train_x.shape) == (1000, 3, 32, 32) and len(train_y) == 1000
    assert tuple(test_x.shape) == (200, 3, 32, 32) and len(test_y) == 200
    (small_x, small_y), (small_tx, _) = data.load_cifar(cifar_dir, limit=150, limit_test=20)
    assert len(small_x) == 150 and len(small_tx) == 20
    assert torch.equal(small_x, train_x[:150]) and torch.equal(small_y, train_y[:150])


def test_synthetic_is_seeded_and_shaped():
    (a, la), (ta, _) = data.synthetic(1, limit=64, limit_test=16)
    (b, lb), _ = data.synthetic(1, limit=64, limit_test=16)
    (c, _), _ = data.synthetic(2, limit=64, limit_test=16)
    assert tuple(a.shape) == (64, 3, 32, 32) and a.dtype == torch.uint8 and len(ta) == 16
    assert torch.equal(a, b) and torch.equal(la, lb) and not torch.equal(a, c)
