"""Peak memory: bench's RSS, its largest worker's, the container's (cgroup) peak, swap, GPU."""
from __future__ import annotations

import os
import resource


def rss_peaks():
    """(bench's own peak RSS, the largest single child's peak RSS) in bytes.

    ru_maxrss is in KiB on Linux. RUSAGE_CHILDREN covers children that have exited
    (DataLoader workers, which the DataLoader joins each epoch, or any other) and gives the
    largest one's peak; a forked child's RSS includes the pages it shares with bench. The
    two are maxima at different times, so their sum is no peak: they are reported apart,
    and the container's true peak is the cgroup's.
    """
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return own, (children or None)


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
    """(memory peak, swap peak, how the swap peak was found) of this cgroup, in bytes.

    cgroup v2 keeps true peaks of both. v1 keeps the peak of memory and of memory+swap,
    taken at different times: their difference is a lower bound of the swap peak, and is
    named so. None where the kernel keeps no such counter.
    """
    for version, folder in _cgroup_dirs():
        if version == "v2":
            peak = _read_int(os.path.join(folder, "memory.peak"))
            if peak is not None:
                swap = _read_int(os.path.join(folder, "memory.swap.peak"))
                return peak, swap, ("cgroup2 memory.swap.peak" if swap is not None else None)
        else:
            peak = _read_int(os.path.join(folder, "memory.max_usage_in_bytes"))
            if peak is not None:
                both = _read_int(os.path.join(folder, "memory.memsw.max_usage_in_bytes"))
                if both is None:
                    return peak, None, None
                return peak, max(0, both - peak), "cgroup1 lower bound"
    return None, None, None


def gpu_peaks(indices):
    """[peak allocated, peak reserved] bytes of each CUDA device in ``indices``."""
    import torch

    return [[torch.cuda.max_memory_allocated(i), torch.cuda.max_memory_reserved(i)]
            for i in indices]


def gpu_fields(device_peaks):
    """The record's GPU fields from {device index: (allocated, reserved)} of every device
    the run trained on: the peaks are the largest device's (under dp the first device also
    gathers the outputs; under ddp each rank has its own), and past one device each is
    listed, so that a multi-GPU figure is never one device's alone."""
    fields = {"gpu_peak_allocated_bytes": max(a for a, _ in device_peaks.values()),
              "gpu_peak_reserved_bytes": max(r for _, r in device_peaks.values())}
    if len(device_peaks) > 1:
        fields["gpu_devices"] = [
            {"index": index, "peak_allocated_bytes": a, "peak_reserved_bytes": r}
            for index, (a, r) in sorted(device_peaks.items())]
    return fields


def snapshot(device_peaks=None):
    """The run's memory peaks. ``device_peaks`` (see gpu_fields): every CUDA device the run
    trained on, None off CUDA."""
    cgroup_peak, swap_peak, swap_method = cgroup_peaks()
    own, worker = rss_peaks()
    record = {
        "process_rss_peak_bytes": own,
        "child_rss_peak_bytes": worker,
        "cgroup_peak_bytes": cgroup_peak,
        "swap_peak_bytes": swap_peak,
        "swap_peak_method": swap_method,
        "gpu_peak_allocated_bytes": None,
        "gpu_peak_reserved_bytes": None,
    }
    if device_peaks:
        record.update(gpu_fields(device_peaks))
    return record
