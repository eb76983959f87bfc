"""bench end to end through its CLI: learning, accumulation, determinism, failures, options."""
from __future__ import annotations

import torch
from bench_helpers import needs_torchvision, no_gpu, run_bench

from bench import result

SMALL = ("--device", "cpu", "--synthetic", "--limit", "1024", "--limit-test", "256")


def test_loss_falls_on_a_learnable_set(tmp_path, cifar_dir):
    code, record, out = run_bench(tmp_path, "--device", "cpu", "--data", cifar_dir,
                                  "--epochs", "4", "--batch-size", "16", "--pipeline", "resident",
                                  "--lr", "0.01")
    assert code == 0, out
    losses = [e["train_loss"] for e in record["epochs"]]
    assert losses[-1] < 0.8 * losses[0], losses
    assert record["summary"]["final_test_acc"] > 0.2
    assert out.count("img/s") == 4  # one progress line per epoch


def test_record_carries_every_measurement(tmp_path):
    code, record, out = run_bench(tmp_path, *SMALL, "--epochs", "2", "--batch-size", "128",
                                  "--pipeline", "resident")
    assert code == 0, out
    assert record["status"] == "ok" and record["error"] is None
    first, second = record["epochs"]
    assert first["samples"] == second["samples"] == 1024
    assert set(first["phases_s"]) == set(result.PHASES)
    assert sum(second["phases_s"].values()) <= second["wall_s"] * 1.05
    assert second["phases_s"]["forward"] > 0 and second["phases_s"]["backward"] > 0
    summary = record["summary"]
    assert summary["epoch_s_median"] == second["wall_s"]
    assert summary["first_epoch_s"] == first["wall_s"]
    memory = record["memory"]
    assert memory["process_rss_peak_bytes"] > 50 * 2**20
    # (The resident pipeline has no DataLoader workers: its child peak is whatever else
    # torch forked, if anything. The classic pipeline's workers are checked below.)
    assert memory["gpu_peak_allocated_bytes"] is None
    assert summary["forward_dtype"] == "float32"
    env = record["env"]
    assert env["torch"] == torch.__version__ and len(env["bench_sha256"]) == 64
    assert env["cpu_count"] >= 1 and env["threads"] >= 1 and "torch" in env["packages"]
    assert env["gpu_count"] == (torch.cuda.device_count() if torch.cuda.is_available() else 0)


def test_accumulation_matches_one_large_batch(tmp_path):
    common = (*SMALL, "--limit", "512", "--epochs", "1", "--pipeline", "resident",
              "--deterministic", "--lr", "0.05")
    code_a, _, out_a = run_bench(tmp_path, *common, "--batch-size", "32", "--accumulate", "4",
                                 "--save-weights", tmp_path / "a.pt", name="a.json")
    code_b, _, out_b = run_bench(tmp_path, *common, "--batch-size", "128",
                                 "--save-weights", tmp_path / "b.pt", name="b.json")
    assert code_a == code_b == 0, out_a + out_b
    a, b = torch.load(str(tmp_path / "a.pt")), torch.load(str(tmp_path / "b.pt"))
    code_c, _, _ = run_bench(tmp_path, *common, "--batch-size", "32",
                             "--save-weights", tmp_path / "c.pt", name="c.json")
    c = torch.load(str(tmp_path / "c.pt"))
    for name in a:
        assert torch.allclose(a[name], b[name], atol=1e-5, rtol=1e-4), name
    # Without accumulation, batch 32 takes 4x the steps: the weights must differ, or the
    # comparison above would prove nothing.
    assert any(not torch.allclose(a[n], c[n], atol=1e-3) for n in a)


def test_deterministic_runs_give_identical_weights(tmp_path):
    args = (*SMALL, "--epochs", "1", "--batch-size", "64", "--pipeline", "resident",
            "--deterministic")
    _, one, _ = run_bench(tmp_path, *args, name="one.json")
    _, two, _ = run_bench(tmp_path, *args, name="two.json")
    _, other, _ = run_bench(tmp_path, *args, "--seed", "1", name="other.json")
    assert one["summary"]["weights_sha256"] == two["summary"]["weights_sha256"]
    assert other["summary"]["weights_sha256"] != one["summary"]["weights_sha256"]


