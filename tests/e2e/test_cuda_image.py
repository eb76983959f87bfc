"""A real CUDA image, built and run on this GPU-less machine: PyPI's Linux torch wheels are
CUDA builds, so the default matrix's CUDA 13 stack locks, fetches (~3 GB, kept in the host's
cache for the next run), builds with its wheels offline and trains on the CPU target, with
torch.compile. Its GPU cell is refused with one sentence before anything is built, its
compiled architectures become the image's label, and the doctor judges a GPU by that label,
not by the table of known stacks. The stack also carries torchvision and timm (locked with
it), and examples/timm-resnet trains in the same image beside lenet: the one stack here whose
torchvision imports."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from e2e_support import ROOT, envbench, gpu_refusal

from envbench.engine import gpu
from envbench.images import archs

pytestmark = pytest.mark.e2e

NAME = "cuda13-on-cpu"
MATRIX = """\
environments:
  %s:
    python: "3.11"
    torch: "2.14.1"
    torchvision: "0.29.2"
    cuda: "13.0"
    base: "${ENVBENCH_PYTHON_BASE}"
    packages: ["timm==1.0.31"]  # what examples/timm-resnet imports
targets:
  cpu: {device: cpu, label: "this CPU", price_per_hour: 0}
  gpu: {device: cuda, gpus: 1, label: "A GPU", price_per_hour: 1.0}
benchmark: {epochs: 2, batch_size: 64, pipeline: resident, repeats: 1, limit: 512,
            limit_test: 256, data: synthetic, compile: default}
