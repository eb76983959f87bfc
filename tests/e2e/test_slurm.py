"""The Slurm path on a real one-node cluster (slurmctld, slurmd and munged from Debian's
packages, tests/slurm_cluster.py), its cells in Podman: two stacks as the steps of one job and
a report from them; a run again resumes; Ctrl-C cancels the job and leaves no job and no
container; a node set DOWN mid-run fails the unfinished cells with Slurm's state; a partition
that does not exist is refused before anything is submitted.
"""
from __future__ import annotations

import compileall
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import slurm_cluster
from e2e_support import ROOT, envbench

from envbench.slurm import trust

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def partition(client) -> str:
    why = slurm_cluster.missing()
    if why:
        if os.environ.get("CI"):
            pytest.fail("no Slurm cluster can start here: %s" % why)
        pytest.skip("no Slurm cluster can start here: %s" % why)
    slurm_cluster.ensure_podman_limits()
    return slurm_cluster.ensure_cluster()


def _podman_images() -> set[str]:
    listed = subprocess.run(["podman", "images", "--quiet", "--no-trunc"], capture_output=True,
                            text=True, timeout=120)
    return set(listed.stdout.split())


@pytest.fixture(scope="module")
def shared(partition, tmp_path_factory) -> Iterator[Path]:
    """One shared_dir for the runs that submit: each image is saved for the nodes once (1.7 GB
    an archive) and reused, as the kit does for a user. Its archives and the images the node
    loaded from them go at the end, for the tests after these (CI's disk is not large)."""
    before = _podman_images()
    folder = tmp_path_factory.mktemp("shared")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)
    added = sorted(_podman_images() - before)
    if added:
        subprocess.run(["podman", "rmi", "--force", *added], capture_output=True, timeout=300)


def _matrix(folder: Path, base: str, partition: str, repeats: int = 2, epochs: int = 2,
            shared: Path | None = None) -> Path:
    stack = '{python: "3.11", torch: "1.13", source: debian, base: "%s"}' % base
    path = folder / "matrix.yaml"
    path.write_text(
        "environments:\n  slurm-a: %s\n  slurm-b: %s\n" % (stack, stack)
        + "targets:\n  cluster:\n    device: cpu\n    cpus: 1\n    memory: 2g\n"
        + "    slurm: {partition: %s, time: \"00:30:00\", runtime: podman, shared_dir: %s}\n"
        % (partition, shared or folder / "shared")
        + "benchmark: {epochs: %d, batch_size: 64, pipeline: resident, repeats: %d, "
          "limit: 1000, limit_test: 200}\n" % (epochs, repeats))
    return path


def _records(reports: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((reports / "results").glob("*.json"))]


def _job_ids(output: str) -> list[str]:
    return re.findall(r"^submitted job (\d+):", output, flags=re.M)


def test_two_stacks_run_as_the_steps_of_one_job_in_podman_and_a_run_again_resumes(
        e2e_env, base_tag, cifar, partition, shared, tmp_path):
    matrix = _matrix(tmp_path, base_tag, partition, shared=shared)
    reports = tmp_path / "reports"
    proc = envbench(e2e_env, "slurm", "--matrix", matrix, "--reports", reports, "--data", cifar)
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "✘" not in proc.stdout and "✔ podman on" in proc.stdout
    assert "✔ shared_dir is seen from %s" % slurm_cluster.node_name() in proc.stdout
    (job,) = _job_ids(proc.stdout)
    assert "kit overhead per Slurm cell" in proc.stdout
    records = _records(reports)
    assert len(records) == 4 and all(r["status"] == "ok" for r in records), records
    assert {r["cell"]["environment"] for r in records} == {"slurm-a", "slurm-b"}
    for r in records:
        assert r["slurm"]["job_id"] == job and r["slurm"]["runtime"] == "podman"
        assert r["slurm"]["node"] == slurm_cluster.node_name()
        assert r["slurm"]["partition"] == partition and r["slurm"]["other_jobs"] == []
        assert r["cell"]["data"]["source"] == "cifar10"  # the data set, copied for the nodes
        assert r["cell"]["resources"]["threads"] == 1
        assert r["cell"]["resources"]["cpuset"] is None  # Slurm's cores, not the kit's
        assert r["host_s"] >= r["run_s"] > 0
    # One job, its steps in the kit's round order: every repeat 1 before any repeat 2.
    ordered = sorted(records, key=lambda r: (r["cell"]["order"]["round"],
                                             r["cell"]["order"]["position"]))
    assert [r["cell"]["repeat"] for r in ordered] == [1, 1, 2, 2] or \
        [r["cell"]["repeat"] for r in ordered] == [0, 0, 1, 1]
    assert job not in slurm_cluster.jobs()

    report = envbench(e2e_env, "report", "--matrix", matrix, "--reports", reports,
                      "--data", cifar)
    assert report.returncode == 0, report.stdout[-2000:]
    page = (reports / "index.html").read_text()
    assert "slurm-a" in page and "slurm-b" in page
    assert "Slurm job %s on %s (podman)" % (job, slurm_cluster.node_name()) in page

    again = envbench(e2e_env, "slurm", "--matrix", matrix, "--reports", reports, "--data",
                     cifar)
    assert again.returncode == 0, again.stdout[-2000:]
    assert "nothing to submit" in again.stdout and not _job_ids(again.stdout)


