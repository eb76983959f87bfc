"""`envbench bench` (./noxw -s bench-cpu, bench-cuda): build, then run every selected cell."""
from __future__ import annotations

import sys
from typing import TextIO

from envbench.cells import matrixrun
from envbench.command_options import Options


def run(opts: Options, out: TextIO = sys.stdout) -> int:
    return matrixrun.run(opts, out)
