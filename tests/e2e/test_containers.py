"""Two real stacks, built and run on a real engine: Debian's torch 1.13 and torch 2.13 CPU."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import docker
import pytest
from e2e_support import E2E_MATRIX, ROOT, envbench, gpu_refusal

from bench.fingerprint import bench_sha256
from envbench.cells import containerrun, expansion, takein
from envbench.cells.expansion import Cell
from envbench.engine import gpu, spec
from envbench.engine.host import Host
from envbench.matrix import models
from envbench.matrix.models import Settings, Target
from envbench.results.identity import SYNTHETIC as SYNTHETIC_DATA

pytestmark = pytest.mark.e2e


def _results(reports: Path) -> dict[str, dict]:
    """Result records by the readable part of their file name (without the identity hash)."""
    return {p.stem.rsplit("__", 1)[0]: json.loads(p.read_text())
            for p in (reports / "results").glob("*.json")}


def test_both_stacks_run_the_identical_benchmark(first_run, client):
    reports, _ = first_run
    records = _results(reports)
    assert set(records) == {"debian-torch1.13__cpu__base__r0", "torch2.13-cpu__cpu__base__r0"}
    old, new = records["debian-torch1.13__cpu__base__r0"], records["torch2.13-cpu__cpu__base__r0"]
    assert old["status"] == new["status"] == "ok", (old["error"], new["error"])
    assert old["env"]["torch"].startswith("1.13") and new["env"]["torch"].startswith("2.13.0")
    assert old["env"]["bench_sha256"] == new["env"]["bench_sha256"] == bench_sha256()
    for record in (old, new):
        image = client.images.get(record["env"]["image"]["id"])
        assert record["env"]["image"]["tag"] in image.tags
        assert image.labels["envbench.environment"] == record["cell"]["environment"]
        assert record["env"]["image"]["base_digest"]
        assert record["cell"]["target_label"] == "CI CPU"
        assert record["cell"]["price_per_hour"] == 0.1
        assert record["epochs"][0]["samples"] == 600
        # Fair threads: the target's 2 CPUs are the quota, the cores and torch's threads,
        # on the old stack (whose torch defaults to one thread here) as on the new.
        assert record["env"]["threads"] == record["config"]["threads"] == 2
        assert record["env"]["cpu_affinity"] == [0, 1]
        resources = record["cell"]["resources"]
        assert (resources["cpus"], resources["cpuset"], resources["threads_from"]) == \
            (2, "0-1", "cpus")
        # The container's own peak: cgroup v1 keeps memory.max_usage_in_bytes, v2 keeps
        # memory.peak from Linux 5.19; torch alone takes well over 100 MiB.
        info = client.info()
        kernel = tuple(int(x) for x in info["KernelVersion"].split("-")[0].split(".")[:2])
        if str(info.get("CgroupVersion")) == "1" or kernel >= (5, 19):
            assert record["memory"]["cgroup_peak_bytes"] > 100 * 2**20, record["memory"]
        else:
            assert record["memory"]["cgroup_peak_bytes"] is None
        assert record["memory"]["process_rss_peak_bytes"] > 100 * 2**20


def test_results_belong_to_the_invoking_user(first_run):
    reports, _ = first_run
    files = list((reports / "results").glob("*.json")) + list((reports / "logs").glob("*.log"))
    assert files
    for path in files:
        assert path.stat().st_uid == os.getuid(), path


def test_results_belong_to_the_sudo_caller(e2e_env, cifar, tmp_path):
    """Run as root on behalf of uid 4242 (as `sudo nox ...` does): nothing may be root's."""
    if os.getuid() != 0:
        pytest.skip("only root can act for another user")
    reports = tmp_path / "reports"
    env = dict(e2e_env, SUDO_UID="4242", SUDO_GID="4242")
    proc = envbench(env, "bench", "--matrix", E2E_MATRIX, "--data", cifar, "--reports", reports,
                    "--env", "torch2.13-cpu")
    assert proc.returncode == 0, proc.stdout[-3000:]
    owned = [reports / "results", *(reports / "results").iterdir(), *(reports / "logs").iterdir()]
    assert {p.stat().st_uid for p in owned} == {4242}, [(p, p.stat().st_uid) for p in owned]


