"""Two ways to feed the same train step, for every workload.

classic:  the CIFAR-10 tutorial as people run it: PIL image per sample, ToTensor, Normalize,
          DataLoader(shuffle=True, num_workers=2); pinned memory on CUDA unless
          --pin-memory off. A workload whose inputs are tensors (token ids, a user's
          features; a tuple or dict of them, bench.batches) gets the same DataLoader over
          its rows: per-sample indexing and collation in the workers, no image transforms.
          Under ddp each rank reads its shard through DistributedSampler, as the write-up
          does (it repeats up to world_size - 1 samples so that every rank has as many;
          the record counts them).
resident: the whole set normalised once into one tensor on the device (tensor inputs as
          they are, every tensor of a tuple or dict alike), shuffled each epoch with
          randperm on the device; a batch is an index, with no per-step host work. Under
          ddp every rank draws the same permutation and takes every world_size-th index
          from its rank on: the shards add up to the set once, with no repeats.

``shard`` is (rank, world_size) under ddp, else None. ``batch_size`` is what one loader batch
holds: under dp the trainer passes nproc x the per-device batch (dp scatters it).
Targets may be None (a model that computes its own loss from its inputs): the pipelines then
yield (inputs, None).
"""
from __future__ import annotations

import torch

from bench import batches
from bench.errors import UnsupportedOption

MEAN = STD = (0.5, 0.5, 0.5)


def _torchvision_transforms():
    try:
        from torchvision import transforms
    except ImportError as exc:
        raise UnsupportedOption("--pipeline classic needs torchvision, which this image lacks "
                                "(%s); use --pipeline resident" % exc)
    return transforms


class CifarDataset(torch.utils.data.Dataset):
    """Same per-sample work as torchvision.datasets.CIFAR10: HWC uint8 -> PIL -> transform
    (any image size: resnet50's 224x224 images take the same path)."""

    def __init__(self, images, labels, transform):
        from PIL import Image  # torchvision depends on Pillow and numpy

        self._to_pil = Image.fromarray
        self.data = images.permute(0, 2, 3, 1).contiguous().numpy()
        self.targets = labels.tolist()
        self.transform = transform

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, index):
        image = self.transform(self._to_pil(self.data[index]))
        return image, self.targets[index]


class RowsDataset(torch.utils.data.Dataset):
    """Sample i of inputs in any form (bench.batches) and of its targets, if any: the
    DataLoader's default collation batches tuples and dicts as it does tensors."""

    def __init__(self, inputs, targets):
        self.inputs = inputs
        self.targets = targets

    def __len__(self):
        return batches.rows(self.inputs)

    def __getitem__(self, index):
        sample = batches.select(self.inputs, index)
        if self.targets is None:
            return (sample,)
        return sample, self.targets[index]


def _pairs(loader):
    """(inputs, targets) from a loader of RowsDataset samples: targets None where the set
    has none."""
    for batch in loader:
        yield batch[0], (batch[1] if len(batch) > 1 else None)


class Classic:
    name = "classic"

    def __init__(self, train, test, device, batch_size, workers, seed, pin_memory=False,
                 shard=None, inputs="images"):
        if inputs == "images":
            transforms = _torchvision_transforms()
            transform = transforms.Compose([transforms.ToTensor(),
                                            transforms.Normalize(MEAN, STD)])

            def dataset(pair):
                return CifarDataset(pair[0], pair[1], transform)
        else:
            def dataset(pair):
                return RowsDataset(pair[0], pair[1])
        train_set = dataset(train)
        self.sampler = None
        if shard is not None:
            from torch.utils.data.distributed import DistributedSampler

            rank, world_size = shard
            self.sampler = DistributedSampler(train_set, num_replicas=world_size, rank=rank,
                                              shuffle=True, seed=seed)
            self.train_loader = torch.utils.data.DataLoader(
                train_set, batch_size=batch_size, sampler=self.sampler, num_workers=workers,
                pin_memory=pin_memory)
        else:
            generator = torch.Generator().manual_seed(seed)
            self.train_loader = torch.utils.data.DataLoader(
                train_set, batch_size=batch_size, shuffle=True, num_workers=workers,
                pin_memory=pin_memory, generator=generator)
        self.test_loader = torch.utils.data.DataLoader(
            dataset(test), batch_size=batch_size, shuffle=False,
            num_workers=workers, pin_memory=pin_memory)
        self.train_size = batches.rows(train[0])

    def repeated_per_epoch(self):
        """Samples DistributedSampler repeats so that every rank gets as many (all ranks)."""
        return self.sampler.total_size - self.train_size if self.sampler is not None else 0

    def common_steps(self):
        """The train batches every rank has: all of them (DistributedSampler evens the shards)."""
        return len(self.train_loader)

    def train_batches(self, epoch=0):
        if self.sampler is not None:
            self.sampler.set_epoch(epoch)  # a new shuffle each epoch, the same on every rank
        return _pairs(self.train_loader)

    def test_batches(self):
        return _pairs(self.test_loader)


def normalise(images):
    """uint8 NCHW -> float in [-1, 1]: the arithmetic of ToTensor() + Normalize(0.5, 0.5)."""
    return images.float().div_(255.0).sub_(0.5).div_(0.5)


class Resident:
    name = "resident"

    def __init__(self, train, test, device, batch_size, workers, seed, pin_memory=False,
                 shard=None, inputs="images"):
        self.batch_size = batch_size
        self.shard = shard
        prepare = normalise if inputs == "images" else (lambda tensor: tensor)
        self.train_x = batches.apply(prepare, batches.move(train[0], device, False))
        self.train_y = batches.move(train[1], device, False)
        self.test_x = batches.apply(prepare, batches.move(test[0], device, False))
        self.test_y = batches.move(test[1], device, False)
        self.device = device
        self.generator = torch.Generator(device=device).manual_seed(seed)
        self.train_size = batches.rows(train[0])
        self.test_size = batches.rows(test[0])

    def repeated_per_epoch(self):
        return 0

    def common_steps(self):
        """The train batches every rank has. Rank r's shard holds ceil((N - r) / world_size)
        samples, so the last rank's, N // world_size, is the smallest: the others may have
        one batch more."""
        rank_samples = self.train_size // self.shard[1] if self.shard else self.train_size
        return -(-rank_samples // self.batch_size)

    def train_batches(self, epoch=0):
        order = torch.randperm(self.train_size, device=self.device,
                               generator=self.generator)
        if self.shard is not None:
            rank, world_size = self.shard
            order = order[rank::world_size]
        for start in range(0, len(order), self.batch_size):
            index = order[start:start + self.batch_size]
            yield batches.select(self.train_x, index), batches.select(self.train_y, index)

    def test_batches(self):
        for start in range(0, self.test_size, self.batch_size):
            rows = slice(start, start + self.batch_size)
            yield batches.select(self.test_x, rows), batches.select(self.test_y, rows)


PIPELINES = {"classic": Classic, "resident": Resident}