def test_a_ddp_cell_across_two_nodes_meets_at_the_first_and_the_page_scales_by_nodes(
        e2e_env, base_tag, partition, shared, tmp_path):
    """The two-node partition (two slurmd on this machine): LeNet under ddp on 1 and on 2
    nodes of one allocation, one Podman container per node on the node's network."""
    matrix = _matrix(tmp_path, base_tag, slurm_cluster.TWO_NODES, repeats=1, epochs=1,
                     shared=shared)
    text = matrix.read_text().replace("slurm-b: ", "# slurm-b: ")
    text = text.replace("shared_dir:", "nodes: 2, shared_dir:")
    text = text.replace("repeats: 1,", "repeats: 1, parallel: ddp, nproc: 1, "
                        "sweep: {nodes: [1, 2]},")
    matrix.write_text(text)
    reports = tmp_path / "reports"
    proc = envbench(e2e_env, "slurm", "--matrix", matrix, "--reports", reports, "--synthetic")
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-3000:]
    (job,) = _job_ids(proc.stdout)
    script = next((shared / "runs").glob("cluster-*/job.sh"), None)
    records = {r["config"]["nodes"]: r for r in _records(reports)}
    assert sorted(records) == [1, 2] and all(r["status"] == "ok" for r in records.values())
    two = records[2]["parallel"]
    assert two["world_size"] == 2 and two["nodes"] == 2 and two["ranks_per_node"] == 1
    assert len(two["hosts"]) == 2 and two["interface"]
    assert two["allreduce"]["busbw_gbps"] > 0
    assert "nodes" not in records[1]["parallel"] and records[1]["parallel"]["world_size"] == 1
    assert records[2]["slurm"]["job_id"] == job
    assert job not in slurm_cluster.jobs()
    assert script is not None
    assert not [c for c in _podman_containers() if c.startswith("envbench-")]

    report = envbench(e2e_env, "report", "--matrix", matrix, "--reports", reports,
                      "--synthetic")
    assert report.returncode == 0, report.stdout[-2000:]
    page = (reports / "index.html").read_text()
    assert "Scaling by nodes" in page, page[:2000]
    assert "bus bandwidth" in page


def test_an_allocation_larger_than_the_partition_is_refused_at_once(
        e2e_env, base_tag, partition, tmp_path):
    """slurm.nodes: 2 on the one-node partition: the job would wait for a node that is not
    there; sinfo says so before anything is submitted."""
    matrix = _matrix(tmp_path, base_tag, partition, repeats=1, epochs=1)
    text = matrix.read_text().replace("shared_dir:", "nodes: 2, shared_dir:")
    matrix.write_text(text.replace("repeats: 1,", "repeats: 1, parallel: ddp, nproc: 1, "
                                   "nodes: 2,"))
    before = slurm_cluster.jobs()
    proc = envbench(e2e_env, "slurm", "--matrix", matrix, "--reports", tmp_path / "reports",
                    "--synthetic")
    print(proc.stdout)
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "✘ slurm.nodes: 2, and partition %s has 1 node(s) that can start a job: fewer " \
        "nodes, or another partition" % partition in proc.stdout
    assert "nothing submitted" in proc.stdout and slurm_cluster.jobs() == before
    assert "Traceback" not in proc.stdout