@no_gpu
def test_a_failing_run_writes_a_failed_record(tmp_path):
    code, record, out = run_bench(tmp_path, "--device", "cuda", "--synthetic", "--epochs", "1",
                                  "--batch-size", "8", "--pipeline", "resident", "--limit", "16")
    assert code == 1
    assert record["status"] == "failed"
    assert record["error"]["type"] == "DeviceUnavailable"
    assert "--device cuda" in record["error"]["message"]
    assert "Traceback" not in out and "error: DeviceUnavailable" in out


def test_missing_data_is_a_failed_record_naming_the_folder(tmp_path):
    code, record, out = run_bench(tmp_path, "--device", "cpu", "--data", tmp_path / "nope",
                                  "--epochs", "1", "--batch-size", "8", "--pipeline", "resident")
    assert code == 1 and record["error"]["type"] == "DataError"
    assert "nope" in record["error"]["message"] and "Traceback" not in out


def _torch_major():
    return int(torch.__version__.split(".")[0])


def test_compile_runs_on_torch_2_and_is_refused_by_name_on_torch_1(tmp_path):
    code, record, out = run_bench(tmp_path, *SMALL, "--limit", "128", "--epochs", "1",
                                  "--batch-size", "64", "--pipeline", "resident",
                                  "--compile", "default")
    if _torch_major() < 2:  # the Debian stack: torch 1.13 has no torch.compile
        assert code == 1 and record["error"]["type"] == "UnsupportedOption", out
        assert "--compile needs torch>=2.0, image has %s" % torch.__version__.split("+")[0] \
            in record["error"]["message"]
    else:  # the host's torch 2.x compiles with the host's g++ (the CI machine has it)
        assert code == 0, out
        assert record["status"] == "ok" and record["config"]["compile"] == "default"
        assert record["summary"]["final_test_acc"] is not None


def test_amp_really_runs_the_model_in_the_lower_precision(tmp_path):
    """The recorded forward dtype is what autocast produced, not what was asked for. Both
    stacks the suite runs on (torch 1.13 and 2.x) autocast to bfloat16 on CPU."""
    common = (*SMALL, "--limit", "128", "--epochs", "1", "--batch-size", "64",
              "--pipeline", "resident")
    code, plain, out = run_bench(tmp_path, *common, name="off.json")
    assert code == 0, out
    assert plain["summary"]["forward_dtype"] == "float32"
    code, amp, out = run_bench(tmp_path, *common, "--amp", "bf16", name="bf16.json")
    assert code == 0, out
    assert amp["summary"]["forward_dtype"] == "bfloat16"


def test_fp16_on_cpu_follows_what_this_torch_can_do(tmp_path):
    """torch 1.13 autocasts only bf16 on CPU (it warns and runs fp32 for fp16): refused by
    name. torch 2.x autocasts fp16 on CPU: it runs, and the forward pass is float16."""
    code, record, out = run_bench(tmp_path, *SMALL, "--limit", "128", "--epochs", "1",
                                  "--batch-size", "64", "--pipeline", "resident",
                                  "--amp", "fp16")
    if _torch_major() < 2:
        assert code == 1 and record["error"]["type"] == "UnsupportedOption", out
        assert "--amp fp16 on cpu is not supported by torch" in record["error"]["message"]
        assert "target dtype is not supported" in record["error"]["message"]
    else:
        assert code == 0, out
        assert record["summary"]["forward_dtype"] == "float16"


def test_a_stray_warning_while_autocast_is_built_does_not_switch_amp_off(monkeypatch):
    """Only a disabled context means unsupported: a deprecation warning from torch while the
    context is built (as torch 2.4 added for torch.cuda.amp) must leave bf16 on."""
    import warnings

    from bench import compat

    real = torch.autocast

    def warning_autocast(*args, **kwargs):
        warnings.warn("some API is deprecated", DeprecationWarning, stacklevel=2)
        return real(*args, **kwargs)

    monkeypatch.setattr(torch, "autocast", warning_autocast)
    assert compat.autocast_disabled("cpu", torch.bfloat16) is None
    factory = compat.autocast_factory(torch.device("cpu"), "bf16")
    with factory():
        assert torch.mm(torch.ones(2, 2), torch.ones(2, 2)).dtype == torch.bfloat16
    # And a dtype autocast really refuses is still refused, with torch's own reason.
    said = compat.autocast_disabled("cpu", torch.float64)
    assert said is not None and "not supported" in said


