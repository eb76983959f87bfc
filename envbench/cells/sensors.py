"""Noise, sensed while a cell runs: what else used the cell's cores, steal, load and clock
speed on the host, and on GPU cells the SM clock, temperature, power and throttle reasons.

A figure taken while a neighbour ran is not the stack's figure. Once a second, the host's
per-CPU counters (/proc/stat) and the cell's own cgroup CPU time are read; what the cell's
cores spent beyond the cell's own time is what other processes took from it. A repeat whose
host gave more than CONTENDED_SHARE of the cell's CPU time to others, or whose GPU throttled,
is marked contended, with the figures that say so (steal time is recorded beside them).
Where the engine's host is not this one (a remote DOCKER_HOST, a container sharing the
socket) nothing can be read, and the record says why rather than guessing.
"""
from __future__ import annotations

import os
import select
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envbench.inference import stats

# More than this share of the cell's CPU time (its cores x its wall time) spent by other
# processes, and the repeat is contended. Steal is recorded and shown, not a cause: on a
# shared VM it comes and goes with every cell (10-15% here), and rounds spread it.
CONTENDED_SHARE = 0.10
INTERVAL_S = 1.0
TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
# nvidia-smi's throttle reasons that slow a GPU down (idle and applications-clocks are not).
SLOWING = {"0x0000000000000004": "SW power cap", "0x0000000000000008": "HW slowdown",
           "0x0000000000000020": "SW thermal slowdown",
           "0x0000000000000040": "HW thermal slowdown",
           "0x0000000000000080": "HW power brake slowdown"}
GPU_QUERY = "index,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,power.limit," \
            "utilization.gpu,clocks_throttle_reasons.active"
# nvidia-smi's first line: a driver that hangs (a GPU fallen off the bus) must not hold the
# cell, which then runs unsensed and says so.
FIRST_LINE_S = 5.0


def cpu_list(cpuset: str | None) -> list[int]:
    """'0-1,4' -> [0, 1, 4]; None -> every CPU of this host."""
    if not cpuset:
        return list(range(os.cpu_count() or 1))
    cores: list[int] = []
    for part in cpuset.split(","):
        low, _, high = part.partition("-")
        cores.extend(range(int(low), int(high or low) + 1))
    return cores


def read_proc_stat(text: str | None = None) -> dict[int, tuple[float, float]]:
    """Per CPU: (busy seconds, steal seconds) since boot, from /proc/stat."""
    if text is None:
        text = Path("/proc/stat").read_text()
    out = {}
    for line in text.splitlines():
        name, *fields = line.split()
        if not name.startswith("cpu") or name == "cpu":
            continue
        values = [int(v) for v in fields] + [0] * 10
        user, nice, system, _idle, _iowait, irq, softirq, steal = values[:8]
        out[int(name[3:])] = ((user + nice + system + irq + softirq) / TICKS, steal / TICKS)
    return out


def cgroup_cpu_file(pid: int) -> Path | None:
    """The file holding a process's cgroup CPU time: cgroup v2's cpu.stat, else v1's
    cpuacct.usage; None where this host cannot see that process."""
    try:
        lines = Path("/proc/%d/cgroup" % pid).read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "cpuacct" in controllers.split(","):
            for mount in ("cpuacct", "cpu,cpuacct", "cpuacct,cpu"):
                candidate = Path("/sys/fs/cgroup", mount, path.lstrip("/"), "cpuacct.usage")
                if candidate.exists():
                    return candidate
    for line in lines:
        if line.startswith("0::"):
            candidate = Path("/sys/fs/cgroup", line[3:].lstrip("/"), "cpu.stat")
            if candidate.exists():
                return candidate
    return None


def read_cgroup_seconds(path: Path) -> float | None:
    try:
        text = path.read_text()
    except OSError:
        return None  # the container has ended and its cgroup is gone
    if path.name == "cpuacct.usage":
        return int(text.strip()) / 1e9
    for line in text.splitlines():
        if line.startswith("usage_usec "):
            return int(line.split()[1]) / 1e6
    return None


def cpu_mhz(cores: list[int]) -> list[float]:
    values = []
    for core in cores:
        try:
            khz = Path("/sys/devices/system/cpu/cpu%d/cpufreq/scaling_cur_freq" % core)
            values.append(int(khz.read_text()) / 1000.0)
        except (OSError, ValueError):
            pass
    return values


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None  # "[N/A]", "[Not Supported]"


