"""What a cell trains: the built-in workloads by name, and the user's own from a file.

A workload is what a matrix says to train: its sample unit, its data, its model, its loss, its
quality metric and its optimizer. The pipelines, the phase clock, AMP, compile, accumulation,
dp/ddp and memory are bench's and the same for every workload (bench.train).

This module imports neither torch nor anything that does: the host reads the catalog (names,
units, default batch sizes) and hashes a user's workload with ``digest``, the function bench
checks the mounted copy with. The workloads themselves are modules beside it, imported by
``load`` inside the image.
"""
from __future__ import annotations

import hashlib
import os
import stat
from collections import OrderedDict
from typing import Any, Dict, List, Optional, Tuple

from bench import boundedread
from bench.boundedread import kind_of
from bench.errors import WorkloadError
from bench.rules import QUICK_LIMITS


class Info(object):
    """A built-in workload as the catalog knows it, without torch: everything the host, the
    report, the tests and the perf scripts need to know of it, in one place. Its model, data
    and loss are the module ``bench.workloads.<module>``'s ``build(ctx)``, the contract a
    user's workload keeps (bench.workloads.interface), given ``ctx.workload``, its name.

    data: "cifar10" for workloads that train on CIFAR-10 (or its seeded stand-in with
    --synthetic), "synthetic" for those whose data is always seeded and generated (there is
    no data set the kit can have for them)."""

    def __init__(self, name, module, unit, data, batch_size, lr, momentum, about,
                 weight_decay=0.0, lr_batch=None, quick=QUICK_LIMITS, variant_of=None,
                 smoke=(512, 256, 64), cpu_bench=(20000, 256, 256)):
        self.name = name
        self.module = module
        self.unit = unit
        self.data = data
        self.batch_size = batch_size
        self.lr = lr
        self.momentum = momentum    # SGD's momentum; AdamW's beta1 for the GPTs
        self.about = about
        # Decoupled for AdamW (the GPTs: on matrices only), L2 in SGD's update otherwise.
        self.weight_decay = weight_decay
        # lr is for this global batch and scales linearly with it (Goyal et al. 2017, as
        # NVIDIA's ResNet-50 recipe does); None: lr as it is at any batch.
        self.lr_batch = lr_batch
        # --quick's train and test limits: one short epoch, to check a matrix in minutes.
        self.quick = quick
        # The workload this one is an optimisation of (the write-up's lighter LeNets): the
        # report measures it against that one as an option. None: a job of its own, whose
        # epoch against another workload's says nothing about an option.
        self.variant_of = variant_of
        # (train samples, test samples, batch): the smallest run that trains every part
        # (tests/bench/test_workloads.py), and a steady epoch of a few seconds on a 2-core CPU
        # (perf/workloads_cpu.py).
        self.smoke = smoke
        self.cpu_bench = cpu_bench