def test_a_diverging_run_records_its_loss_as_not_finite(tmp_path):
    code, record, out = run_bench(tmp_path, *SMALL, "--limit", "256", "--epochs", "1",
                                  "--batch-size", "32", "--pipeline", "resident",
                                  "--lr", "1e12")
    assert code == 0, out
    assert record["epochs"][0]["train_loss"] is None and "loss not finite" in out


@needs_torchvision
def test_classic_pipeline_runs_deterministically(tmp_path, cifar_dir):
    args = ("--device", "cpu", "--data", cifar_dir, "--epochs", "2", "--batch-size", "32",
            "--pipeline", "classic", "--workers", "2", "--deterministic")
    code, one, out = run_bench(tmp_path, *args, name="one.json")
    assert code == 0, out
    _, two, _ = run_bench(tmp_path, *args, name="two.json")
    assert one["summary"]["weights_sha256"] == two["summary"]["weights_sha256"]
    assert one["epochs"][1]["samples"] == 1000 and one["env"]["torchvision"]
    assert one["epochs"][1]["phases_s"]["data"] > 0
    # Two DataLoader workers ran and were joined: the largest one's peak is recorded, and a
    # forked worker holds at least the torch it shares with bench.
    assert one["memory"]["child_rss_peak_bytes"] > 50 * 2**20, one["memory"]


def test_sigterm_ends_the_run_with_a_record_saying_so(tmp_path):
    """`docker stop` (through docker's init) sends SIGTERM: bench records why it ended."""
    import json
    import os
    import signal
    import subprocess
    import sys

    from bench_helpers import ROOT

    out = tmp_path / "r.json"
    proc = subprocess.Popen([sys.executable, "-m", "bench", *SMALL, "--epochs", "500",
                             "--batch-size", "64", "--pipeline", "resident", "--out", str(out)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            universal_newlines=True)
    first = proc.stdout.readline()  # the first epoch's line: training is under way
    assert first.startswith("epoch 1/500"), first
    os.kill(proc.pid, signal.SIGTERM)
    rest, _ = proc.communicate(timeout=120)
    assert proc.returncode == 143, rest
    record = json.loads(out.read_text())
    assert record["status"] == "failed" and record["error"]["type"] == "Interrupted"
    assert "SIGTERM" in record["error"]["message"] and len(record["epochs"]) >= 1
    assert "Traceback" not in rest


def test_sigterm_while_torch_imports_ends_with_a_record_not_a_crash(tmp_path):
    """An engine shutting down can send SIGTERM while torch._C loads.

    An exception raised inside that import was swallowed (the run went on) or left the
    interpreter broken (RecursionError, or SystemError and a segfault, with a traceback in
    the cell's log): bench must note the signal, finish the import and then end with its
    usual record. Where in the import the signal lands matters, so it is sent at steps of
    100 ms from the moment torch's shared library is mapped.
    """
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    from bench_helpers import ROOT

    outcomes = []
    for step in range(9):
        out = tmp_path / ("r%d.json" % step)
        # A run far longer than the sweep (500 epochs), so that no signal arrives after it
        # has ended on its own: each lands in the import or in training, and both must end
        # with the record.
        proc = subprocess.Popen([sys.executable, "-m", "bench", *SMALL, "--epochs", "500",
                                 "--batch-size", "64", "--pipeline", "resident",
                                 "--out", str(out)],
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                universal_newlines=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with open("/proc/%d/maps" % proc.pid) as f:
                    if "libtorch" in f.read():
                        break  # the process is inside `import torch`
            except OSError:
                pass
            time.sleep(0.001)
        time.sleep(step * 0.1)
        os.kill(proc.pid, signal.SIGTERM)
        rest, _ = proc.communicate(timeout=120)
        error = json.loads(out.read_text()).get("error") if out.exists() else None
        if proc.returncode != 143 or not error or error["type"] != "Interrupted" \
                or "Traceback" in rest:
            outcomes.append("%d ms: exit %s, error %s\n%s" % (step * 100, proc.returncode,
                                                              error, rest[-600:]))
    assert not outcomes, "\n".join(outcomes)


def test_a_sigterm_during_a_deferred_section_ends_the_run_after_it():
    """The guard bench puts around `import torch`, with a real signal to this process."""
    import os
    import signal
    import time

    import pytest

    from bench import interrupts
    from bench.errors import Terminated

    guard = interrupts.SigtermGuard()
    previous = signal.signal(signal.SIGTERM, guard)
    try:
        finished = []
        with pytest.raises(Terminated):
            with guard.deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)  # the handler has run by now, and must not have raised
                finished.append("the section ran to its end")
        assert finished
        with pytest.raises(Terminated):  # outside a deferred section: at once
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_sigterm_whose_raise_is_swallowed_is_raised_again_at_the_next_step(monkeypatch):
    """Some places swallow what a signal handler raises: code that C calls back into (a
    __del__ here; CI saw one in collections.abc while torch was busy) prints "Exception
    ignored in ..." and goes on, and the run trained on for 120 s after SIGTERM. The guard
    remembers the signal, and the training loop's check at every step raises it again."""
    import os
    import signal
    import sys
    import time

    import pytest

    from bench import interrupts
    from bench.errors import Terminated

    swallowed = []
    monkeypatch.setattr(sys, "unraisablehook", lambda info: swallowed.append(info.exc_type))

    class Swallows:
        def __del__(self):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)  # the handler runs here, and its raise is ignored

    guard = interrupts.SigtermGuard()
    previous = signal.signal(signal.SIGTERM, guard)
    try:
        Swallows()  # collected at once: __del__ runs, and nothing reaches this frame
        assert swallowed == [Terminated]  # "Exception ignored in ...": the run would go on
        with pytest.raises(Terminated):
            guard.check()
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_the_training_loop_asks_the_guard_at_every_step():
    """Where the check sits: the train and test batches' loops, each epoch, each profiled
    step (read from the source: a check removed from the loop is a SIGTERM lost again)."""
    import inspect

    from bench import profiling, train

    for loop in (train.train_epoch, train.train, train.evaluate):
        assert "interrupts.check()" in inspect.getsource(loop), loop.__name__
    assert inspect.getsource(profiling.window).count("interrupts.check()") == 2