@dataclass
class _GpuSamples:
    sm_ratio: list[float] = field(default_factory=list)
    temperature: list[float] = field(default_factory=list)
    power_ratio: list[float] = field(default_factory=list)
    reasons: set[str] = field(default_factory=set)
    count: int = 0

    def add(self, line: str) -> None:
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 8:
            return
        _, sm, sm_max, temp, power, limit, busy, reasons = parts
        self.count += 1
        sm_v, sm_max_v, power_v, limit_v = map(_float, (sm, sm_max, power, limit))
        # The SM clock of an idle GPU (before CUDA is up, between phases) is low by design:
        # only a busy GPU's clock says whether it ran slow.
        if sm_v is not None and sm_max_v and (_float(busy) or 0) > 0:
            self.sm_ratio.append(sm_v / sm_max_v)
        temp_v = _float(temp)
        if temp_v is not None:
            self.temperature.append(temp_v)
        if power_v is not None and limit_v:
            self.power_ratio.append(power_v / limit_v)
        try:
            mask = int(reasons, 16)
        except ValueError:
            return
        for bit, name in SLOWING.items():
            if mask & int(bit, 16):
                self.reasons.add(name)

    def record(self) -> dict[str, Any]:
        return {"samples": self.count,
                "sm_clock_ratio_min": round(min(self.sm_ratio), 3) if self.sm_ratio else None,
                "temperature_max_c": max(self.temperature) if self.temperature else None,
                "power_ratio_max": round(max(self.power_ratio), 3) if self.power_ratio else None,
                "throttle_reasons": sorted(self.reasons)}