def test_a_rerun_runs_only_missing_cells_and_a_killed_run_resumes(first_run, e2e_env, cifar,
                                                                   client):
    reports, _ = first_run
    results = reports / "results"
    next(results.glob("torch2.13-cpu__cpu__base__r0__*.json")).unlink()
    proc = envbench(e2e_env, "bench", "--matrix", E2E_MATRIX, "--data", cifar,
                    "--reports", reports, "--order", "grouped")
    assert proc.returncode == 0, proc.stdout[-3000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("[")]
    assert "cached" in lines[0] and "debian-torch1.13" in lines[0]
    assert "cached" not in lines[1] and "s/epoch" in lines[1]

    # Ctrl-C mid-matrix, then SIGTERM (a supervisor, `timeout`, a cancelled CI job): the
    # finished cell stays, the cell's container goes, the next run does only the rest.
    for stop in (signal.SIGINT, signal.SIGTERM):
        _interrupt_the_second_cell_then_resume(stop, reports, e2e_env, cifar, client)


def _interrupt_the_second_cell_then_resume(stop, reports, e2e_env, cifar, client):
    results = reports / "results"
    for path in results.glob("*.json"):
        path.unlink()
    # As a shell starts a job in the foreground: the stop signals at their defaults.
    proc = subprocess.Popen([sys.executable, "-m", "envbench", "bench", "--matrix", str(E2E_MATRIX),
                             "--data", str(cifar), "--reports", str(reports), "--order",
                             "grouped"], cwd=ROOT,
                            env=e2e_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, preexec_fn=lambda: [signal.signal(s, signal.SIG_DFL)
                                                           for s in (signal.SIGINT,
                                                                     signal.SIGTERM)])
    deadline = time.monotonic() + 300

    def second_cell_runs() -> bool:
        return any(c.labels.get("envbench.cell", "").startswith("torch2.13-cpu__")
                   for c in client.containers.list(filters={"label": "envbench.cell"}))

    # Interrupt while the second cell's container runs: the first is done, the second is not.
    while not second_cell_runs():
        assert time.monotonic() < deadline and proc.poll() is None, "the run ended early"
        time.sleep(0.05)
    first = next(results.glob("debian-torch1.13__cpu__base__r0__*.json"))
    proc.send_signal(stop)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, (stop, out)
    assert "run the same command again" in out and "Traceback" not in out
    assert [p.name for p in results.glob("*.json")] == [first.name]
    assert not client.containers.list(all=True, filters={"label": "envbench.cell"}), \
        "the interrupted cell's container was left behind (%s)" % stop
    again = envbench(e2e_env, "bench", "--matrix", E2E_MATRIX, "--data", cifar,
                     "--reports", reports, "--order", "grouped")
    assert again.returncode == 0, again.stdout[-3000:]
    lines = [line for line in again.stdout.splitlines() if line.startswith("[")]
    assert "cached" in lines[0] and "cached" not in lines[1]


def test_a_failing_cell_is_recorded_and_the_others_go_on(e2e_env, cifar, tmp_path):
    matrix = tmp_path / "matrix.yaml"
    text = E2E_MATRIX.read_text().replace("  limit_test: 200",
                                          "  limit_test: 200\n  sweep: {compile: [default, off]}")
    matrix.write_text(text.replace("${ENVBENCH_WHEELHOUSE}", e2e_env["ENVBENCH_WHEELHOUSE"]))
    proc = envbench(e2e_env, "bench", "--matrix", matrix, "--data", cifar, "--reports",
                    tmp_path / "reports", "--env", "debian-torch1.13")
    assert proc.returncode == 1
    assert "Traceback" not in proc.stdout
    records = _results(tmp_path / "reports")
    failed = records["debian-torch1.13__cpu__compile-default__r0"]
    assert failed["status"] == "failed"
    assert failed["error"]["type"] == "UnsupportedOption"
    assert "compile needs torch>=2.0" in failed["error"]["message"]
    assert any("compile needs torch>=2.0" in line for line in failed["log_tail"])
    assert records["debian-torch1.13__cpu__compile-off__r0"]["status"] == "ok"


