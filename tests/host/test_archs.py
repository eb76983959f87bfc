"""Which GPUs a CUDA stack can run on, from its compiled architectures; and the GPU sentences
the kit says instead of "no kernel image is available" or "install the toolkit"."""
from __future__ import annotations

from bench.rules import FailureKind
from envbench.cells import gpufit, resources
from envbench.engine import gpu
from envbench.engine.gpu import GpuInfo, GpuState
from envbench.images import archs
from envbench.matrix.models import Environment, Target

SEED = Environment(python="3.8", torch="1.12.1", torchvision="0.13.1", cuda="11.6")
CU130 = Environment(python="3.12", torch="2.14.1", cuda="13.0")
CU128 = Environment(python="3.12", torch="2.14.1", cuda="12.8")
H200 = GpuInfo("NVIDIA H200", "580.95.05", "143771 MiB", (9, 0))


def test_a_cubin_runs_on_its_major_from_its_minor_up_and_ptx_on_anything_newer():
    built = archs.Archs.parse("sm_70 sm_80 sm_86 compute_86", "test")
    assert built.fits((8, 9))       # Ada runs sm_86 code
    assert built.fits((7, 5))       # sm_70 code on a Turing GPU
    assert not built.fits((6, 1))   # nothing that old
    assert built.fits((9, 0))       # PTX for 8.6, compiled by the driver for Hopper
    assert not archs.Archs.parse("sm_70 sm_86", "test").fits((9, 0))
    # torch writes its list as _cuda_getArchFlags() and get_arch_list() do.
    assert archs.Archs.parse("sm_100 sm_120 compute_120", "t").cubins == [(10, 0), (12, 0)]


def test_the_write_ups_stack_cannot_run_on_hopper_and_cuda_13_drops_volta():
    seed, cu130, cu128 = (archs.known(e.torch, e.cuda) for e in (SEED, CU130, CU128))
    assert not seed.fits((9, 0)) and seed.fits((8, 6)) and seed.fits((3, 7))
    assert cu130.fits((9, 0)) and cu130.fits((12, 1)) and not cu130.fits((7, 0))
    assert cu128.fits((7, 0)) and cu128.fits((9, 0))
    sentence = archs.misfit("seed", SEED.torch, SEED.cuda, seed, "NVIDIA H200", (9, 0))
    assert sentence.startswith("seed (torch 1.12.1+cu116) has kernels for sm_37–sm_86, no "
                               "PTX; this NVIDIA H200 is sm_90: it cannot run here")
    assert archs.misfit("new", CU130.torch, CU130.cuda, cu130, "NVIDIA H200", (9, 0)) is None
    assert archs.known("2.99.0", "13.0") is None  # an unknown stack is not guessed at


def test_a_stack_is_blocked_first_by_its_kernels_then_by_the_runtime_then_by_the_driver():
    working = GpuState(True, (H200,))
    seed = archs.known(SEED.torch, SEED.cuda)
    blocked = gpufit.block("seed", SEED, working, seed)
    assert blocked.kind == "NoKernelImage" and "sm_90" in blocked.sentence
    no_runtime = GpuState(False, (H200,), gpu.NO_RUNTIME)
    assert gpufit.block("seed", SEED, no_runtime, seed).kind == "NoKernelImage"
    cu130 = archs.known(CU130.torch, CU130.cuda)
    assert gpufit.block("new", CU130, no_runtime, cu130) == gpufit.GpuBlock(
        "GpuUnavailable", gpu.NO_RUNTIME)
    old_driver = GpuState(True, (GpuInfo("NVIDIA H200", "575.1", "1 MiB", (9, 0)),))
    assert gpufit.block("new", CU130, old_driver, cu130).kind == "DriverTooOld"
    assert gpufit.block("new", CU130, working, cu130) is None


def test_the_runtimes_driver_errors_are_named_as_driver_errors():
    mismatch = RuntimeError("OCI runtime create failed: nvidia-container-cli: initialization "
                            "error: nvml error: driver/library version mismatch: unknown")
    assert "reboot the host" in gpu.explain(mismatch)
    not_loaded = RuntimeError("nvidia-container-cli: initialization error: nvml error: "
                              "driver not loaded")
    assert gpu.explain(not_loaded).startswith("the NVIDIA kernel driver is not loaded")
    missing = RuntimeError('could not select device driver "" with capabilities: [[gpu]]')
    assert gpu.explain(missing) == gpu.NO_RUNTIME


def test_a_one_device_cell_asks_for_one_gpu_of_a_gpus_all_target():
    target = Target(device="cuda", gpus="all")
    assert resources.plan(target, 8).gpus == 1
    assert resources.plan(target, 8, parallel="ddp").gpus == "all"
    # gpus: 2 without dp/ddp: one GPU trains, so one is attached (not two, one idle).
    assert resources.plan(Target(device="cuda", gpus=2), 8).gpus == 1
    assert resources.plan(Target(device="cuda", gpus=2), 8, parallel="ddp").gpus == 2


