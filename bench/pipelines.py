"""Two ways to feed the same train step.

classic:  the CIFAR-10 tutorial as people run it: PIL image per sample, ToTensor, Normalize,
          DataLoader(shuffle=True, num_workers=2); pin_memory + non_blocking copies on CUDA.
resident: the whole set normalised once into one tensor on the device, shuffled each epoch
          with randperm on the device; a batch is an index, with no per-step host work.
"""
from __future__ import annotations

import torch

from bench.compat import UnsupportedOption

MEAN = STD = (0.5, 0.5, 0.5)


def _torchvision_transforms():
    try:
        from torchvision import transforms
    except ImportError as exc:
        raise UnsupportedOption("--pipeline classic needs torchvision, which this image lacks "
                                "(%s); use --pipeline resident" % exc)
    return transforms


class CifarDataset(torch.utils.data.Dataset):
    """Same per-sample work as torchvision.datasets.CIFAR10: HWC uint8 -> PIL -> transform."""

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


class Classic:
    name = "classic"

    def __init__(self, train, test, device, batch_size, workers, seed):
        transforms = _torchvision_transforms()
        transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize(MEAN, STD)])
        pin = device.type == "cuda"
        generator = torch.Generator().manual_seed(seed)
        self.train_loader = torch.utils.data.DataLoader(
            CifarDataset(train[0], train[1], transform), batch_size=batch_size, shuffle=True,
            num_workers=workers, pin_memory=pin, generator=generator)
        self.test_loader = torch.utils.data.DataLoader(
            CifarDataset(test[0], test[1], transform), batch_size=batch_size, shuffle=False,
            num_workers=workers, pin_memory=pin)
        self.train_size = len(train[1])

    def train_batches(self):
        return iter(self.train_loader)

    def test_batches(self):
        return iter(self.test_loader)


def normalise(images):
    """uint8 NCHW -> float in [-1, 1]: the arithmetic of ToTensor() + Normalize(0.5, 0.5)."""
    return images.float().div_(255.0).sub_(0.5).div_(0.5)


class Resident:
    name = "resident"

    def __init__(self, train, test, device, batch_size, workers, seed):
        self.batch_size = batch_size
        self.train_x = normalise(train[0].to(device))
        self.train_y = train[1].to(device)
        self.test_x = normalise(test[0].to(device))
        self.test_y = test[1].to(device)
        self.generator = torch.Generator(device=device).manual_seed(seed)
        self.train_size = len(train[1])

    def train_batches(self):
        order = torch.randperm(self.train_size, device=self.train_x.device,
                               generator=self.generator)
        for start in range(0, self.train_size, self.batch_size):
            index = order[start:start + self.batch_size]
            yield self.train_x[index], self.train_y[index]

    def test_batches(self):
        for start in range(0, len(self.test_y), self.batch_size):
            yield (self.test_x[start:start + self.batch_size],
                   self.test_y[start:start + self.batch_size])


PIPELINES = {"classic": Classic, "resident": Resident}
