"""The kit's one cache folder on the host: wheels, wheelhouses, CIFAR-10, the local VMs.

ENVBENCH_CACHE moves it (CI keeps it between runs); the default is the XDG-style
~/.cache/envbench.
"""
from __future__ import annotations

import os
from pathlib import Path


def root() -> Path:
    return Path(os.environ.get("ENVBENCH_CACHE") or Path.home() / ".cache" / "envbench")