""" % NAME


@pytest.fixture(scope="module")
def cuda_run(client, e2e_env, tmp_path_factory):
    if "nvidia" in (client.info().get("Runtimes") or {}):
        pytest.skip("this engine has the NVIDIA runtime: the GPU cell would run, not be refused")
    # Built afresh each time (the wheels stay cached): the build is what is under test.
    for image in client.images.list(filters={"label": "envbench.environment=%s" % NAME}):
        client.images.remove(image.id, force=True)
    folder = tmp_path_factory.mktemp("cuda")
    matrix = folder / "matrix.yaml"
    matrix.write_text(MATRIX)
    reports = folder / "reports"
    proc = envbench(e2e_env, "bench", "--matrix", matrix, "--reports", reports,
                    "--order", "grouped", timeout=3000)
    print(proc.stdout)
    records = {json.loads(p.read_text())["cell"]["target"]: json.loads(p.read_text())
               for p in (reports / "results").glob("*.json")}
    yield proc, records, matrix
    # 6 GB the later tests' images may need.
    for image in client.images.list(filters={"label": "envbench.environment=%s" % NAME}):
        client.images.remove(image.id, force=True)


def test_the_cuda_stack_trains_on_the_cpu_target_and_its_gpu_cell_is_refused_unbuilt(cuda_run):
    proc, records, _ = cuda_run
    assert "Traceback" not in proc.stdout
    # The GPU cell is refused (no GPU here: exit 0) or fails (a GPU without its runtime: 1);
    # the CPU cell ran either way.
    kind, sentence, refused, code = gpu_refusal()
    assert proc.returncode == code, proc.stdout[-4000:]
    out = proc.stdout
    # Said before the build began: the refusal costs no wheels and no image.
    assert refused in out and out.index(refused) < out.index("%s: building" % NAME)
    assert set(records) == {"cpu", "gpu"}
    gpu_cell = records["gpu"]
    assert gpu_cell["status"] == "failed"
    assert gpu_cell["error"] == {"type": kind, "message": sentence}
    cpu_cell = records["cpu"]
    assert cpu_cell["status"] == "ok", cpu_cell.get("error")
    env = cpu_cell["env"]
    # What ran is the CUDA build: torch 2.14.1 compiled for CUDA 13.0, on the CPU.
    assert env["torch"].split("+")[0] == "2.14.1"
    assert env["cuda"] == "13.0", env
    assert env["gpu_count"] == 0 and env["device_name"] == env["cpu_model"]
    assert env["packages"]["torch"].split("+")[0] == "2.14.1"
    # torch.compile ran in the CUDA image too (it has gcc, g++ and Python.h for inductor).
    assert cpu_cell["config"]["compile"] == "default"
    assert len(cpu_cell["epochs"]) == 2
    assert all(e["samples"] == 512 for e in cpu_cell["epochs"])


def test_the_image_carries_its_architectures_and_no_builder_stage_is_left(client, cuda_run):
    (image,) = client.images.list(filters={"label": "envbench.environment=%s" % NAME})
    label = image.labels[archs.LABEL]
    # Read from the wheel inside the image, and what the doctor assumes for the stack before
    # it is built: the two must agree (this test found the table's PTX entry wrong).
    assert set(archs.Archs.parse(label, "label").flags) == set(
        archs.KNOWN[("2.14", "13.0")].flags), label
    assert not client.images.list(filters={"label": "envbench.stage=builder"})


def test_a_stack_the_matrix_misnames_is_refused_from_its_wheel_before_any_build(
        client, e2e_env, cuda_run, tmp_path):
    """The same wheels claimed as CUDA 12.8: refused with both versions, read from the cached
    torch wheel before the build begins. The image's own check would say the same, but only
    after unpacking ~9 GB beside the 6 GB image above (CI's disk ran out doing that)."""
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(MATRIX.replace('cuda: "13.0"', 'cuda: "12.8"')
                      .replace(NAME, "claims-cuda-12-8"))
    before = {image.id for image in client.images.list(all=True)}
    proc = envbench(e2e_env, "build", "--matrix", matrix, "--reports", tmp_path, timeout=1800)
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "Traceback" not in proc.stdout
    assert "building claims-cuda-12-8 failed before it began: torch built for CUDA 13.0, " \
           "matrix says 12.8 (torch-2.14.1-" in proc.stdout, proc.stdout[-3000:]
    # The wheels came from the cache, and the engine was never asked to build.
    assert "fetching" not in proc.stdout.lower()
    assert "claims-cuda-12-8: building envbench/" not in proc.stdout
    assert {image.id for image in client.images.list(all=True)} == before


def test_the_doctor_judges_a_gpu_by_the_built_images_label(cuda_run, e2e_env, tmp_path):
    """A host whose nvidia-smi reports a V100 (sm_70, which CUDA 13 dropped): the doctor
    rules the stack out, naming the image it read the architectures from."""
    _, _, matrix = cuda_run
    script = tmp_path / "bin" / "nvidia-smi"
    script.parent.mkdir()
    script.write_text(
        "#!/bin/sh\n"
        'if [ "$*" != "%s" ]; then echo "unexpected: $*" >&2; exit 6; fi\n'
        "echo 'Tesla V100-SXM2-16GB, 580.95.05, 16384 MiB, 7.0'\n"
        % " ".join(gpu.HOST_QUERY[1:]))
    script.chmod(0o755)
    # The run's settings (its locks and base): the doctor reads the image that will run,
    # which is the one built from the same lock.
    env = dict(e2e_env, PATH="%s:%s" % (script.parent, os.environ["PATH"]))
    proc = subprocess.run([sys.executable, "-m", "envbench", "doctor", "--matrix", str(matrix)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in proc.stderr, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if NAME in x)
    # Refused by design (information); the CPU cell still runs.
    assert line.startswith("ℹ %s (torch 2.14.1+cu130) has kernels for sm_75–sm_120, no PTX; "
                           "this Tesla V100-SXM2-16GB is sm_70" % NAME), line
    assert "from the image envbench/%s:" % NAME in line, line
    assert line.endswith("; its GPU cells are refused by design"), line
    # This engine has no NVIDIA runtime for the "V100": that is a fault to fix.
    assert proc.returncode == 1


def test_a_timm_model_trains_as_the_users_own_beside_lenet_in_the_same_image(
        client, e2e_env, cuda_run, tmp_path):
    """examples/timm-resnet (timm.create_model, no weights downloaded) beside lenet on the
    CPU target, in the image the first run built: both ok, timm's packages in the record."""
    _, _, matrix = cuda_run
    (image,) = client.images.list(filters={"label": "envbench.environment=%s" % NAME})
    shutil.copytree(ROOT / "examples" / "timm-resnet", tmp_path / "timm-resnet")
    sweep = tmp_path / "matrix.yaml"
    sweep.write_text(matrix.read_text().split("targets:")[0] + """\
targets:
  cpu: {device: cpu, label: "this CPU", price_per_hour: 0}
benchmark: {epochs: 2, batch_size: 32, pipeline: resident, repeats: 1, limit: 256,
            limit_test: 128, data: synthetic, compile: default,
            sweep: {workload: [lenet, {file: timm-resnet, function: build}], compile: ["off"]}}
""")
    # compile: default, then off for every cell: the image is the first run's (an image whose
    # cells may compile has a compiler), and timm is not compiled on two cores.
    reports = tmp_path / "reports"
    proc = envbench(e2e_env, "bench", "--matrix", sweep, "--reports", reports, timeout=1800)
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "%s: building" % NAME not in proc.stdout  # the first run's image, as it was
    records = {json.loads(p.read_text())["config"]["workload"]: json.loads(p.read_text())
               for p in (reports / "results").glob("*.json")}
    assert set(records) == {"lenet", "timm-resnet"}
    for name, record in records.items():
        assert record["status"] == "ok", (name, record.get("error"))
        assert record["config"]["compile"] == "off", name
        assert record["env"]["image"]["id"] == image.id, name
    timm = records["timm-resnet"]
    assert timm["env"]["packages"]["timm"] == "1.0.31"
    assert timm["env"]["packages"]["torchvision"].split("+")[0] == "0.29.2"
    assert timm["model"]["source"] == "file" and timm["model"]["unit"] == "images"
    # Counted (forward and backward, through FlopCounterMode), not left out as unknown.
    assert timm["model"]["flops"]["train"] > 2 * timm["model"]["flops"]["forward"] > 0
    assert 0.0 <= timm["summary"]["final_test_acc"] <= 1.0