class Sensors:
    """Sample the host (and the GPUs) while one cell's container runs: start(pid), stop()."""

    def __init__(self, cpuset: str | None, gpus: bool,
                 gpu_indices: list[int] | None = None) -> None:
        self.cores = cpu_list(cpuset)
        self.gpus = gpus
        # The cell's own GPUs (None: every GPU): a neighbour's job on another GPU, capped or
        # hot, says nothing about this cell.
        self.gpu_indices = gpu_indices
        self.gpu_unavailable: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._gpu_proc: subprocess.Popen[str] | None = None
        self._gpu_reader: threading.Thread | None = None
        self._gpu = _GpuSamples()
        self.unavailable: str | None = "the cell's container did not start"
        self.other_s = 0.0
        self.steal_s = 0.0
        self.own_s = 0.0
        self.covered_s = 0.0  # wall seconds between samples that both saw the cell
        self.loads: list[float] = []
        self.mhz: list[float] = []
        self.samples = 0

    # --- host
    def start(self, pid: int | None) -> None:
        cgroup = cgroup_cpu_file(pid) if pid else None
        if cgroup is None:
            self.unavailable = ("the engine's host is not this machine (its processes are not "
                                "visible here)")
        else:
            self.unavailable = None
            self._thread = threading.Thread(target=self._sample, args=(cgroup,), daemon=True,
                                            name="envbench-sensors")
            self._thread.start()
        if self.gpus and shutil.which("nvidia-smi"):
            self._start_gpu()

    def _sample(self, cgroup: Path) -> None:
        before = (time.monotonic(), read_proc_stat(), read_cgroup_seconds(cgroup))
        while not self._stop.wait(INTERVAL_S):
            now = (time.monotonic(), read_proc_stat(), read_cgroup_seconds(cgroup))
            self._add(before, now)
            before = now
        now = (time.monotonic(), read_proc_stat(), read_cgroup_seconds(cgroup))
        self._add(before, now)

    def _add(self, before: tuple[float, dict[int, tuple[float, float]], float | None],
             now: tuple[float, dict[int, tuple[float, float]], float | None]) -> None:
        (t0, stat0, own0), (t1, stat1, own1) = before, now
        if own0 is None or own1 is None:
            return  # the container was not (or no longer) there for the whole interval
        busy = sum(stat1[c][0] - stat0[c][0] for c in self.cores if c in stat0 and c in stat1)
        steal = sum(stat1[c][1] - stat0[c][1] for c in self.cores if c in stat0 and c in stat1)
        own = own1 - own0
        self.own_s += own
        # The cell's time may be counted on its cores a tick late or early: never below 0.
        self.other_s += max(0.0, busy - own)
        self.steal_s += steal
        self.covered_s += t1 - t0
        self.samples += 1
        try:
            self.loads.append(float(Path("/proc/loadavg").read_text().split()[0]))
        except (OSError, ValueError, IndexError):
            pass
        self.mhz.extend(cpu_mhz(self.cores))

    # --- GPUs
    def _start_gpu(self) -> None:
        for field_name in ("clocks_throttle_reasons.active", "clocks_event_reasons.active"):
            query = GPU_QUERY.replace("clocks_throttle_reasons.active", field_name)
            only = ["-i", ",".join(map(str, self.gpu_indices))] if self.gpu_indices else []
            try:
                self._gpu_proc = subprocess.Popen(
                    ["nvidia-smi", *only, "--query-gpu=%s" % query,
                     "--format=csv,noheader,nounits", "-lms", str(int(INTERVAL_S * 1000))],
                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                    start_new_session=True)
            except OSError:
                return
            first = _line_within(self._gpu_proc, FIRST_LINE_S)
            if first is None:
                self._gpu_proc.kill()
                self._gpu_proc.wait()
                self._gpu_proc = None
                self.gpu_unavailable = ("nvidia-smi printed nothing in %.0f s: the GPU was "
                                        "not sensed" % FIRST_LINE_S)
                return
            if first and "," in first:
                self._gpu.add(first)
                break
            self._gpu_proc.kill()  # this driver calls the throttle reasons "event reasons"
            self._gpu_proc.wait()
            self._gpu_proc = None
        if self._gpu_proc is not None:
            self._gpu_reader = threading.Thread(target=self._read_gpu, daemon=True,
                                                name="envbench-gpu-sensors")
            self._gpu_reader.start()

    def _read_gpu(self) -> None:
        assert self._gpu_proc is not None and self._gpu_proc.stdout is not None
        for line in self._gpu_proc.stdout:
            self._gpu.add(line)

    # --- the record
    def stop(self) -> dict[str, Any]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        if self._gpu_proc is not None:
            self._gpu_proc.kill()
            self._gpu_proc.wait()
            if self._gpu_reader is not None:
                self._gpu_reader.join(5)
        return self.record()

    def record(self) -> dict[str, Any]:
        host = None
        if self.unavailable is None:
            capacity = self.covered_s * len(self.cores)
            host = {
                "cores": self.cores, "samples": self.samples,
                "other_cpu_s": round(self.other_s, 3), "steal_s": round(self.steal_s, 3),
                "other_cpu_share": round(self.other_s / capacity, 4) if capacity else None,
                "steal_share": round(self.steal_s / capacity, 4) if capacity else None,
                "load_1m_max": max(self.loads) if self.loads else None,
                "cpu_mhz_min": min(self.mhz) if self.mhz else None,
                "cpu_mhz_median": stats.median(self.mhz) if self.mhz else None,
            }
        gpu = self._gpu.record() if self._gpu.count else None
        reasons = contention(host, gpu)
        unavailable = "; ".join(u for u in (self.unavailable, self.gpu_unavailable) if u) or None
        return {"host": host, "gpu": gpu, "unavailable": unavailable,
                "contended": bool(reasons), "reasons": reasons}


def _line_within(proc: subprocess.Popen[str], seconds: float) -> str | None:
    """The process's first line, or None if it prints none within ``seconds``."""
    stream = proc.stdout
    if stream is None:
        return None
    ready, _, _ = select.select([stream], [], [], seconds)
    return stream.readline() if ready else None


def contention(host: dict[str, Any] | None, gpu: dict[str, Any] | None) -> list[str]:
    """Why a repeat's figures are not the stack's alone (empty: nothing seen)."""
    reasons = []
    if host is not None:
        share = host.get("other_cpu_share")
        if share is not None and share > CONTENDED_SHARE:
            reasons.append("other processes used %.0f%% of the cell's CPU time on cores %s"
                           % (100 * share, ",".join(map(str, host["cores"]))))
    if gpu is not None and gpu.get("throttle_reasons"):
        reasons.append("the GPU throttled (%s)" % ", ".join(gpu["throttle_reasons"]))
    return reasons