_ENTRIES = [
    # The tutorial's hyper-parameters (SGD lr 0.001, momentum 0.9) for the LeNets: the
    # write-up's experiment, figures unchanged.
    Info("lenet", "lenet", "images", "cifar10", 256, 0.001, 0.9,
         "the PyTorch CIFAR-10 tutorial's LeNet (62 k parameters), the write-up's model"),
    Info("lenet-gap", "lenet", "images", "cifar10", 256, 0.001, 0.9,
         "LeNet with global average pooling in place of its fully connected layers",
         variant_of="lenet"),
    Info("lenet-dws", "lenet", "images", "cifar10", 256, 0.001, 0.9,
         "LeNet with depthwise separable convolutions", variant_of="lenet"),
    Info("resnet18-cifar", "resnet", "images", "cifar10", 128, 0.1, 0.9,
         "ResNet-18 in its CIFAR form (3x3 stem, no max-pool; 11.2 M parameters) on CIFAR-10, "
         "SGD with weight decay 5e-4, lr 0.1 per 256 images of batch", weight_decay=5e-4,
         lr_batch=256, smoke=(64, 32, 32), cpu_bench=(512, 128, 128)),
    Info("resnet50", "resnet", "images", "synthetic", 64, 0.1, 0.9,
         "ResNet-50 v1.5 (25.6 M parameters) on seeded ImageNet-shaped images (3x224x224, "
         "1000 classes), as Lambda's benchmark runs it; SGD with weight decay 1e-4, lr 0.1 "
         "per 256 images of batch", weight_decay=1e-4, lr_batch=256, quick=(256, 64),
         smoke=(4, 2, 2), cpu_bench=(32, 16, 16)),
    Info("gpt-tiny", "gpt", "tokens", "synthetic", 32, 1e-3, 0.9,
         "a GPT-2-style decoder small enough for a CPU cell (4 layers, width 192, 128 "
         "tokens, vocabulary 512, 1.9 M parameters) on seeded synthetic tokens, AdamW",
         weight_decay=0.1, quick=(512, 128), smoke=(16, 8, 8), cpu_bench=(256, 32, 32)),
    Info("gpt2-small", "gpt", "tokens", "synthetic", 8, 6e-4, 0.9,
         "GPT-2 small's shape (12 layers, width 768, 1024 tokens, 124 M parameters) on "
         "seeded synthetic tokens, AdamW as nanoGPT trains it", weight_decay=0.1,
         quick=(32, 8), smoke=(2, 1, 1), cpu_bench=(4, 4, 4)),
]
BUILTIN = OrderedDict((info.name, info) for info in _ENTRIES)
NAMES = tuple(BUILTIN)
DEFAULT = "lenet"
# A user's workload may read CIFAR-10 (ctx.cifar10()): it gets the data set a cell has.
USER_DATA = "cifar10"
UNITS = ("images", "tokens", "samples")

# A workload is code and small files: a folder past these is refused, not hashed for minutes.
MAX_FILES = 2000
MAX_BYTES = 256 * 2**20
MAX_DEPTH = 32  # folders within folders (os.walk recurses: 1,200 levels ended in a traceback)
SKIPPED_DIRS = ("__pycache__", ".git", ".ipynb_checkpoints")


def info(name: str) -> Optional[Info]:
    return BUILTIN.get(name)


def default_optimizer(name: str, global_batch: int) -> Dict[str, Any]:
    """lr and momentum of a workload when the command line leaves them out (a user's own
    workload takes the tutorial's, unless its build() brings its own optimizer)."""
    found = BUILTIN.get(name)
    if found is None:
        return {"lr": 0.001, "momentum": 0.9}
    lr = found.lr if found.lr_batch is None else found.lr * global_batch / found.lr_batch
    return {"lr": lr, "momentum": found.momentum}