def _cell(target: str = "cpu") -> Cell:
    settings = Settings(epochs=1, batch_size=32, pipeline="resident", limit=64,
                        limit_test=32).model_dump()
    return Cell("debian-torch1.13", target, 0, {}, settings)


def _run_cell(client, target: Target, image, folder: Path) -> dict:
    """One cell through the runner, as the kit's bench command would run it."""
    p = expansion.prepare(_cell("gpu" if target.device == "cuda" else "cpu"), target, 2,
                      SYNTHETIC_DATA, image.id)
    return containerrun.run_cell(client, p.command(), target, p.resources, image,
                                 containerrun.Mounts(folder, folder, None, folder / ".cells"),
                                 "%s.json" % p.file_stem, _take(p, target, folder))


def _take(p, target: Target, results: Path):
    """The kit's own take-in of an ended cell, without saving it."""
    placed = takein.Placed(p, target, {}, None)
    return lambda ending: takein.record_of(ending, placed, results)


def _image(client, first_run, env_name: str):
    record = _results(first_run[0])["%s__cpu__base__r0" % env_name]
    return client.images.get(record["env"]["image"]["id"])


@pytest.fixture
def no_nvidia_runtime(client):
    if "nvidia" in (client.info().get("Runtimes") or {}):
        pytest.skip("this engine has the NVIDIA runtime: the missing-runtime path cannot happen")


def test_a_gpu_cell_on_this_engine_fails_with_the_clear_message(client, first_run, tmp_path,
                                                                no_nvidia_runtime):
    image = _image(client, first_run, "debian-torch1.13")
    assert gpu.probe(client, image, -1) == gpu.NO_RUNTIME
    # --gpus failed the way a CDI-only toolkit makes it fail, so CDI devices are tried as
    # well; an engine without CDI (before Docker 25) adds nothing to the reason.
    assert gpu.probe(client, image, -1, gpu.CDI) == gpu.NO_RUNTIME
    assert gpu.attach(client, image, -1) == (gpu.GPUS, gpu.NO_RUNTIME)
    assert not client.containers.list(all=True, filters={"label": "envbench.cell=gpu-probe"})
    target = Target(device="cuda", gpus="all", label="GPU", price_per_hour=1.0)
    record = _run_cell(client, target, image, tmp_path)
    assert record["status"] == "failed"
    assert record["error"]["message"] == gpu.NO_RUNTIME


READ_BACK = ("ls /sys/class/net; echo; id -u; nproc; grep -E '^(CapEff|NoNewPrivs)' "
             "/proc/self/status; echo; grep -E ' / | /tmp | /dev/shm ' /proc/self/mounts; echo; "
             "cat /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/pids.max 2>/dev/null; "
             "cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/memory.max "
             "2>/dev/null; touch /root-write 2>&1 | head -1; touch /tmp/ok && echo tmp-ok")


def _read_back(client, image, options) -> dict[str, str]:
    options = dict(options, detach=False, remove=True, entrypoint=["sh", "-c"],
                   command=[READ_BACK])
    output = client.containers.run(image.id, **options).decode()
    return {"text": output, "lines": output.split("\n")}


def test_a_running_cell_is_locked_down_and_limited(client, first_run, tmp_path):
    """Read back, from inside a cell's container, what the kit asked the engine for."""
    image = _image(client, first_run, "torch2.13-cpu")
    target = Target(device="cpu", cpus=1, label="CPU", price_per_hour=0)
    mounts = containerrun.Mounts(tmp_path, tmp_path, None, tmp_path / ".cells")
    host = Host.of_engine(client)
    p = expansion.prepare(_cell(), target, host, SYNTHETIC_DATA, image.id)
    options = containerrun.container_options(p.command(), p.resources, image, mounts, p.file_stem,
                                             tmp_path)
    seen = _read_back(client, image, options)
    out, lines = seen["text"], seen["lines"]
    assert lines[0] == "lo" and "eth0" not in out, out  # no network
    assert lines[2] == str(os.getuid())
    assert lines[3] == "1"  # cpus: 1 is one core (cpuset), not a quota over every core
    assert "CapEff:\t0000000000000000" in out and "NoNewPrivs:\t1" in out
    root = next(line for line in lines if line.split()[1:2] == ["/"])
    assert " ro," in root or root.split()[3].startswith("ro"), root  # read-only root
    tmp = next(line for line in lines if line.split()[1:2] == ["/tmp"])
    assert tmp.startswith("tmpfs /tmp") and "noexec" not in tmp and "nosuid" in tmp, tmp
    shm = next(line for line in lines if line.split()[1:2] == ["/dev/shm"])
    assert "size=2097152k" in shm, shm  # shared memory for DataLoader workers
    assert str(spec.PIDS_LIMIT) in lines, out
    # No memory in the target: the host's memory less a reserve, as the result records.
    limit = models.size_bytes(p.resources.memory)
    assert p.resources.memory_from == "host" and str(limit) in lines, out
    assert "Read-only file system" in out and "tmp-ok" in out
    # The engine keeps at most 16 MB of its output: a cell printing without end fills no
    # disk, and the kit reads its log whole only up to that.
    created = client.containers.create(image.id, **dict(options, detach=True))
    try:
        assert created.attrs["HostConfig"]["LogConfig"] == {
            "Type": "json-file", "Config": {"max-size": "16m", "max-file": "1"}}
    finally:
        created.remove(force=True)


