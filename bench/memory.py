"""Peak memory: host RSS (self + DataLoader workers), the cgroup's peak, swap, GPU."""
from __future__ import annotations

import os
import resource


def host_peak_rss_bytes():
    # ru_maxrss is in KiB on Linux. RUSAGE_CHILDREN covers workers that have exited (the
    # DataLoader joins them each epoch); it is the largest child, so with concurrent workers
    # this is a lower bound. The cgroup peak below is the exact figure where it exists.
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return (own + children) * 1024


def _cgroup_dirs():
    """This process's cgroup folders, v2 first, from /proc/self/cgroup."""
    dirs = []
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return dirs
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, path = parts
        if hierarchy == "0":
            dirs.append(("v2", os.path.join("/sys/fs/cgroup", path.lstrip("/"))))
            dirs.append(("v2", "/sys/fs/cgroup"))
        elif "memory" in controllers.split(","):
            dirs.append(("v1", os.path.join("/sys/fs/cgroup/memory", path.lstrip("/"))))
            dirs.append(("v1", "/sys/fs/cgroup/memory"))
    return dirs


def _read_int(path):
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def cgroup_peaks():
    """(memory peak, swap peak) of this cgroup in bytes; None where the kernel has no counter."""
    for version, folder in _cgroup_dirs():
        if version == "v2":
            peak = _read_int(os.path.join(folder, "memory.peak"))
            if peak is not None:
                return peak, _read_int(os.path.join(folder, "memory.swap.peak"))
        else:
            peak = _read_int(os.path.join(folder, "memory.max_usage_in_bytes"))
            if peak is not None:
                both = _read_int(os.path.join(folder, "memory.memsw.max_usage_in_bytes"))
                return peak, (max(0, both - peak) if both is not None else None)
    return None, None


def snapshot(device):
    import torch

    cgroup_peak, swap_peak = cgroup_peaks()
    record = {
        "host_peak_rss_bytes": host_peak_rss_bytes(),
        "cgroup_peak_bytes": cgroup_peak,
        "swap_peak_bytes": swap_peak,
        "gpu_peak_allocated_bytes": None,
        "gpu_peak_reserved_bytes": None,
    }
    if device.type == "cuda":
        record["gpu_peak_allocated_bytes"] = torch.cuda.max_memory_allocated(device)
        record["gpu_peak_reserved_bytes"] = torch.cuda.max_memory_reserved(device)
    return record
