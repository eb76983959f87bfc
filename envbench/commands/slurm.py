"""`envbench slurm` (./noxw -s slurm): each Slurm target's cells as one batch job on its
cluster, followed until they are in (see envbench.slurm.run)."""
from __future__ import annotations

import sys
from typing import TextIO

from envbench.command_options import Options
from envbench.slurm import run as slurmrun


def run(opts: Options, out: TextIO = sys.stdout) -> int:
    return slurmrun.run(opts, out)
