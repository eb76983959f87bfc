"""The noise sensors' readings: /proc/stat arithmetic, what counts as contended, and the GPU
sampler against a stand-in nvidia-smi that checks it is asked the right question."""
from __future__ import annotations

import os
import stat
import time

from envbench.cells import sensors

PROC_STAT = """cpu  10 0 10 100 0 0 0 0 0 0
cpu0 100 5 20 1000 3 1 2 7 0 0
cpu1 300 0 40 900 0 0 0 0 0 0
intr 12345
"""


def test_proc_stat_gives_busy_and_steal_seconds_per_cpu():
    ticks = sensors.TICKS
    read = sensors.read_proc_stat(PROC_STAT)
    assert read[0] == ((100 + 5 + 20 + 1 + 2) / ticks, 7 / ticks)  # iowait and idle are not busy
    assert read[1] == (340 / ticks, 0.0) and set(read) == {0, 1}


def test_cpu_lists_and_the_cell_cores():
    assert sensors.cpu_list("0-2,5") == [0, 1, 2, 5]
    assert sensors.cpu_list(None) == list(range(os.cpu_count() or 1))


def test_a_repeat_is_contended_by_others_on_its_cores_or_by_a_throttling_gpu_not_by_steal():
    host = {"cores": [0], "other_cpu_share": 0.04, "steal_share": 0.0}
    assert sensors.contention(host, None) == []
    busy = dict(host, other_cpu_share=0.25)
    assert sensors.contention(busy, None) == [
        "other processes used 25% of the cell's CPU time on cores 0"]
    stolen = dict(host, steal_share=0.2)  # recorded, and spread over every cell by rounds
    assert sensors.contention(stolen, None) == []
    gpu = {"throttle_reasons": ["HW thermal slowdown"]}
    assert sensors.contention(None, gpu) == ["the GPU throttled (HW thermal slowdown)"]


def test_a_process_this_host_cannot_see_is_reported_as_not_sensed():
    sensed = sensors.Sensors("0", gpus=False)
    sensed.start(2**22 + 12345)  # no such process
    record = sensed.stop()
    assert record["host"] is None and "not this machine" in record["unavailable"]
    assert record["contended"] is False


def test_the_gpu_sampler_reads_clocks_temperature_power_and_throttle_reasons(tmp_path,
                                                                             monkeypatch):
    """A stand-in nvidia-smi that refuses any other query, then samples at 10 Hz: the first
    SM clock at 80% of its maximum, then a thermal slowdown."""
    script = tmp_path / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        'case "$*" in *"--query-gpu=%s --format=csv,noheader,nounits -lms 1000"*) ;; '
        '*) echo "unexpected: $*" >&2; exit 6;; esac\n'
        "echo '1584, 1980, 61, 250.5, 700.00, 0x0000000000000000'\n"
        "while true; do echo '1980, 1980, 84, 690.0, 700.00, 0x0000000000000040'; "
        "sleep 0.1; done\n" % sensors.GPU_QUERY)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", "%s:%s" % (tmp_path, os.environ["PATH"]))
    sensed = sensors.Sensors(None, gpus=True)
    sensed.start(None)
    time.sleep(0.6)
    record = sensed.stop()
    gpu = record["gpu"]
    assert gpu["samples"] >= 3 and gpu["sm_clock_ratio_min"] == 0.8
    assert gpu["temperature_max_c"] == 84 and gpu["power_ratio_max"] == round(690 / 700, 3)
    assert gpu["throttle_reasons"] == ["HW thermal slowdown"]
    assert record["contended"] and record["reasons"] == ["the GPU throttled (HW thermal slowdown)"]