def _files(path: str) -> List[Tuple[str, str]]:
    """(relative name, absolute path) of every file a workload is made of, sorted; refuses
    links, special files, compiled bytecode with no source, and anything past the caps."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        raise WorkloadError("%s does not exist" % path)
    if stat.S_ISREG(mode):
        return [(os.path.basename(path), path)]
    if not stat.S_ISDIR(mode):
        raise WorkloadError("%s is %s, not a .py file or a folder" % (path, kind_of(mode)))
    found = []
    for folder, dirs, names in os.walk(path):
        relative = os.path.relpath(folder, path)
        if relative != "." and relative.count(os.sep) + 1 > MAX_DEPTH:
            raise WorkloadError("%s has folders more than %d levels deep: a workload folder "
                                "is code and small files" % (path, MAX_DEPTH))
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        for name in list(dirs) + names:
            full = os.path.join(folder, name)
            mode = os.lstat(full).st_mode
            if stat.S_ISLNK(mode):
                raise WorkloadError("%s: a symbolic link inside a workload folder (its target "
                                    "would not reach the container): copy the file in"
                                    % os.path.relpath(full, path))
            if name in names and not stat.S_ISREG(mode):
                raise WorkloadError("%s: %s, not a regular file" % (os.path.relpath(full, path),
                                                                   kind_of(mode)))
        for name in sorted(names):
            if name.endswith((".pyc", ".pyo")):
                # Python imports a .pyc that has no .py beside it: code the hash would not
                # cover (a model went from 27 to 771 parameters under one sha256). Bytecode
                # in __pycache__ is skipped above and never read in the cell (bench points
                # Python's bytecode cache elsewhere).
                raise WorkloadError("%s: compiled bytecode outside __pycache__ would run in "
                                    "place of source the kit hashes: delete it and keep the "
                                    ".py" % os.path.relpath(os.path.join(folder, name), path))
            found.append((os.path.relpath(os.path.join(folder, name), path).replace(os.sep, "/"),
                          os.path.join(folder, name)))
            if len(found) > MAX_FILES:
                raise WorkloadError("%s holds more than %d files: a workload folder is code "
                                    "and small files" % (path, MAX_FILES))
    return sorted(found)


def bytecode_caches(path: str) -> List[str]:
    """The __pycache__ folders of a workload folder, relative to it: the host hides each one
    behind an empty tmpfs in the cell, so Python there compiles the source the hash covers
    and never loads bytecode from the host (a .pyc whose recorded mtime and size match its
    .py is loaded without reading the source). Within MAX_DEPTH, as the hash walks."""
    if not os.path.isdir(path) or os.path.islink(path):
        return []
    found = []
    for folder, dirs, _ in os.walk(path):
        relative = os.path.relpath(folder, path)
        if relative != "." and relative.count(os.sep) + 1 > MAX_DEPTH:
            dirs[:] = []
            continue
        for name in dirs:
            if name == "__pycache__":
                found.append(os.path.normpath(os.path.join(relative, name)).replace(os.sep, "/"))
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS]
    return sorted(found)


def stray_bytecode(path: str) -> Optional[str]:
    """A __pycache__ in the cell's copy that holds files (the host hid every one it found
    behind an empty tmpfs: this one appeared after the host hashed the folder), or None."""
    for relative in bytecode_caches(path):
        if os.listdir(os.path.join(path, relative)):
            return relative
    return None


def _hash_file(sha, name: str, full: str, left: int) -> int:
    """Hash one file's bytes, read through a descriptor opened without following a link and
    without blocking (a file swapped for a link to /dev/zero or a FIFO after the walk must
    not hang the hash), checked to be a regular file, and read no further than ``left``
    bytes (the size a stat gives may lie). Returns the bytes read."""
    try:
        with boundedread.regular(full, left) as stream:
            read = 0
            while True:
                block = stream.read(min(1 << 20, left - read + 1))
                if not block:
                    return read
                read += len(block)
                if read > left:
                    break
                sha.update(block)
    except boundedread.Unreadable as exc:
        if exc.what is not None:  # a link or a special file, swapped in after the walk
            raise WorkloadError("%s became %s while it was read" % (name, exc.what))
        if exc.kind == "os":
            raise WorkloadError("%s cannot be read (%s)" % (name, exc))
    raise WorkloadError("past %d MB: a workload folder is code and small files"
                        % (MAX_BYTES // 2**20))


def digest(path: str) -> str:
    """sha256 of a workload file or folder: each file's name and bytes, in name order. The
    host puts it in the cell's identity; bench checks that the copy it runs has the same."""
    sha = hashlib.sha256()
    total = 0
    for name, full in _files(path):
        sha.update(name.encode("utf-8") + b"\0")
        try:
            total += _hash_file(sha, name, full, MAX_BYTES - total)
        except WorkloadError as exc:
            raise WorkloadError("%s: %s" % (path, exc))
        sha.update(b"\0")
    return sha.hexdigest()


def load(config):
    """The workload a run's config names, ready to build. Imports torch: the modules are
    found by name, so that importing this package (the host does) never does."""
    import importlib

    if config.get("workload_file"):
        return importlib.import_module("bench.workloads.user").load(config)
    found = BUILTIN.get(config["workload"])
    if found is None:  # the parser refuses this; a config built by hand may not
        raise WorkloadError("unknown workload %r (built in: %s)"
                            % (config["workload"], ", ".join(NAMES)))
    module = importlib.import_module("bench.workloads.%s" % found.module)
    interface = importlib.import_module("bench.workloads.interface")
    return interface.Workload(config, module.build, called="%s's build()" % found.name)
