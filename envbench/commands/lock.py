"""`envbench lock`: resolve every selected pip environment again and write its lock; with
--check, resolve again and compare with each lock as it is, writing nothing."""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import TextIO

from envbench.cells import matrixrun
from envbench.errors import UserError
from envbench.images import lock as lockmod
from envbench.matrix.models import Environment
from envbench.options import Options


def run(opts: Options, out: TextIO = sys.stdout) -> int:
    m, cells = matrixrun.plan_cells(opts)
    failed = 0
    for name in dict.fromkeys(c.environment for c in cells):
        env = m.environments[name]
        if env.source != "pip":
            print("%s: Debian's packages, nothing to lock" % name, file=out)
            continue
        if opts.check:
            failed += not _check(name, env, opts, out)
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


def _check(name: str, env: Environment, opts: Options, out: TextIO) -> bool:
    """The lock as it is against a fresh resolution of the same inputs: every wheel's
    package, version, file, hash and URL. True when they agree."""
    try:
        found = lockmod.status(name, env, opts.matrix_dir, opts.locks_dir)
        if found.lock is None:
            raise UserError("%s is missing; run `nox -s lock`"
                            % lockmod.path_for(opts.locks_dir, name))
        if found.state is lockmod.LockState.STALE:
            raise UserError("%s is stale (the matrix changed since); run `nox -s lock`"
                            % found.lock.path)
        with tempfile.TemporaryDirectory(prefix="envbench-lock-check-") as tmp:
            fresh = lockmod.write(name, env, opts.matrix_dir, Path(tmp))
    except UserError as exc:
        print("%s: %s" % (name, exc), file=out, flush=True)
        return False
    def entries(lock: lockmod.Lock) -> dict[str, tuple[str, str, str | None]]:
        return {w.filename: (w.package + " " + w.version, w.sha256, w.url) for w in lock.wheels}
    have, want = entries(found.lock), entries(fresh)
    differences = ["%s: in the lock, not in a fresh resolution" % f for f in sorted(have)
                   if f not in want]
    differences += ["%s: a fresh resolution has it, the lock does not" % f
                    for f in sorted(want) if f not in have]
    for filename in sorted(set(have) & set(want)):
        for label, old, new in zip(("package", "sha256", "url"), have[filename],
                                   want[filename]):
            if old != new:
                differences.append("%s: %s is %s in the lock, %s when resolved again"
                                   % (filename, label, old, new))
    if differences:
        print("%s: %s differs from a fresh resolution (%d difference(s)):\n  %s" % (
            name, found.lock.path, len(differences), "\n  ".join(differences)), file=out,
            flush=True)
        return False
    print("%s: %s matches a fresh resolution (%d wheels)" % (name, found.lock.path,
                                                             len(have)), file=out, flush=True)
    return True