HOSTILE_CELL = ("echo \"start:[$(ls -A /results)]\"; rm -rf /results/* /results/.[!.]*; "
                "echo forged > /results/other-cell.json; ln -s /etc/passwd /results/mine.json; "
                "echo \"end:[$(ls -A /results | tr '\\n' ' ')]\"")


def test_a_cell_sees_only_an_empty_folder_of_its_own(client, first_run, tmp_path):
    """A hostile stack's cell lists /results, deletes what it finds, forges another cell's
    result and leaves a link to /etc/passwd where its own should be. The host's results stay
    as they were, and the cell is recorded as having written no valid result."""
    base = _image(client, first_run, "debian-torch1.13")
    context = tmp_path / "context"
    context.mkdir()
    # Its bench is a shell: the cell's entrypoint is the kit's (`python3 -m bench` in the
    # spec's workdir), what runs there is the stack's.
    (context / "Dockerfile").write_text(
        "FROM %s\nUSER root\nRUN printf '%%s\\n' 'import os, sys' "
        "'os.execvp(\"sh\", [\"sh\", \"-c\", sys.argv[1]])' > %s/bench/__main__.py\n"
        "USER %s\n" % (base.id, spec.WORKDIR, spec.USER))
    image, _ = client.images.build(path=str(context), tag="envbench-test/hostile-cell:1",
                                   rm=True, forcerm=True)
    results, logs = tmp_path / "results", tmp_path / "logs"
    results.mkdir()
    logs.mkdir()
    victim = results / "other-cell.json"
    victim.write_text('{"kept": true}\n')
    target = Target(device="cpu")
    p = expansion.prepare(_cell(), target, 2, SYNTHETIC_DATA, image.id)
    mounts = containerrun.Mounts(results, logs, None, tmp_path / ".cells")
    try:
        record = containerrun.run_cell(client, [HOSTILE_CELL], target, p.resources, image,
                                       mounts, "mine.json", _take(p, target, results))
    finally:
        client.images.remove(image.id, force=True)
    log = (logs / "mine.log").read_text()
    assert "start:[]" in log, log  # it saw an empty folder: no other cell's result
    assert "end:[mine.json other-cell.json ]" in log, log  # its writes went somewhere...
    assert sorted(os.listdir(results)) == ["other-cell.json"]  # ...that is not the results
    assert victim.read_text() == '{"kept": true}\n'
    assert record["status"] == "failed" and record["error"]["type"] == "NoResult", record
    assert os.listdir(tmp_path / ".cells") == []  # the cell's folder went with it


def test_the_gpu_probe_is_locked_down_like_a_cell(client, first_run):
    image = _image(client, first_run, "debian-torch1.13")
    options = gpu.probe_options(image, 0)  # the probe's settings, without the GPUs
    options.pop("entrypoint")
    seen = _read_back(client, image, options)
    out = seen["text"]
    assert seen["lines"][0] == "lo" and "CapEff:\t0000000000000000" in out
    assert "NoNewPrivs:\t1" in out and "Read-only file system" in out
    assert str(spec.PIDS_LIMIT) in seen["lines"] and seen["lines"][2] == str(os.getuid())