def test_a_sigterm_inside_code_that_catches_exception_still_ends_the_run(monkeypatch):
    """The fingerprint reads torch's build configuration under ``except Exception`` (an odd
    build goes on without it); a SIGTERM landing there must still end the run, not be taken
    for an odd build while training goes on (seen in CI: a run trained on after SIGTERM)."""
    import os
    import signal
    import time

    import pytest
    import torch

    from bench import fingerprint, interrupts
    from bench.errors import Terminated

    def show_while_stopped():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)  # the handler runs here, inside fingerprint's try
        return ""

    monkeypatch.setattr(torch.__config__, "show", show_while_stopped)
    previous = signal.signal(signal.SIGTERM, interrupts.SigtermGuard())
    try:
        with pytest.raises(Terminated):
            fingerprint.math_libraries(torch)
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_gpu_peaks_of_several_devices_are_the_largest_and_each_is_listed():
    from bench import memory

    fields = memory.gpu_fields({1: (300, 512), 0: (700, 1024), 2: (100, 2048)})
    assert fields == {"gpu_peak_allocated_bytes": 700, "gpu_peak_reserved_bytes": 2048,
                      "gpu_devices": [
                          {"index": 0, "peak_allocated_bytes": 700, "peak_reserved_bytes": 1024},
                          {"index": 1, "peak_allocated_bytes": 300, "peak_reserved_bytes": 512},
                          {"index": 2, "peak_allocated_bytes": 100, "peak_reserved_bytes": 2048}]}
    # One device: its peaks, and no list.
    assert memory.gpu_fields({0: (5, 8)}) == {"gpu_peak_allocated_bytes": 5,
                                              "gpu_peak_reserved_bytes": 8}
