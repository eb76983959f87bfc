"""CIFAR-10 in the official pickle layout, read without torchvision or numpy; or seeded sets.

The seeded sets stand in where there is no data to have: CIFAR-shaped images (--synthetic),
ImageNet-shaped images (resnet50) and token sequences (the GPTs). Each is learnable, so that
a loss falls and a run's quality figures mean something, and each is the same for a seed.

The official files are Python-2 pickles of numpy arrays. Unpickling them normally needs
numpy, which a torch-only image may lack, so a restricted unpickler rebuilds the arrays from
their raw bytes. It also refuses any other class, so a hostile file cannot run code.
"""
from __future__ import annotations

import codecs
import os
import pickle

import torch

from bench.errors import DataError
from bench.rules import CIFAR_FOLDER as FOLDER

TRAIN_FILES = ["data_batch_%d" % i for i in range(1, 6)]
TEST_FILE = "test_batch"
IMAGE_BYTES = 3 * 32 * 32
CLASSES = 10


class _Dtype:
    def __init__(self, *args):
        self.args = args

    def __setstate__(self, state):
        self.state = state


class _Array:
    """Stands in for numpy.ndarray: keeps the shape and the raw bytes."""

    shape = ()
    raw = b""

    def __setstate__(self, state):
        # ndarray.__reduce__ state: (version, shape, dtype, is_fortran, raw bytes)
        self.shape = tuple(state[1])
        raw = state[4]
        self.raw = raw.encode("latin1") if isinstance(raw, str) else bytes(raw)
        self.itemsize = _itemsize(state[2])


def _itemsize(dtype):
    name = dtype.args[0] if dtype.args else "u1"
    if name in ("u1", "i1", "|u1", "b1"):
        return 1
    raise DataError("unsupported array dtype %r (expected uint8 images)" % (name,))


def _reconstruct(cls, shape, dtype):
    return _Array()