def test_a_vanished_image_is_one_sentence_for_its_cell(client, first_run, tmp_path):
    """An image built, then removed (a `docker image prune` between build and run)."""
    base = _image(client, first_run, "debian-torch1.13")
    (tmp_path / "Dockerfile").write_text("FROM %s\nLABEL envbench.test=vanishing\n" % base.id)
    image, _ = client.images.build(path=str(tmp_path), tag="envbench-test/vanishing:1",
                                   rm=True, forcerm=True)
    client.images.remove("envbench-test/vanishing:1")
    with pytest.raises(docker.errors.ImageNotFound):
        client.images.get(image.id)
    record = _run_cell(client, Target(device="cpu"), image, tmp_path)
    assert record["status"] == "failed" and record["error"]["type"] == "ContainerError"
    assert "No such image" in record["error"]["message"], record["error"]
    assert "\n" not in record["error"]["message"]


def test_a_build_error_shows_its_last_log_lines(e2e_env, tmp_path):
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text("environments:\n  broken:\n    source: debian\n"
                      "    base: \"${ENVBENCH_BASE}\"\n"
                      "    apt: [envbench-no-such-package]\n"
                      "targets:\n  cpu: {device: cpu, label: c, price_per_hour: 0}\n")
    proc = envbench(e2e_env, "build", "--matrix", matrix, "--reports", tmp_path, timeout=900)
    assert proc.returncode == 1
    assert "building broken failed; last lines of" in proc.stdout
    assert "Unable to locate package envbench-no-such-package" in proc.stdout
    assert "Traceback" not in proc.stdout


def test_an_image_whose_torch_is_not_the_matrixs_stops_its_own_build(e2e_env, tmp_path):
    """The image's last line of defence, for stacks the host cannot check from a wheel
    (Debian's packages, an environment's own Dockerfile): Debian's python3-torch is 1.13
    (it calls itself 1.13.0a0), so a matrix saying 1.12 stops the build with both versions and
    no traceback."""
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text("environments:\n  claims-1-12:\n    source: debian\n"
                      "    torch: \"1.12\"\n    base: \"${ENVBENCH_BASE}\"\n"
                      "targets:\n  cpu: {device: cpu, label: c, price_per_hour: 0}\n")
    proc = envbench(e2e_env, "build", "--matrix", matrix, "--reports", tmp_path, timeout=900)
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "building claims-1-12 failed" in proc.stdout
    assert re.search(r"\| torch 1\.13\S*, matrix says 1\.12\n", proc.stdout), proc.stdout[-3000:]
    assert "Traceback" not in proc.stdout


def test_a_failed_build_leaves_no_partial_image(client, e2e_env, base_tag, tmp_path):
    """The legacy builder keeps a failed build's last finished step as an untagged image that
    nothing names (6 GB for a CUDA stack failing after its venv is copied): it is removed."""
    (tmp_path / "partial.j2").write_text(
        "FROM {{ base }}\n"
        "RUN dd if=/dev/zero of=/partial bs=1M count=64 status=none\n"
        "RUN echo 'this step fails' && exit 3\n")
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text("environments:\n  partial: {source: debian, base: \"%s\", "
                      "dockerfile: partial.j2}\n"
                      "targets:\n  cpu: {device: cpu}\n" % base_tag)
    dangling = {image.id for image in client.images.list(filters={"dangling": True})}
    proc = envbench(e2e_env, "build", "--matrix", matrix, "--reports", tmp_path, timeout=600)
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "building partial failed" in proc.stdout and "this step fails" in proc.stdout
    assert "removed the failed build's partial image" in proc.stdout, proc.stdout[-3000:]
    assert {image.id for image in client.images.list(filters={"dangling": True})} <= dangling
    assert client.images.get(base_tag).tags  # the base it was built on stays


def test_a_missing_base_image_is_named_and_never_pulled_offline(e2e_env, tmp_path):
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text("environments:\n  far:\n    torch: \"2.13.0\"\n"
                      "    base: envbench-test/not-here:1\n"
                      "targets:\n  cpu: {device: cpu, label: c, price_per_hour: 0}\n")
    proc = envbench(e2e_env, "build", "--matrix", matrix, "--reports", tmp_path, "--offline")
    assert proc.returncode == 1
    assert "base image envbench-test/not-here:1 is not in the local engine" in proc.stdout
    assert "Traceback" not in proc.stdout