def _podman_containers() -> list[str]:
    listed = subprocess.run(["podman", "ps", "--all", "--format", "{{.Names}}"],
                            capture_output=True, text=True, timeout=120)
    return listed.stdout.split()


def test_an_image_archive_changed_in_shared_dir_is_saved_again_and_checked_on_the_node(
        e2e_env, base_tag, partition, shared, tmp_path):
    """Run after the first test, which saved the stacks' archive into shared_dir: its bytes
    changed since are not loaded on the node; the archive is saved again, and the job
    checks it against the sha256 the login node wrote before podman loads it."""
    archive = sorted((shared / "images").glob("*.tar"))[0]  # one stack's of the two
    with open(archive, "r+b") as handle:
        handle.seek(1024)
        handle.write(b"not the image")
    image_id = archive.name[:-len(".tar")]
    subprocess.run(["podman", "rmi", "--force", image_id], capture_output=True, timeout=300)
    matrix = _matrix(tmp_path, base_tag, partition, repeats=1, epochs=1, shared=shared)
    reports = tmp_path / "reports"
    proc = envbench(e2e_env, "slurm", "--matrix", matrix, "--reports", reports, "--synthetic")
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "%s (owned by %s) is not the image archive this kit wrote there for you (its " \
        "sha256 differs from the one recorded): removed, and made again" \
        % (archive, trust.owner_name(os.geteuid())) in proc.stdout
    assert "saving image %s" % image_id[:12] in proc.stdout
    assert len(_job_ids(proc.stdout)) == 1
    scripts = sorted((shared / "runs").glob("cluster-*/job.sh"), key=lambda p: p.stat().st_mtime)
    assert "sha256sum --check" in scripts[-1].read_text()
    records = _records(reports)
    assert len(records) == 2 and all(r["status"] == "ok" for r in records), records
    # Loaded on the node from the archive the job checked.
    assert any(image_id in loaded for loaded in _podman_images())


def test_a_cell_past_its_timeout_is_ended_by_slurm_and_the_job_goes_on(
        e2e_env, base_tag, partition, shared, tmp_path):
    """The target's timeout_s is the step's own time limit: a cell that runs on is ended by
    Slurm, recorded Timeout in one sentence, its container removed, and the job goes on."""
    matrix = _matrix(tmp_path, base_tag, partition, repeats=1, epochs=1000, shared=shared)
    text = matrix.read_text().replace("    cpus: 1\n", "    cpus: 1\n    timeout_s: 20\n")
    # One stack (one cell), and epochs that take minutes: Slurm checks time limits only
    # every half minute or so.
    matrix.write_text(text.replace("  slurm-b: ", "  # slurm-b: ").replace(
        "limit: 1000,", "limit: 8000,"))
    reports = tmp_path / "reports"
    proc = envbench(e2e_env, "slurm", "--matrix", matrix, "--reports", reports, "--synthetic")
    print(proc.stdout)
    assert proc.returncode == 1, proc.stdout[-3000:]
    (job,) = _job_ids(proc.stdout)
    (record,) = _records(reports)
    assert record["error"]["type"] == "Timeout", record["error"]
    assert record["error"]["message"] == ("the cell ran past the target's timeout_s=20: "
                                          "Slurm ended its step (Slurm job %s)" % job)
    runs = sorted((shared / "runs").glob("cluster-*"), key=lambda p: p.stat().st_mtime)
    said = (runs[-1] / "job.out").read_text()
    assert "envbench: all cells ran" in said, said  # the job went on past the ended step
    left = subprocess.run(["podman", "ps", "--all", "--quiet", "--filter", "name=envbench-"],
                          capture_output=True, text=True, timeout=60).stdout.split()
    assert left == []


