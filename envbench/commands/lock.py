"""`envbench lock`: resolve every selected pip environment again and write its lock; with
--check, resolve again and compare with each lock as it is, writing nothing."""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import TextIO

from envbench.cells import matrixrun
from envbench.command_options import Options
from envbench.images import lock as lockmod
from envbench.matrix import sources
from envbench.matrix.models import Environment
from envbench.user_errors import BadInput, UserError


def run(opts: Options, out: TextIO = sys.stdout) -> int:
    m, cells = matrixrun.plan_cells(opts)
    failed = 0
    names = list(dict.fromkeys(c.environment for c in cells))
    # Each stack's index after ${VAR} expansion, before anything is resolved: a value the
    # kit refuses is bad input (exit 2), said for every stack at once.
    refused = []
    for name in names:
        try:
            sources.index_url(name, m.environments[name])
        except BadInput as exc:
            refused.append(str(exc))
    if refused:
        raise BadInput("%s cannot be locked:\n  %s" % (opts.matrix_path, "\n  ".join(refused)))
    if opts.check:
        pip = [n for n in names if m.environments[n].source == "pip"]
        print("checking the locks of %d pip stack(s) in %s: %s" % (
            len(pip), opts.locks_dir, ", ".join(pip) or "none"), file=out, flush=True)
    for name in names:
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


def _entries(lock: lockmod.Lock) -> dict[str, tuple[str, str]]:
    return {w.filename: (w.package + " " + w.version, w.sha256) for w in lock.wheels}


def _differences(have: lockmod.Lock, want: lockmod.Lock, theirs: str) -> list[str]:
    """Each wheel in one and not the other, and each file whose package or hash differs."""
    a, b = _entries(have), _entries(want)
    lines = ["%s: in the lock, not in %s" % (f, theirs) for f in sorted(a) if f not in b]
    lines += ["%s: in %s, not in the lock" % (f, theirs) for f in sorted(b) if f not in a]
    for filename in sorted(set(a) & set(b)):
        for label, old, new in zip(("package", "sha256"), a[filename], b[filename]):
            if old != new:
                lines.append("%s: %s is %s in the lock, %s in %s"
                             % (filename, label, old, new, theirs))
    return lines


def _check(name: str, env: Environment, opts: Options, out: TextIO) -> bool:
    """The lock as it is, against the index today, writing nothing. Two resolutions:
    - the lock's own pins (every package==version): the same files with the same hashes, or
      the lock was edited by hand or its index changed a file: it fails;
    - the matrix's requirements afresh: newer versions are drift, said and not a failure (the
      lock still installs exactly what it names; `./noxw -s lock` moves to them).
    When neither resolves, the index is out of reach: it says it could not check.
    True unless the lock is stale or differs from its own pins (a missing one is said)."""
    def say(text: str) -> None:
        print("%s: %s" % (name, text), file=out, flush=True)

    try:
        found = lockmod.status(name, env, opts.matrix_dir, opts.locks_dir)
    except UserError as exc:
        say(str(exc))
        return False
    if found.lock is None:
        # Not a lock that differs: there is none to check. The kit commits locks for the
        # stacks on the default index; the others are resolved at their first build.
        say("no committed lock at %s%s: nothing to check; `bench` resolves it at its first "
            "build, or `./noxw -s lock -- --env %s` writes one to commit" % (
                lockmod.path_for(opts.locks_dir, name),
                " (the kit commits locks for stacks on the default index, not on an index of "
                "their own)" if env.index_url else "", name))
        return True
    if found.state is lockmod.LockState.STALE:
        say("%s is stale (the matrix changed since); run `./noxw -s lock`" % found.lock.path)
        return False
    current = found.lock
    with tempfile.TemporaryDirectory(prefix="envbench-lock-check-") as tmp:
        try:
            fresh: lockmod.Lock | None = lockmod.write(name, env, opts.matrix_dir,
                                                       Path(tmp) / "fresh")
        except UserError as exc:
            fresh, unresolved = None, str(exc)
        try:
            pinned = lockmod.write(name, env, opts.matrix_dir, Path(tmp) / "pinned",
                                   pins=current.pins())
        except UserError as exc:
            if fresh is None:
                say("could not check %s: its index did not answer (%s)"
                    % (current.path, unresolved[:300]))
                return True
            say("%s names versions its index no longer resolves (%s)"
                % (current.path, str(exc)[:400]))
            return False
    wrong = _differences(current, pinned, "what the index serves for the lock's pins")
    if wrong:
        say("%s differs from what its index serves for its own pins (%d difference(s)); "
            "run `./noxw -s lock`:\n  %s" % (current.path, len(wrong), "\n  ".join(wrong)))
        return False
    drift = _differences(current, fresh, "a fresh resolution") if fresh is not None else []
    if drift:
        say("%s matches its index (%d wheels); drift: a fresh resolution picks newer files "
            "(%d difference(s)); the lock still installs what it names, `./noxw -s lock` moves "
            "to them:\n  %s" % (current.path, len(current.wheels), len(drift),
                                "\n  ".join(drift)))
    else:
        say("%s matches a fresh resolution (%d wheels)" % (current.path,
                                                           len(current.wheels)))
    return True