class _CifarUnpickler(pickle.Unpickler):
    _ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
        ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
        ("numpy", "ndarray"): _Array,
        ("numpy", "dtype"): _Dtype,
        # Python 3 writes bytes into protocol-2 pickles as _codecs.encode(text, "latin1").
        ("_codecs", "encode"): codecs.encode,
    }

    def find_class(self, module, name):
        try:
            return self._ALLOWED[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError("refusing to load %s.%s" % (module, name))


def read_batch(path):
    """Read one batch file into (uint8 tensor N×3×32×32, int64 labels)."""
    if not os.path.isfile(path):
        raise DataError("%s: file not found" % path)
    try:
        with open(path, "rb") as f:
            entry = _CifarUnpickler(f, encoding="latin1").load()
    except DataError:
        raise
    except Exception as exc:  # truncated or foreign files fail in many ways
        raise DataError("%s: not a CIFAR-10 batch (%s: %s)" % (path, type(exc).__name__, exc))
    if not isinstance(entry, dict) or "data" not in entry:
        raise DataError("%s: not a CIFAR-10 batch (no 'data' entry)" % path)
    labels = entry.get("labels", entry.get("fine_labels"))
    array = entry["data"]
    if not isinstance(array, _Array) or labels is None:
        raise DataError("%s: not a CIFAR-10 batch (bad 'data' or 'labels')" % path)
    count = len(labels)
    if len(array.raw) != count * IMAGE_BYTES or array.shape not in ((count, IMAGE_BYTES),):
        raise DataError("%s: truncated: %d bytes of image data for %d labels"
                        % (path, len(array.raw), count))
    images = torch.frombuffer(bytearray(array.raw), dtype=torch.uint8).view(count, 3, 32, 32)
    return images, torch.tensor(list(labels), dtype=torch.int64)


def load_cifar(root, limit=None, limit_test=None):
    """Return ((train_x, train_y), (test_x, test_y)) from DIR/cifar-10-batches-py/."""
    folder = os.path.join(root, FOLDER)
    if not os.path.isdir(folder):
        raise DataError("%s: no %s/ folder (expected the official CIFAR-10 python layout)"
                        % (root, FOLDER))
    parts = []
    for name in TRAIN_FILES:
        parts.append(read_batch(os.path.join(folder, name)))
        # A smoke run with --limit reads only the files it needs.
        if limit is not None and sum(len(p[1]) for p in parts) >= limit:
            break
    train = _concat(parts)
    test = read_batch(os.path.join(folder, TEST_FILE))
    return _first(train, limit), _first(test, limit_test)


def synthetic(seed, train_size=50000, test_size=10000, limit=None, limit_test=None):
    """A seeded, learnable CIFAR-shaped set: each class is a colour template plus noise."""
    generator = torch.Generator().manual_seed(seed)
    templates = torch.randint(0, 256, (CLASSES, 3, 32, 32), generator=generator)

    def make(count):
        labels = torch.randint(0, CLASSES, (count,), generator=generator)
        noise = torch.randint(0, 256, (count, 3, 32, 32), generator=generator)
        images = (templates[labels] + noise) // 2
        return images.to(torch.uint8), labels

    train_size, test_size = _sizes(train_size, test_size, limit, limit_test)
    return make(train_size), make(test_size)


def _sizes(train_size, test_size, limit, limit_test):
    return (train_size if limit is None else min(limit, train_size),
            test_size if limit_test is None else min(limit_test, test_size))


IMAGENET_CLASSES = 1000
IMAGENET_SIZE = 224
_COARSE = 8  # each class's template is drawn at 28x28 and scaled up: 2 MB for 1000 classes
_CHUNK = 256


def synthetic_imagenet(seed, train_size, test_size, limit=None, limit_test=None):
    """Seeded ImageNet-shaped images (uint8 3x224x224, 1000 classes): a coarse colour template
    per class plus noise, made a chunk at a time so that no full-size temporary is held."""
    generator = torch.Generator().manual_seed(seed)
    coarse = IMAGENET_SIZE // _COARSE
    templates = torch.randint(0, 128, (IMAGENET_CLASSES, 3, coarse, coarse),
                              generator=generator, dtype=torch.uint8)

    def make(count):
        labels = torch.randint(0, IMAGENET_CLASSES, (count,), generator=generator)
        images = torch.empty(count, 3, IMAGENET_SIZE, IMAGENET_SIZE, dtype=torch.uint8)
        for start in range(0, count, _CHUNK):
            part = templates[labels[start:start + _CHUNK]]
            part = part.repeat_interleave(_COARSE, dim=2).repeat_interleave(_COARSE, dim=3)
            noise = torch.randint(0, 128, part.shape, generator=generator, dtype=torch.uint8)
            images[start:start + _CHUNK] = part + noise  # at most 127 + 127: no overflow
        return images, labels

    train_size, test_size = _sizes(train_size, test_size, limit, limit_test)
    return make(train_size), make(test_size)


def synthetic_tokens(seed, vocab, length, train_size, test_size, limit=None, limit_test=None,
                     noise=0.1, rules=4):
    """Seeded token sequences a language model can learn: each sequence follows one of a few
    fixed successor rules (a random permutation of the vocabulary: the next token is the
    current one's successor), with a share ``noise`` of its tokens replaced by random ones.
    A bigram model learns the rules' mixture; attention tells from the context which rule a
    sequence follows. Returns ((inputs, targets), (inputs, targets)): int64 N x length, the
    targets being the inputs shifted by one token."""
    generator = torch.Generator().manual_seed(seed)
    successors = torch.stack([torch.randperm(vocab, generator=generator) for _ in range(rules)])

    def make(count):
        rule = torch.randint(0, rules, (count,), generator=generator)
        tokens = torch.empty(count, length + 1, dtype=torch.int64)
        tokens[:, 0] = torch.randint(0, vocab, (count,), generator=generator)
        for position in range(1, length + 1):
            tokens[:, position] = successors[rule, tokens[:, position - 1]]
        flip = torch.rand(count, length + 1, generator=generator) < noise
        tokens[flip] = torch.randint(0, vocab, (int(flip.sum()),), generator=generator)
        return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()

    train_size, test_size = _sizes(train_size, test_size, limit, limit_test)
    return make(train_size), make(test_size)


def _concat(parts):
    return torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])


def _first(pair, limit):
    if limit is None:
        return pair
    return pair[0][:limit], pair[1][:limit]
