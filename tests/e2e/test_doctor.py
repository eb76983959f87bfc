"""The doctor on a real engine: every check is a line, GPU checks say what to fix; the
driver comparison runs on nvidia-smi's real output format, from a probe image whose
nvidia-smi is a script printing a given driver (the real probe needs a GPU machine)."""
from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys

import docker
import pytest
from e2e_support import ROOT, envbench, second_engine

from envbench.command_options import Options
from envbench.commands import doctor
from envbench.engine import gpu
from envbench.matrix import models

pytestmark = pytest.mark.e2e


@pytest.fixture
def fake_smi_image(client, base_tag, tmp_path):
    # It answers only the kit's exact query, as a real one would print it; any other
    # question exits 6 (what nvidia-smi does with an unknown field), so a wrong query fails.
    (tmp_path / "nvidia-smi").write_text(
        "#!/bin/sh\n"
        'if [ "$*" != "%s" ]; then echo "unexpected: $*" >&2; exit 6; fi\n'
        "echo 'NVIDIA H200, 470.57.02, 143771 MiB'\n"
        "echo 'NVIDIA H200, 470.57.02, 143771 MiB'\n" % " ".join(gpu.QUERY[1:]))
    (tmp_path / "Dockerfile").write_text(
        "FROM %s\nCOPY nvidia-smi /usr/bin/nvidia-smi\nRUN chmod 755 /usr/bin/nvidia-smi\n"
        % base_tag)
    image, _ = client.images.build(path=str(tmp_path), tag="envbench-test/fake-smi:1",
                                   rm=True, forcerm=True)
    yield image
    client.images.remove(image.id, force=True)


def test_the_driver_comparison_reads_what_nvidia_smi_prints(client, fake_smi_image):
    gpus, problem = gpu.query(client, fake_smi_image, 0)
    assert problem is None
    assert gpus == [gpu.GpuInfo("NVIDIA H200", "470.57.02", "143771 MiB")] * 2
    # The stand-in refuses any other question, so the lines above came from the kit's query.
    with pytest.raises(docker.errors.ContainerError) as refused:
        client.containers.run(fake_smi_image.id, remove=True, network_mode="none",
                              entrypoint=["nvidia-smi", "--query-gpu=name", "--format=csv"])
    assert refused.value.exit_status == 6
    driver = gpus[0].driver
    too_old = gpu.driver_problem("torch2.5-cu124", "12.4", driver)
    assert too_old == ("torch2.5-cu124 is built for CUDA 12.4, which needs NVIDIA driver >= "
                       "525.60.13; this host has 470.57.02: upgrade the driver or use an "
                       "older CUDA stack")
    assert gpu.driver_problem("seed", "11.6", driver) is None  # 470 >= 450.80.02
    assert gpu.driver_problem("new", "13.0", "580.65.06") is None
    assert "needs NVIDIA driver >= 580.65.06" in gpu.driver_problem("new", "13.0", "575.1")


