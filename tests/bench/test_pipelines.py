"""Both pipelines see every training sample exactly once per epoch, with the same arithmetic."""
from __future__ import annotations

import torch
from bench_helpers import needs_torchvision

from bench import pipelines


def _identity_set(count):
    images = torch.randint(0, 256, (count, 3, 32, 32), dtype=torch.uint8)
    return images, torch.arange(count)


def _seen_labels(pipeline):
    return sorted(int(y) for _, labels in pipeline.train_batches() for y in labels)


def test_resident_sees_every_sample_once_and_reshuffles():
    train, test = _identity_set(1000), _identity_set(100)
    pipe = pipelines.Resident(train, test, torch.device("cpu"), 64, 0, seed=0)
    assert _seen_labels(pipe) == list(range(1000))
    first = [int(y) for _, labels in pipe.train_batches() for y in labels]
    second = [int(y) for _, labels in pipe.train_batches() for y in labels]
    assert sorted(second) == list(range(1000)) and first != second
    assert sum(len(y) for _, y in pipe.test_batches()) == 100


@needs_torchvision
def test_classic_sees_every_sample_once():
    train, test = _identity_set(300), _identity_set(50)
    pipe = pipelines.Classic(train, test, torch.device("cpu"), 32, 2, seed=0)
    assert _seen_labels(pipe) == list(range(300))
    assert sum(len(y) for _, y in pipe.test_batches()) == 50


@needs_torchvision
def test_classic_and_resident_normalise_identically():
    train = _identity_set(64)
    classic = pipelines.Classic(train, train, torch.device("cpu"), 64, 0, seed=0)
    resident = pipelines.Resident(train, train, torch.device("cpu"), 64, 0, seed=0)
    (classic_x, _), = list(classic.test_batches())
    (resident_x, _), = list(resident.test_batches())
    assert torch.allclose(classic_x, resident_x, atol=1e-6)
    assert classic_x.min() >= -1 and classic_x.max() <= 1
