"""Where a profiled run's Chrome trace goes: beside its result, named by the result's stem.

Torch-free: the CLI places the trace after the run, whatever torch did.
"""
from __future__ import annotations

import os
import shutil

TRACE_SUFFIX = ".trace.json.gz"


def trace_path(out):
    """Where the trace of the result ``out`` goes: beside it, with the same stem."""
    stem = out[:-len(".json")] if out.endswith(".json") else out
    return stem + TRACE_SUFFIX


def place_trace(record, out):
    """Move the window's trace from its temporary file to beside the result ``out`` and name
    it there by its file name; a trace that cannot be moved is dropped, and the record says
    so (the operators stay)."""
    profile = record.get("profile")
    written = profile.get("trace") if isinstance(profile, dict) else None
    if not written:
        return
    target = trace_path(out)
    try:
        shutil.move(written, target)
        os.chmod(target, 0o644)
        profile["trace"] = os.path.basename(target)
    except OSError as exc:
        profile["trace"], profile["trace_bytes"] = None, None
        profile["note"] = ("the trace could not be written beside the result: %s"
                           % (exc.strerror or exc))[:400]
        if os.path.exists(written):
            os.unlink(written)