def test_a_toolkit_in_cdi_mode_and_a_hook_off_dockerds_path_are_named_with_their_fix():
    # The messages as the engine relays them (nvidia-container-toolkit's hook, runc's exec).
    cdi = RuntimeError(
        "500 Server Error: Internal Server Error (\"failed to create task for container: "
        "failed to create shim task: OCI runtime create failed: runc create failed: unable to "
        "start container process: error during container init: error running prestart hook "
        "#0: exit status 1, stdout: , stderr: invoking the NVIDIA Container Runtime Hook "
        "directly (e.g. specifying the docker --gpus flag) is not supported. Please use the "
        "NVIDIA Container Runtime (e.g. specify the --runtime=nvidia flag) instead.: unknown\")")
    said = gpu.explain(cdi)
    assert said.startswith("NVIDIA's container toolkit is in CDI mode")
    assert 'mode = "legacy"' in said and "nvidia-ctk cdi generate" in said
    no_hook = RuntimeError(
        "OCI runtime create failed: runc create failed: unable to start container process: "
        "error during container init: error running hook #0: error running hook: exec: "
        '"nvidia-container-runtime-hook": executable file not found in $PATH: unknown')
    assert gpu.explain(no_hook).startswith(
        "dockerd cannot find nvidia-container-runtime-hook on its PATH")


def test_cdi_devices_are_asked_for_as_dockers_cdi_driver_names_them():
    (all_of_them,) = gpu.device_requests(-1, gpu.CDI)
    assert all_of_them["Driver"] == "cdi" and all_of_them["DeviceIDs"] == ["nvidia.com/gpu=all"]
    (two,) = gpu.device_requests(2, gpu.CDI)
    assert two["DeviceIDs"] == ["nvidia.com/gpu=0", "nvidia.com/gpu=1"]
    (legacy,) = gpu.device_requests(1)
    assert (legacy["Count"], legacy["Capabilities"], legacy["Driver"]) == (1, [["gpu"]], "")
    # Docker 25+'s own CDI refusals, as the engine relays them, each with its fix.
    missing = RuntimeError('500 Server Error ("could not select device driver: CDI device '
                           'injection failed: unresolvable CDI devices nvidia.com/gpu=all")')
    assert "nvidia-ctk cdi generate" in gpu.explain(missing)
    off = RuntimeError('500 Server Error ("CDI is not enabled")')
    assert '"cdi": true' in gpu.explain(off)


def test_a_gpu_in_mig_mode_is_read_and_refused_before_building(tmp_path, monkeypatch):
    import os
    import stat

    script = tmp_path / "nvidia-smi"
    # A driver that knows MIG answers the kit's query; the stand-in refuses any other.
    script.write_text("#!/bin/sh\n"
                      'if [ "$*" != "%s" ]; then echo "unexpected: $*" >&2; exit 6; fi\n'
                      "echo 'NVIDIA H100 80GB HBM3, 580.95.05, 81559 MiB, 9.0, Enabled'\n"
                      % " ".join(gpu.HOST_QUERY[1:]))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", "%s:%s" % (tmp_path, os.environ["PATH"]))
    [h100] = gpu.host_gpus()
    assert h100.mig is True and h100.capability == (9, 0)
    found = GpuState(True, (h100,))
    refused = gpufit.block("new", CU130, found, None)
    assert refused is not None and refused.kind == "GpuUnavailable"
    assert refused.sentence.startswith("GPU 0 (NVIDIA H100 80GB HBM3) is in MIG mode")
    assert "nvidia-smi -i 0 -mig 0" in refused.sentence
    # A driver too old to know the field: the GPUs are read without it, MIG unknown.
    script.write_text("#!/bin/sh\n"
                      'case "$*" in *mig.mode.current*) echo "Field not valid" >&2; exit 2;; '
                      "esac\n"
                      "echo 'Tesla V100-SXM2-16GB, 470.82.01, 16384 MiB, 7.0'\n")
    [v100] = gpu.host_gpus()
    assert v100.mig is None and v100.capability == (7, 0)
    assert gpufit.block("new", CU130, GpuState(True, (GpuInfo("NVIDIA H100", "580.95.05",
                                                                 "1 MiB", (9, 0), False),)),
                        None) is None


def test_a_host_without_any_nvidia_gpu_refuses_gpu_cells_by_design_and_others_are_faults():
    none_here = GpuState(False, (), gpu.NO_RUNTIME)
    assert none_here.absent
    assert gpufit.block("new", CU130, none_here, None).kind == FailureKind.NO_GPU
    # A GPU on the bus without its driver, a driver without nvidia-smi, a remote engine:
    # faults to fix (or GPUs this machine cannot see), not a host without GPUs.
    for state in (GpuState(False, (), gpu.NO_RUNTIME, on_pci=True),
                  GpuState(False, (), gpu.NO_RUNTIME, driver_only="580.95.05"),
                  GpuState(False, (), gpu.NO_RUNTIME, local=False)):
        assert not state.absent
        assert gpufit.block("new", CU130, state, None).kind == "GpuUnavailable"


def test_an_nvidia_gpu_is_read_off_the_pci_bus_by_vendor_and_class(tmp_path):
    def device(name, vendor, klass):
        (tmp_path / name).mkdir()
        (tmp_path / name / "vendor").write_text(vendor + "\n")
        (tmp_path / name / "class").write_text(klass + "\n")

    device("0000:00:01.0", "0x8086", "0x030000")  # another vendor's display
    device("0000:00:02.0", "0x10de", "0x040300")  # NVIDIA's HDMI audio function
    assert not gpu.nvidia_on_pci(tmp_path)
    device("0000:3b:00.0", "0x10de", "0x030200")  # a data-centre GPU: a 3D controller
    assert gpu.nvidia_on_pci(tmp_path)
    assert not gpu.nvidia_on_pci(tmp_path / "missing")
