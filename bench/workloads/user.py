"""The user's own workload: a function in a file or folder beside the matrix, mounted read-only.

What the function returns is the one contract every workload keeps (bench.workloads.interface,
docs/workloads.md "Your own workload"). What is the user's alone is where it comes from: the
copy in the cell must have the digest the host recorded (and no bytecode that appeared after
the host hashed it), its inputs must be mounted, and the module is imported from its path. A
missing file or function and an import that raises each end the cell with one sentence (the
traceback goes to the cell's log); the other cells go on.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import traceback

from bench import workloads
from bench.errors import WorkloadError
from bench.messages import first_line
from bench.workloads.interface import Workload

MODULE_NAME = "envbench_workload"


def _import(path):
    """The workload's module: a .py file, or a folder that is a package (its __init__.py)."""
    if os.path.isdir(path):
        init = os.path.join(path, "__init__.py")
        if not os.path.isfile(init):
            raise WorkloadError("%s is a folder without __init__.py: a folder workload is a "
                                "package whose __init__.py defines the function" % path)
        spec = importlib.util.spec_from_file_location(MODULE_NAME, init,
                                                      submodule_search_locations=[path])
    else:
        if not os.path.isfile(path):
            raise WorkloadError("%s does not exist in the container (was the workload "
                                "mounted?)" % path)
        spec = importlib.util.spec_from_file_location(MODULE_NAME, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[MODULE_NAME] = module  # a package's modules import each other through it
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        traceback.print_exc()
        raise WorkloadError("importing %s failed: %s: %s (traceback in the log)"
                            % (os.path.basename(path), type(exc).__name__, first_line(exc)))
    return module


def _checked_copy(config, path):
    """The sha256 of the cell's copy, refused where it is not the copy the host hashed."""
    sha256 = workloads.digest(path) if os.path.exists(path) else None
    expected = config.get("workload_sha256")
    if sha256 is None:
        raise WorkloadError("%s does not exist in the container (was the workload "
                            "mounted?)" % path)
    if expected and expected != sha256:
        raise WorkloadError("%s changed since the host hashed it (sha256 %s, the cell "
                            "expects %s): run again" % (path, sha256[:12], expected[:12]))
    stray = workloads.stray_bytecode(path) if expected else None
    if stray is not None:
        raise WorkloadError("%s/%s holds bytecode that appeared after the host hashed the "
                            "folder: Python could load it in place of the source; run "
                            "again" % (path, stray))
    for name, given in sorted((config.get("inputs") or {}).items()):
        if not os.path.exists(given["path"]):
            raise WorkloadError("input %s: %s does not exist in the container (was it "
                                "mounted?)" % (name, given["path"]))
    return sha256


def _function(path, name):
    """The build function the file defines, imported from its path."""
    module = _import(path)
    fn = getattr(module, name, None)
    if not callable(fn):
        defined = sorted(n for n, v in vars(module).items()
                         if callable(v) and not n.startswith("_")
                         and getattr(v, "__module__", None) == MODULE_NAME)
        raise WorkloadError("%s defines no function %r (it defines: %s)"
                            % (os.path.basename(path), name,
                               ", ".join(defined) or "nothing callable"))
    return fn


def load(config):
    """The user's workload the config names, its copy checked; imported when the run first
    asks for its data (after seeding, as a built-in's module is called)."""
    path = config["workload_file"]
    function = config["workload_function"] or "build"
    sha256 = _checked_copy(config, path)
    folder = path if os.path.isdir(path) else os.path.dirname(path)

    def build(ctx):
        return _function(path, function)(ctx)

    return Workload(config, build, source="file", folder=folder, sha256=sha256,
                    called="%s() in %s" % (function, os.path.basename(path)),
                    extra={"file": os.path.basename(path), "function": function})
