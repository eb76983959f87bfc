"""The result JSON: the one contract between bench (in containers) and the host.

Torch-free and Python 3.8 compatible: the host imports this module to read and validate
results, bench imports it to write them.
"""
from __future__ import annotations

import json
import os
import tempfile

SCHEMA = "envbench.result/1"
STATUSES = ("ok", "failed")

# Required keys per section. Values may be null where not measurable; a key may not be absent.
REQUIRED = {
    "cell": ("environment", "target", "target_label", "price_per_hour", "repeat", "variant"),
    "config": ("device", "data", "synthetic", "epochs", "batch_size", "pipeline", "workers",
               "amp", "channels_last", "compile", "accumulate", "threads", "seed",
               "deterministic", "limit"),
    "env": ("python", "torch", "torchvision", "cuda", "cudnn", "device_name", "driver",
            "cpu_model", "cpu_count", "threads", "bench_sha256", "image"),
    "memory": ("host_peak_rss_bytes", "cgroup_peak_bytes", "swap_peak_bytes",
               "gpu_peak_allocated_bytes", "gpu_peak_reserved_bytes"),
    "summary": ("epoch_s_median", "first_epoch_s", "samples_per_s", "final_test_acc",
                "weights_sha256"),
}
EPOCH_KEYS = ("epoch", "wall_s", "samples", "samples_per_s", "phases_s", "train_loss",
              "test_acc", "test_s")
PHASES = ("data", "h2d", "forward", "backward", "optimizer")


def empty_cell():
    """The cell section as bench leaves it; the host runner fills it in."""
    return {"environment": None, "target": None, "target_label": None,
            "price_per_hour": None, "repeat": None, "variant": {}}


def new_record(config):
    """A record as it starts: failed until the run proves otherwise."""
    return {
        "schema": SCHEMA, "status": "failed", "error": None, "cell": empty_cell(),
        "config": config, "env": {}, "epochs": [],
        "memory": dict.fromkeys(REQUIRED["memory"]),
        "summary": dict.fromkeys(REQUIRED["summary"]),
    }


def validate(record):
    """Return a list of problems (empty when the record honours the schema)."""
    problems = []
    if not isinstance(record, dict):
        return ["result is not a JSON object"]
    if record.get("schema") != SCHEMA:
        problems.append("schema: expected %r, got %r" % (SCHEMA, record.get("schema")))
    status = record.get("status")
    if status not in STATUSES:
        problems.append("status: expected one of %s, got %r" % (STATUSES, status))
    error = record.get("error", "missing")
    if error == "missing":
        problems.append("error: missing")
    elif status == "failed" and not (isinstance(error, dict) and "type" in error
                                     and "message" in error):
        problems.append("error: a failed result needs {type, message}")
    for section, keys in REQUIRED.items():
        value = record.get(section)
        if not isinstance(value, dict):
            problems.append("%s: missing or not an object" % section)
            continue
        problems.extend("%s.%s: missing" % (section, k) for k in keys if k not in value)
    epochs = record.get("epochs")
    if not isinstance(epochs, list):
        problems.append("epochs: missing or not a list")
        epochs = []
    for i, epoch in enumerate(epochs):
        if not isinstance(epoch, dict):
            problems.append("epochs[%d]: not an object" % i)
            continue
        problems.extend("epochs[%d].%s: missing" % (i, k) for k in EPOCH_KEYS if k not in epoch)
        phases = epoch.get("phases_s")
        if isinstance(phases, dict):
            problems.extend("epochs[%d].phases_s.%s: missing" % (i, p)
                            for p in PHASES if p not in phases)
    if status == "ok" and not epochs:
        problems.append("epochs: an ok result needs at least one epoch")
    return problems


def write_text_atomic(path, text):
    """Write a file so that a reader sees the old one or the whole new one, never a torn one."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_atomic(path, record):
    write_text_atomic(path, json.dumps(record, indent=1, sort_keys=True) + "\n")


def read(path):
    """Load a result file; raises ValueError naming the file when it is not valid JSON."""
    try:
        with open(path) as f:
            return json.load(f)
    except ValueError as exc:
        raise ValueError("%s: not valid JSON (%s)" % (path, exc))