def _started(env: dict[str, str], matrix: Path, reports: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "envbench", "slurm", "--matrix",
                             str(matrix), "--reports", str(reports), "--synthetic"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _until_first_cell(proc: subprocess.Popen) -> list[str]:
    lines = []
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("[1/"):
            break
    return lines


def test_ctrl_c_cancels_the_job_keeps_what_finished_and_a_run_again_runs_the_rest(
        e2e_env, base_tag, partition, shared, tmp_path):
    matrix = _matrix(tmp_path, base_tag, partition, repeats=3, shared=shared)
    reports = tmp_path / "reports"
    proc = _started(e2e_env, matrix, reports)
    lines = _until_first_cell(proc)
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=300)
    output = "".join(lines) + rest
    print(output)
    assert proc.returncode == 130, output[-3000:]
    (job,) = _job_ids(output)
    assert "job(s) %s cancelled" % job in output
    assert job not in slurm_cluster.jobs()
    # No container of the cancelled step goes on running, or stays, on the node.
    left = subprocess.run(["podman", "ps", "--all", "--quiet", "--filter", "name=envbench-"],
                          capture_output=True, text=True, timeout=60).stdout.split()
    assert left == []
    kept = [r for r in _records(reports) if r["status"] == "ok"]
    assert 1 <= len(kept) < 6

    again = envbench(e2e_env, "slurm", "--matrix", matrix, "--reports", reports, "--synthetic")
    print(again.stdout)
    assert again.returncode == 0, again.stdout[-3000:]
    assert re.search(r"^submitted job \d+: %d cell\(s\)" % (6 - len(kept)), again.stdout,
                     flags=re.M), again.stdout
    assert sum(r["status"] == "ok" for r in _records(reports)) == 6


def test_a_node_that_goes_down_fails_the_unfinished_cells_with_slurms_state(
        e2e_env, base_tag, partition, shared, tmp_path):
    matrix = _matrix(tmp_path, base_tag, partition, repeats=3, shared=shared)
    reports = tmp_path / "reports"
    proc = _started(e2e_env, matrix, reports)
    try:
        lines = _until_first_cell(proc)
        slurm_cluster.set_node_state("DOWN")
        rest, _ = proc.communicate(timeout=300)
    finally:
        slurm_cluster.wait_idle()
    output = "".join(lines) + rest
    print(output)
    assert proc.returncode == 1, output[-3000:]
    (job,) = _job_ids(output)
    records = _records(reports)
    ok = [r for r in records if r["status"] == "ok"]
    failed = [r for r in records if r["status"] != "ok"]
    assert ok and failed and len(ok) + len(failed) == 6
    for r in failed:
        # The step running when its node went down, and those that never ran: each says
        # which job and what Slurm said.
        assert r["error"]["type"] == "SlurmJobEnded", r["error"]
        assert "Slurm job %s ended NODE_FAIL (the node failed under the job, reason " \
               "NodeDown)" % job in r["error"]["message"], r["error"]


def test_a_partition_that_does_not_exist_is_refused_before_anything_is_submitted(
        e2e_env, base_tag, partition, tmp_path):
    matrix = _matrix(tmp_path, base_tag, "no-such-partition")
    before = slurm_cluster.jobs()
    proc = envbench(e2e_env, "slurm", "--matrix", matrix, "--reports", tmp_path / "reports",
                    "--synthetic")
    print(proc.stdout)
    assert proc.returncode == 1
    assert "✘ partition no-such-partition does not exist here; the partitions are: %s" \
        % partition in proc.stdout
    assert "nothing submitted" in proc.stdout and not _job_ids(proc.stdout)
    assert slurm_cluster.jobs() == before
    assert not (tmp_path / "shared" / "runs").exists()
    assert "Traceback" not in proc.stdout


def test_a_partition_whose_nodes_are_all_drained_is_refused_at_once_in_slurms_words(
        e2e_env, base_tag, partition, tmp_path):
    """Not after the probe's wait for a node that will not come: sinfo says it at once."""
    matrix = _matrix(tmp_path, base_tag, partition)
    before = slurm_cluster.jobs()
    slurm_cluster.set_node_state("DRAIN", reason="disk swap by the admins")
    try:
        proc = envbench(e2e_env, "slurm", "--matrix", matrix, "--reports",
                        tmp_path / "reports", "--synthetic")
    finally:
        slurm_cluster.set_node_state("RESUME")
        slurm_cluster.wait_idle()
    print(proc.stdout)
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert re.search(r"✘ no node of partition %s can start a job: %s drain(ed|ing)? \(disk "
                     r"swap by the admins\); ask the admins to resume one"
                     % (partition, slurm_cluster.node_name()), proc.stdout), proc.stdout
    assert "is seen from" not in proc.stdout  # refused before the probe job was submitted
    assert "nothing submitted" in proc.stdout and slurm_cluster.jobs() == before
    assert "Traceback" not in proc.stdout
    # And with the node back, the same check passes and says so.
    again = envbench(e2e_env, "slurm", "--matrix", matrix, "--reports", tmp_path / "reports",
                     "--synthetic", "--print")
    assert "✔ 1 of 1 node(s) of partition %s can start a job" % partition in again.stdout, \
        again.stdout
    # Each step's own time limit is the target's timeout_s (3600 s by default).
    assert again.stdout.count("--time=60:00") == 4, again.stdout


