"""The doctor on a real engine: every check is a line, GPU checks say what to fix; the
driver comparison runs on nvidia-smi's real output format, from a probe image whose
nvidia-smi is a script printing a given driver (the real probe needs a GPU machine)."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import docker
import pytest
from conftest import ROOT

from envbench.commands import doctor
from envbench.engine import gpu
from envbench.matrix import models
from envbench.options import Options

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
    a line is ✘ (scripts gate on it; nox runs the next session anyway)."""
    runtime = "nvidia" in (client.info().get("Runtimes") or {})
    proc = subprocess.run([sys.executable, "-m", "envbench", "doctor"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stdout.splitlines()
    checks = [line for line in lines if line[:1] in "✔✘"]
    failed = [line for line in checks if line.startswith("✘")]
    assert proc.returncode == (1 if failed else 0), proc.stdout
    m = models.load(ROOT / "matrix.yaml")
    cuda_stacks = [name for name, env in m.environments.items() if env.cuda]
    assert len(checks) == 7 + len(cuda_stacks) + len(
        {e.index_url for e in m.environments.values() if e.index_url})
    assert checks[0].startswith("✔ Docker engine ")
    if runtime:
        assert checks[1].startswith("✔ NVIDIA runtime") or "probe failed" in checks[1]
    else:
        assert checks[1] == ("✘ NVIDIA runtime: this Docker engine has none (GPU targets "
                             "cannot run)")
        assert lines[lines.index(checks[1]) + 1].startswith(
            "    fix: install nvidia-container-toolkit")
        for name in cuda_stacks:  # no driver read: each CUDA stack says what it needs
            assert any(line.startswith("✘ %s: CUDA" % name) for line in checks)
    # Every ✘ is followed by its fix.
    for line in failed:
        assert lines[lines.index(line) + 1].startswith("    fix: "), line
    assert lines[-1] == "%d check(s), %d to fix" % (len(checks), len(failed))
    out = io.StringIO()
    code = doctor.run(Options(matrix_path=ROOT / "matrix.yaml"), out=out)
    assert code == (1 if "✘" in out.getvalue() else 0)


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
    assert proc.returncode == 1 and any(line.startswith("✘ seed-torch1.12") for line in lines)
    assert "✔ GPUs: NVIDIA H200 (143771 MiB, sm_90); driver 580.95.05" in lines
    seed = next(line for line in lines if "seed-torch1.12-cu116" in line)
    assert seed.startswith("✘ seed-torch1.12-cu116 (torch 1.12.1+cu116) has kernels for "
                           "sm_37–sm_86, no PTX; this NVIDIA H200 is sm_90"), seed
    assert ("✔ torch2.14-cu130: kernels for sm_90 (this NVIDIA H200); CUDA 13.0 needs driver "
            ">= 580.65.06; this host has 580.95.05") in lines


def test_bench_records_a_stack_that_cannot_run_on_this_gpu_without_building_it(
        fake_host_smi, tmp_path):
    reports = tmp_path / "reports"
    proc = subprocess.run([sys.executable, "-m", "envbench", "bench", "--kind", "cuda",
                           "--synthetic", "--reports", str(reports)], cwd=ROOT,
                          env=dict(fake_host_smi, ENVBENCH_LOCKS=str(tmp_path / "locks")),
                          capture_output=True, text=True, timeout=600)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    assert proc.returncode == 1, proc.stdout[-3000:]  # every GPU cell failed, none crashed
    assert "building" not in proc.stdout  # nothing was locked, fetched or built
    records = [json.loads(p.read_text()) for p in (reports / "results").glob("*.json")]
    seed = [r for r in records if r["cell"]["environment"] == "seed-torch1.12-cu116"]
    assert seed and all(r["error"]["type"] == "NoKernelImage" and "is sm_90" in
                        r["error"]["message"] for r in seed)
    # The other stacks fit this GPU; this engine has no NVIDIA runtime, which they say.
    others = [r for r in records if r not in seed]
    assert others and all(r["error"]["type"] == "GpuUnavailable" for r in others)


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
