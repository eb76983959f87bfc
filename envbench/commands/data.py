"""`envbench data`: CIFAR-10 downloaded once into the cache, md5-checked."""
from __future__ import annotations

import sys
from typing import TextIO

from envbench.cells import dataset
from envbench.command_options import Options


def run(opts: Options, out: TextIO = sys.stdout) -> int:
    dataset.fetch(opts.cache_dir, url=opts.url or dataset.URL, out=out)
    return 0