def test_doctor_prints_every_check_with_its_fix_and_exits_1_when_any_fails(client):
    """Whatever this engine has: the runtime line says it, and the exit code is 1 exactly when
    a line is ✘ (scripts gate on it; nox runs the next session anyway). A miss the asked
    cells do not need is ℹ, never ✘."""
    proc = subprocess.run([sys.executable, "-m", "envbench", "doctor"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stdout.splitlines()
    checks = [line for line in lines if line[:1] in "✔✘ℹ"]
    failed = [line for line in checks if line.startswith("✘")]
    told = [line for line in checks if line.startswith("ℹ")]
    assert proc.returncode == (1 if failed else 0), proc.stdout
    m = models.load(ROOT / "matrix.yaml")
    assert lines[0] == "this host against %d cell(s) of matrix.yaml" % (
        len(m.environments) * 2 * 3 + sum(1 for e in m.environments.values() if e.cuda) * 2 * 3)
    assert checks[0].startswith("✔ Docker engine ")
    if gpu.host_gpus() is None and gpu.proc_driver() is None and not gpu.nvidia_on_pci():
        # No GPU here: the GPU target's cells are refused by design, said once, not failed.
        assert checks[1] == ("ℹ GPUs: none on this host; the 18 cell(s) on gpu are refused "
                             "by design and the other 24 run"), checks
    # Every ✘ is followed by its fix; an ℹ has none.
    for line in failed:
        assert lines[lines.index(line) + 1].startswith("    fix: "), line
    for line in told:
        assert not lines[lines.index(line) + 1].startswith("    fix: "), line
    assert lines[-1] == "%d check(s), %d to fix%s" % (
        len(checks), len(failed), ", %d for information" % len(told) if told else "")
    out = io.StringIO()
    code = doctor.run(Options(matrix_path=ROOT / "matrix.yaml"), out=out)
    assert code == (1 if "✘" in out.getvalue() else 0)


def test_doctor_judges_only_what_it_is_asked(client, tmp_path):
    """CPU cells on synthetic data need no GPU and no CIFAR-10: those lines are ℹ. An unknown
    environment is bad input: exit 2, nothing checked."""
    proc = subprocess.run([sys.executable, "-m", "envbench", "doctor", "--kind", "cpu",
                           "--synthetic", "--env", "torch2.14-cu130"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    lines = proc.stdout.splitlines()
    assert lines[0] == ("this host against 6 cell(s) of matrix.yaml (--env torch2.14-cu130, "
                        "--kind cpu, --synthetic)"), proc.stdout
    assert "ℹ GPUs: not checked; the asked cells all run on CPU targets" in lines
    assert ("ℹ CIFAR-10: not needed (the asked cells run on synthetic data or make their "
            "own)") in lines
    assert not any("seed-torch1.12" in line or "download.pytorch.org" in line
                   for line in lines), proc.stdout  # stacks not asked for are not judged
    proc = subprocess.run([sys.executable, "-m", "envbench", "doctor", "--env", "nosuch"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout
    assert proc.stderr.startswith("error: unknown environment nosuch (the matrix has: ")


@pytest.fixture
def fake_host_smi(tmp_path) -> dict[str, str]:
    """This host's nvidia-smi, as an NVIDIA H200 host with driver 580.95.05 answers the kit's
    query; any other question is refused (a wrong query must not pass)."""
    script = tmp_path / "bin" / "nvidia-smi"
    script.parent.mkdir()
    script.write_text(
        "#!/bin/sh\n"
        'if [ "$*" != "%s" ]; then echo "unexpected: $*" >&2; exit 6; fi\n'
        "echo 'NVIDIA H200, 580.95.05, 143771 MiB, 9.0'\n" % " ".join(gpu.HOST_QUERY[1:]))
    script.chmod(0o755)
    return dict(os.environ, PATH="%s:%s" % (script.parent, os.environ["PATH"]))


def test_on_an_h200_the_doctor_rules_out_the_write_ups_stack_and_passes_cuda_13(fake_host_smi):
    proc = subprocess.run([sys.executable, "-m", "envbench", "doctor"], cwd=ROOT,
                          env=fake_host_smi, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stdout.splitlines()
    assert "✔ GPUs: NVIDIA H200 (143771 MiB, sm_90); driver 580.95.05" in lines
    seed = next(line for line in lines if "seed-torch1.12-cu116" in line)
    # Refused by design: information, not a failure (bench refuses its GPU cells, exit 0).
    assert seed.startswith("ℹ seed-torch1.12-cu116 (torch 1.12.1+cu116) has kernels for "
                           "sm_37–sm_86, no PTX; this NVIDIA H200 is sm_90"), seed
    assert seed.endswith("; its GPU cells are refused by design"), seed
    assert ("✔ torch2.14-cu130: kernels for sm_90 (this NVIDIA H200); CUDA 13.0 needs driver "
            ">= 580.65.06; this host has 580.95.05") in lines
    # This engine has no NVIDIA runtime: that one is a fault to fix.
    assert "✘ NVIDIA runtime: this Docker engine has none (GPU targets cannot run)" in lines
    assert proc.returncode == 1


@pytest.fixture
def gpu_engine(client, base_tag, tmp_path_factory, fake_host_smi):
    """A second engine that gives containers "GPUs" as one with NVIDIA's toolkit does: Docker
    registers its GPU driver when nvidia-container-runtime-hook is on dockerd's PATH at start
    and runs the hook before each container with --gpus; this hook lets it start (there is no
    GPU to hand over). With the stand-in H200 nvidia-smi: an H200 VM whose engine works."""
    home = tmp_path_factory.mktemp("gpu-engine")
    hooks = home / "bin"
    hooks.mkdir()
    hook = hooks / "nvidia-container-runtime-hook"
    hook.write_text("#!/bin/sh\ncat >/dev/null\nexit 0\n")  # the OCI state comes on stdin
    hook.chmod(0o755)
    data = home / "data"
    data.mkdir()
    with second_engine(client, base_tag, home, data,
                       path="%s:%s" % (hooks, os.environ["PATH"])) as socket:
        yield dict(fake_host_smi, DOCKER_HOST=socket)


def test_the_readme_gpu_vm_doctor_exits_0_on_an_h200_with_a_working_engine(gpu_engine):
    """`./noxw -s doctor bench report -- --env torch2.14-cu130` (the README's GPU-VM line),
    its doctor on a stand-in H200 VM: every check the asked cells need holds, so exit 0."""
    proc = subprocess.run([sys.executable, "-m", "envbench", "doctor", "--env",
                           "torch2.14-cu130", "--synthetic"], cwd=ROOT, env=gpu_engine,
                          capture_output=True, text=True, timeout=300)
    lines = proc.stdout.splitlines()
    print(proc.stdout)
    assert "✔ NVIDIA runtime: a container gets the GPUs (--gpus probe)" in lines, proc.stdout
    assert "✔ GPUs: NVIDIA H200 (143771 MiB, sm_90); driver 580.95.05" in lines
    assert not any("seed-torch1.12" in line for line in lines)  # not asked: not judged
    assert proc.returncode == 0 and not any(line.startswith("✘") for line in lines), \
        proc.stdout + proc.stderr


def test_bench_records_a_stack_that_cannot_run_on_this_gpu_without_building_it(
        fake_host_smi, tmp_path):
    reports = tmp_path / "reports"
    proc = subprocess.run([sys.executable, "-m", "envbench", "bench", "--kind", "cuda",
                           "--synthetic", "--reports", str(reports)], cwd=ROOT,
                          env=dict(fake_host_smi, ENVBENCH_LOCKS=str(tmp_path / "locks")),
                          capture_output=True, text=True, timeout=600)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    # The seed's cells are refused by design; the others failed (no runtime): exit 1.
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "building" not in proc.stdout  # nothing was locked, fetched or built
    records = [json.loads(p.read_text()) for p in (reports / "results").glob("*.json")]
    seed = [r for r in records if r["cell"]["environment"] == "seed-torch1.12-cu116"]
    assert seed and all(r["error"]["type"] == "NoKernelImage" and "is sm_90" in
                        r["error"]["message"] for r in seed)
    # The other stacks fit this GPU; this engine has no NVIDIA runtime, which they say.
    others = [r for r in records if r not in seed]
    assert others and all(r["error"]["type"] == "GpuUnavailable" for r in others)


REFUSED_AND_RUN = """\
environments:
  seed-torch1.12-cu116: {python: "3.8", torch: "1.12.1", torchvision: "0.13.1", cuda: "11.6",
                         targets: [gpu]}
  debian-torch1.13: {python: "3.11", torch: "1.13", source: debian, base: "${ENVBENCH_BASE}",
                     targets: [cpu]}
targets:
  gpu: {device: cuda, gpus: all}
  cpu: {device: cpu, cpus: 2}
benchmark: {epochs: 2, batch_size: 64, pipeline: resident, repeats: 1, limit: 256,
            limit_test: 128, data: synthetic}
"""


def test_a_run_whose_only_misses_are_refused_by_design_exits_0(fake_host_smi, e2e_env,
                                                                 tmp_path):
    """On an H200, the write-up's stack has no kernels: its GPU cell is refused (recorded,
    said) and the CPU cell runs. That is the run asked for, so exit 0; asking for the refused
    cell alone measures nothing, which a script must not read as a run: exit 1."""
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(REFUSED_AND_RUN)
    env = dict(e2e_env, PATH=fake_host_smi["PATH"])
    proc = envbench(env, "bench", "--matrix", matrix, "--reports", tmp_path / "reports",
                    timeout=1200)
    assert "Traceback" not in proc.stdout
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "GPU cells of seed-torch1.12-cu116 are refused here: seed-torch1.12-cu116" in \
        proc.stdout
    # (A repeat that ran contended is run again: "ran" may count it twice.)
    assert re.search(r"cells: [12] ran, 1 refused by design \(this host cannot run them, as "
                     r"said above\)\n", proc.stdout), proc.stdout[-2000:]
    records = {json.loads(p.read_text())["cell"]["environment"]: json.loads(p.read_text())
               for p in (tmp_path / "reports" / "results").glob("*.json")}
    assert records["debian-torch1.13"]["status"] == "ok"
    assert records["seed-torch1.12-cu116"]["error"]["type"] == "NoKernelImage"
    alone = envbench(env, "bench", "--matrix", matrix, "--reports", tmp_path / "alone",
                     "--env", "seed-torch1.12-cu116", timeout=600)
    assert alone.returncode == 1, alone.stdout[-2000:]
    assert "cells: 0 ran, 1 refused by design" in alone.stdout
    assert "nothing was measured" in alone.stdout


def test_the_gpu_probe_never_starts_an_image_the_kit_did_not_build(client, tmp_path):
    """An engine whose newest image is foreign (here an empty one, like hello-world or a
    distroless image: no `true` to run) must not be probed with it: the engine would read as
    refusing GPUs and every CUDA stack would be blocked."""
    import io as _io
    import tarfile

    buffer = _io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w"):
        pass  # an empty root file system
    foreign = client.api.import_image_from_data(buffer.getvalue(),
                                                repository="envbench-test-foreign", tag="probe")
    try:
        chosen = gpu.probe_image(client)
        if chosen is not None:
            assert chosen.labels.get("envbench.environment") or any(
                t.startswith("envbench/") for t in chosen.tags), chosen.tags
            assert "envbench-test-foreign:probe" not in chosen.tags
    finally:
        client.images.remove("envbench-test-foreign:probe", force=True)
    assert foreign is not None
