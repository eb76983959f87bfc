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


def _shards(cls, count, world, batch, epoch=0):
    train, test = _identity_set(count), _identity_set(10)
    seen = []
    for rank in range(world):
        pipe = cls(train, test, torch.device("cpu"), batch, 0, seed=3, shard=(rank, world))
        seen.append([int(y) for _, labels in pipe.train_batches(epoch) for y in labels])
    return seen, pipe.repeated_per_epoch()


def test_resident_shards_add_up_to_the_set_once_per_epoch():
    for world in (1, 2, 3):
        for epoch in (0, 1):
            seen, repeated = _shards(pipelines.Resident, 1001, world, 64, epoch)
            assert sorted(sum(seen, [])) == list(range(1001)) and repeated == 0
            assert max(map(len, seen)) - min(map(len, seen)) <= 1
    # World size 1 is the unsharded pipeline, batch for batch (what makes ddp x1 == none).
    train, test = _identity_set(300), _identity_set(10)
    plain = pipelines.Resident(train, test, torch.device("cpu"), 32, 0, seed=3)
    sharded = pipelines.Resident(train, test, torch.device("cpu"), 32, 0, seed=3, shard=(0, 1))
    for (_, a), (_, b) in zip(plain.train_batches(), sharded.train_batches()):
        assert torch.equal(a, b)


@needs_torchvision
def test_classic_shards_are_distributed_sampler_s():
    seen, repeated = _shards(pipelines.Classic, 301, 2, 32)
    # DistributedSampler gives every rank as many samples: 301 -> 151 + 151, one repeated.
    assert repeated == 1 and list(map(len, seen)) == [151, 151]
    assert sorted(set(sum(seen, []))) == list(range(301))
    again, _ = _shards(pipelines.Classic, 301, 2, 32, epoch=1)
    assert again != seen  # set_epoch reshuffles
