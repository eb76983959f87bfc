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
    """A stand-in nvidia-smi that refuses any other query, then samples at 10 Hz: an idle
    GPU's low clock before CUDA is up (not counted), the busy SM clock at 80% of its maximum,
    then a thermal slowdown."""
    script = tmp_path / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        'case "$*" in *"--query-gpu=%s --format=csv,noheader,nounits -lms 1000"*) ;; '
        '*) echo "unexpected: $*" >&2; exit 6;; esac\n'
        "echo '0, 210, 1980, 35, 70.0, 700.00, 0, 0x0000000000000001'\n"
        "echo '0, 1584, 1980, 61, 250.5, 700.00, 97, 0x0000000000000000'\n"
        "while true; do echo '0, 1980, 1980, 84, 690.0, 700.00, 99, 0x0000000000000040'; "
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


def _fake_smi(tmp_path, monkeypatch, body: str) -> None:
    script = tmp_path / "nvidia-smi"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", "%s:%s" % (tmp_path, os.environ["PATH"]))


def test_an_nvidia_smi_that_hangs_leaves_the_cell_unsensed_not_stuck(tmp_path, monkeypatch):
    _fake_smi(tmp_path, monkeypatch, "sleep 600\n")
    monkeypatch.setattr(sensors, "FIRST_LINE_S", 0.5)
    sensed = sensors.Sensors(None, gpus=True)
    started = time.monotonic()
    sensed.start(None)
    record = sensed.stop()
    assert time.monotonic() - started < 5
    assert record["gpu"] is None and "nvidia-smi printed nothing in 0 s" in record["unavailable"]


def test_only_the_cells_own_gpus_are_sensed(tmp_path, monkeypatch):
    """Two GPUs: the cell's GPU 0 runs clean, a neighbour's job throttles GPU 1. Asked with
    -i 0, the stand-in prints GPU 0 alone; asked for every GPU it prints both."""
    _fake_smi(tmp_path, monkeypatch,
              'case "$*" in *"-i 0 "*) both=no;; *) both=yes;; esac\n'
              "while true; do echo '0, 1980, 1980, 60, 600.0, 700.00, 98, 0x0000000000000000'\n"
              '  [ $both = yes ] && '
              "echo '1, 1200, 1980, 90, 350.0, 350.00, 99, 0x0000000000000004'\n"
              "  sleep 0.1; done\n")
    mine = sensors.Sensors(None, gpus=True, gpu_indices=[0])
    mine.start(None)
    time.sleep(0.5)
    record = mine.stop()
    assert record["gpu"]["throttle_reasons"] == [] and not record["contended"]
    assert record["gpu"]["sm_clock_ratio_min"] == 1.0
    every = sensors.Sensors(None, gpus=True)
    every.start(None)
    time.sleep(0.5)
    assert every.stop()["reasons"] == ["the GPU throttled (SW power cap)"]
