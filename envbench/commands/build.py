"""`envbench build` (./noxw -s build-cpu, build-cuda): the images the selected cells need."""
from __future__ import annotations

import sys
from typing import TextIO

from envbench.cells import matrixrun
from envbench.command_options import Options
from envbench.engine import connection


def run(opts: Options, out: TextIO = sys.stdout) -> int:
    m, cells = matrixrun.plan_cells(opts)
    client = connection.connect()
    names = list(dict.fromkeys(c.environment for c in cells))
    built, failed = matrixrun.build_images(client, m, names, opts, out)
    for name, image in built.items():
        print("  %-28s %s  %s" % (name, image.plan.tag, image.image.short_id), file=out)
    return 1 if failed else 0