@pytest.fixture(scope="module")
def podman_engine(partition, base_tag, client, tmp_path_factory):
    """Podman's Docker-compatible API as the login node's only engine, holding the base."""
    socket = tmp_path_factory.mktemp("podman") / "podman.sock"
    service = subprocess.Popen(["podman", "system", "service", "--time=0",
                                "unix://%s" % socket], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        archive = tmp_path_factory.mktemp("base") / "base.tar"
        with open(archive, "wb") as handle:
            for chunk in client.images.get(base_tag).save(named=True):
                handle.write(chunk)
        subprocess.run(["podman", "load", "--quiet", "--input", str(archive)], check=True,
                       capture_output=True, timeout=300)
        yield "unix://%s" % socket
    finally:
        service.terminate()
        service.wait(timeout=30)


def test_the_login_node_may_have_podman_and_no_docker(e2e_env, base_tag, podman_engine,
                                                       partition, shared, tmp_path):
    """Many login nodes have Podman and no Docker: the images are built through Podman's
    Docker-compatible socket, saved from it for the nodes, and the cells run as ever."""
    stack = '{python: "3.11", torch: "1.13", source: debian, base: "%s"}' % base_tag
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(
        "environments:\n  built-by-podman: %s\n" % stack
        + "targets:\n  cluster:\n    device: cpu\n    cpus: 1\n"
        + "    slurm: {partition: %s, time: \"00:20:00\", shared_dir: %s}\n"
        % (partition, shared)
        + "benchmark: {epochs: 1, repeats: 1, limit: 500, limit_test: 100, "
          "data: synthetic}\n")
    env = dict(e2e_env, DOCKER_HOST=podman_engine)
    proc = envbench(env, "slurm", "--matrix", matrix, "--reports", tmp_path / "reports",
                    "--offline")
    print(proc.stdout[-4000:])
    assert proc.returncode == 0, proc.stdout[-3000:]
    (record,) = _records(tmp_path / "reports")
    assert record["status"] == "ok"
    inspected = subprocess.run(["podman", "image", "inspect", "--format", "{{.Id}}",
                                record["env"]["image"]["tag"]], capture_output=True,
                               text=True, timeout=60)
    assert inspected.returncode == 0, inspected.stderr  # built in Podman's own store
    assert record["env"]["image"]["id"].split(":")[-1] == inspected.stdout.strip()


def test_a_users_package_with_its_bytecode_caches_runs_as_a_slurm_cell(
        e2e_env, base_tag, partition, shared, tmp_path):
    """A user's own workload as a host run leaves it (a package with __pycache__): copied
    once into shared_dir without its caches, mounted read-only, trained in the step. Its
    input (a file of its own) copied once by digest into shared_dir and read in the step."""
    package = tmp_path / "gru-tokens"
    shutil.copytree(ROOT / "examples" / "gru-tokens", package)
    with (package / "__init__.py").open("a") as f:
        f.write("\n\n_build = build\n\n\ndef build(ctx):\n"
                "    with open(ctx.inputs['table']) as f:\n"
                "        assert f.read() == 'from the login node', 'not the input'\n"
                "    return _build(ctx)\n")
    table = tmp_path / "inputs" / "table.txt"
    table.parent.mkdir()
    table.write_text("from the login node")
    compileall.compile_dir(str(package), quiet=1)
    assert (package / "__pycache__").is_dir()
    stack = '{python: "3.11", torch: "1.13", source: debian, base: "%s"}' % base_tag
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(
        "environments:\n  slurm-a: %s\n" % stack
        + "targets:\n  cluster:\n    device: cpu\n    cpus: 1\n"
        + "    slurm: {partition: %s, time: \"00:20:00\", shared_dir: %s}\n"
        % (partition, shared)
        + "benchmark: {epochs: 1, repeats: 1, limit: 500, limit_test: 100, data: synthetic,"
          " workload: {file: gru-tokens, function: build, inputs: {table: %s}}}\n" % table)
    proc = envbench(e2e_env, "slurm", "--matrix", matrix, "--reports", tmp_path / "reports")
    print(proc.stdout[-3000:])
    assert proc.returncode == 0, proc.stdout[-3000:]
    (record,) = _records(tmp_path / "reports")
    assert record["status"] == "ok", record.get("error")
    (copy,) = (shared / "workloads").glob("*/gru-tokens")
    assert not (copy / "__pycache__").exists()
    (copied,) = (shared / "inputs").glob("*/table.txt")
    assert record["config"]["inputs"] == {"table": {"path": "/inputs/table/table.txt",
                                                    "sha256": copied.parent.name}}


def test_print_writes_the_script_and_the_commands_and_submits_and_copies_nothing(
        e2e_env, base_tag, cifar, partition, tmp_path):
    matrix, reports = _matrix(tmp_path, base_tag, partition), tmp_path / "reports"
    before = slurm_cluster.jobs()
    proc = envbench(e2e_env, "slurm", "--matrix", matrix, "--reports", reports, "--data", cifar,
                    "--print")
    print(proc.stdout[-3000:])
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "#SBATCH --partition=%s" % partition in proc.stdout
    assert proc.stdout.count("\nnext_port; cell slurm-") == 4
    assert "docker save --output" in proc.stdout
    assert re.search(r"^cp -r \S+ \S+/data/[0-9a-f]{64}$", proc.stdout, flags=re.M)
    assert not _job_ids(proc.stdout) and slurm_cluster.jobs() == before
    assert not (tmp_path / "shared" / "data").exists()
    assert not (tmp_path / "shared" / "images").exists()
    assert not list(reports.glob("results/*.json"))


def test_check_and_doctor_judge_a_slurm_only_matrix_and_doctor_probes_only_when_asked(
        e2e_env, base_tag, partition, tmp_path):
    """The matrix a cluster user writes has Slurm targets only: check lists its cells and
    validates its stacks, doctor runs the engine's checks and the preflight (the probe job
    with --probe): both exit 0 where all holds. A partition that does not exist is ✘."""
    matrix = _matrix(tmp_path, base_tag, partition)
    proc = envbench(e2e_env, "check", "--matrix", matrix, "--synthetic")
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout
    assert "slurm-a × cluster (repeat 1): a step of cluster's batch job (partition %s, "\
        "podman; ./noxw -s slurm)" % partition in proc.stdout.splitlines()
    assert proc.stdout.splitlines()[-1] == "%s: valid, 4 cells (4 on Slurm)" % matrix
    before = slurm_cluster.jobs()
    proc = envbench(e2e_env, "doctor", "--matrix", matrix, "--synthetic")
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout
    assert "✔ slurm target cluster: partition %s is up" % partition in proc.stdout
    assert "ℹ slurm target cluster: a node's view (shared_dir there, podman, its GPU) not " \
        "probed: --probe runs one short srun" in proc.stdout
    assert slurm_cluster.jobs() == before
    proc = envbench(e2e_env, "doctor", "--matrix", matrix, "--synthetic", "--probe")
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout
    assert re.search(r"^✔ slurm target cluster: shared_dir is seen from \S+$", proc.stdout,
                     flags=re.M), proc.stdout
    assert re.search(r"^✔ slurm target cluster: podman on \S+: podman version", proc.stdout,
                     flags=re.M), proc.stdout
    matrix = _matrix(tmp_path, base_tag, "no-such-partition")
    proc = envbench(e2e_env, "doctor", "--matrix", matrix, "--synthetic")
    assert proc.returncode == 1, proc.stdout
    assert "✘ slurm target cluster: partition no-such-partition does not exist here" \
        in proc.stdout and "Traceback" not in proc.stdout