def test_a_gpu_target_through_the_cli_fails_every_gpu_cell_with_one_sentence(
        e2e_env, cifar, tmp_path, no_nvidia_runtime):
    """A CUDA stack on a GPU target, on an engine without the NVIDIA runtime: the run says so
    once, records each GPU cell as failed with the sentence, and builds nothing for them."""
    (tmp_path / "nocheck.j2").write_text('{% extends "_stack.Dockerfile.j2" %}\n')
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(
        "environments:\n"
        "  claims-cuda:\n"
        "    python: \"3.11\"\n    torch: \"2.13.0\"\n    cuda: \"12.4\"\n"
        "    base: \"${ENVBENCH_PYTHON_BASE}\"\n"
        "    wheelhouse: \"${ENVBENCH_WHEELHOUSE}\"\n    dockerfile: nocheck.j2\n"
        "targets:\n"
        "  gpu: {device: cuda, gpus: all, label: \"A GPU\", price_per_hour: 1.0}\n"
        "benchmark: {epochs: 1, batch_size: 32, pipeline: resident, repeats: 2, limit: 64}\n")
    proc = envbench(e2e_env, "bench", "--matrix", matrix, "--synthetic", "--kind", "cuda",
                    "--reports", tmp_path / "reports")
    # Every asked cell refused or failed: nothing was measured, exit 1 either way.
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "Traceback" not in proc.stdout
    kind, sentence, line, _ = gpu_refusal()
    # Found before any build: nothing was built for cells that cannot run here.
    assert line in proc.stdout
    assert "building" not in proc.stdout
    cell_lines = [line for line in proc.stdout.splitlines() if line.startswith("[")]
    assert len(cell_lines) == 2 and all(sentence in line for line in cell_lines)
    records = _results(tmp_path / "reports")
    assert len(records) == 2
    for record in records.values():
        assert record["status"] == "failed"
        assert record["error"] == {"type": kind, "message": sentence}
        assert record["cell"]["target_label"] == "A GPU"


def test_a_cell_killed_at_the_memory_limit_is_recorded_as_out_of_memory(client, first_run,
                                                                         tmp_path):
    image = _image(client, first_run, "debian-torch1.13")
    target = Target(device="cpu", memory="64m", label="tiny", price_per_hour=0)
    record = _run_cell(client, target, image, tmp_path)
    assert record["status"] == "failed"
    assert record["error"]["type"] == "OutOfMemory", record["error"]
    assert "memory limit (64m)" in record["error"]["message"]


def test_a_stacks_kernels_are_read_from_the_image_that_will_run_not_its_namesake(
        client, first_run, tmp_path):
    """An image of the same environment name, built from other pins, says sm_50 only; the
    plan's tag is not in the engine, so the published list of the stack decides. Once the
    plan's tag is the image, its label does."""
    from envbench.cells import gpufit
    from envbench.images import archs
    from envbench.matrix.models import Environment

    base = _image(client, first_run, "debian-torch1.13")
    (tmp_path / "Dockerfile").write_text(
        "FROM %s\nLABEL envbench.environment=torch2.14-cu130 %s=sm_50\n" % (base.id,
                                                                          archs.LABEL))
    client.images.build(path=str(tmp_path), tag="envbench-test/namesake:old", rm=True,
                        forcerm=True)
    stack = Environment(python="3.12", torch="2.14.1", torchvision="0.29.2", cuda="13.0")
    plan_tag = "envbench-test/namesake:the-plans"
    try:
        published = archs.known("2.14.1", "13.0")
        assert published is not None and "sm_50" not in published.flags
        assert gpufit.stack_archs(client, stack, plan_tag) == published
        assert gpufit.stack_archs(client, stack, None) == published
        client.images.get("envbench-test/namesake:old").tag("envbench-test/namesake",
                                                            "the-plans")
        assert gpufit.stack_archs(client, stack, plan_tag).flags == ("sm_50",)
    finally:
        for tag in ("envbench-test/namesake:old", plan_tag):
            try:
                client.images.remove(tag)
            except docker.errors.ImageNotFound:
                pass
