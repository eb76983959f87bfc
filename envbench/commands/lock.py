"""`envbench lock`: resolve every selected pip environment again and write its lock."""
from __future__ import annotations

import sys
import time
from typing import TextIO

from envbench.cells import matrixrun
from envbench.errors import UserError
from envbench.images import lock as lockmod
from envbench.options import Options


def run(opts: Options, out: TextIO = sys.stdout) -> int:
    m, cells = matrixrun.plan_cells(opts)
    failed = 0
    for name in dict.fromkeys(c.environment for c in cells):
        env = m.environments[name]
        if env.source != "pip":
            print("%s: Debian's packages, nothing to lock" % name, file=out)
            continue
        try:
            before = lockmod.status(name, env, opts.matrix_dir, opts.locks_dir).lock
        except UserError:
            before = None  # an unreadable lock is simply written again
        started = time.perf_counter()
        try:
            made = lockmod.write(name, env, opts.matrix_dir, opts.locks_dir)
        except UserError as exc:
            print("%s: %s" % (name, exc), file=out, flush=True)
            failed += 1
            continue
        change = "unchanged" if before is not None and before.sha256 == made.sha256 else \
            "written"
        size = sum(w.size or 0 for w in made.wheels)
        print("%s: %s, %d wheels%s, %.1f s (uv %s) -> %s"
              % (name, change, len(made.wheels), ", %.1f MB" % (size / 1e6) if size else "",
                 time.perf_counter() - started, made.uv_version, made.path), file=out,
              flush=True)
    return 1 if failed else 0
