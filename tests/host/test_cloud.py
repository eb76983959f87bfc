"""Cloud targets, offline: the matrix's cloud block, SkyPilot's own Task objects and task-YAML
validation, prices from a fixture catalog in a temporary SkyPilot home, and the dry run."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from test_matrix import GOOD, problems

from envbench.cloud import plan, runid, tasks
from envbench.cloud import sky as skyapi
from envbench.command_options import Options
from envbench.matrix import models
from envbench.results.clusters import ClusterState
from envbench.results.identity import SYNTHETIC as SYNTHETIC_DATA
from envbench.user_errors import UserError

ROOT = Path(__file__).resolve().parents[2]
CATALOG = Path(__file__).resolve().parent / "data" / "skypilot-catalog"

THREE = GOOD + """
  h100: {device: cuda, cloud: {accelerators: "H100:1", infra: lambda}}
  l4: {device: cuda, cloud: {accelerators: "L4:1", infra: paperspace, use_spot: true}}
  a100: {device: cuda, price_per_hour: 1.10, cloud: {accelerators: "A100:1", infra: aws,
         autostop_minutes: 45}}
""".replace("targets:\n", "targets:\n", 1)


def three() -> str:
    # GOOD's targets block ends before `benchmark:`; the cloud targets go with them.
    head, bench = GOOD.split("benchmark:")
    extra = "\n".join(line for line in THREE[len(GOOD):].splitlines() if line)
    return head + extra + "\nbenchmark:" + bench


@pytest.fixture()
def sky_home(tmp_path, monkeypatch):
    """A SkyPilot home holding only the fixture catalog (fresh files: nothing is fetched)."""
    home = tmp_path / "sky"
    shutil.copytree(CATALOG, home / ".sky" / "catalogs" / "v8",
                    ignore=shutil.ignore_patterns("README.md"))
    monkeypatch.setenv("SKY_RUNTIME_DIR", str(home))
    monkeypatch.setenv("SKYPILOT_DISABLE_USAGE_COLLECTION", "1")
    return home


def test_the_cloud_block_is_validated_with_key_paths():
    m = models.parse(three())
    assert m.targets["l4"].cloud.accelerator == ("L4", 1) and m.targets["l4"].cloud.use_spot
    assert m.targets["a100"].cloud.autostop_minutes == 45
    bad = three().replace('"H100:1"', '"H100:x"')
    assert any(p.startswith("targets.h100.cloud.accelerators:") for p in problems(bad))
    bad = three().replace("infra: lambda", "infra: 'aws; rm -rf /'")
    assert any(p.startswith("targets.h100.cloud.infra:") for p in problems(bad))
    bad = three().replace("infra: lambda}", "infra: lambda, colour: red}")
    assert "targets.h100.cloud.colour: unknown key" in problems(bad)
    bad = three().replace("h100: {device: cuda,", "h100: {device: cpu,")
    assert any("cloud: accelerators on a cpu target would be paid for and never used" in p
               for p in problems(bad))
    bad = three().replace('accelerators: "H100:1", ', "")
    assert any("cloud: a cuda target in a cloud needs accelerators" in p for p in problems(bad))
    # The CPU baseline on a cloud VM: no accelerators, SkyPilot's default CPU VM or a type.
    cpu = models.parse(three().replace('h100: {device: cuda, cloud: {accelerators: "H100:1", ',
                                       "h100: {device: cpu, cloud: {"))
    assert cpu.targets["h100"].cloud.accelerators is None


def test_each_task_is_a_real_skypilot_task_and_its_yaml_round_trips(sky_home, tmp_path):
    m = models.parse(three())
    data = tmp_path / "data"
    data.mkdir()
    config = tasks.task_config("l4", m.targets["l4"], ROOT, ROOT / "matrix.yaml", data)
    task = skyapi.validated_task(config)
    assert task.name == "envbench-l4"
    (resources,) = task.resources
    assert resources.accelerators == {"L4": 1} and resources.use_spot
    assert "noxw -s bench -- --matrix matrix.yaml --target l4" in task.run
    assert "--data ~/envbench-data" in task.run and task.file_mounts == {
        "~/envbench-data": str(data)}
    assert task.envs["SKYPILOT_DISABLE_USAGE_COLLECTION"] == "1"
    again = skyapi.validated_task(yaml.safe_load(yaml.safe_dump(task.to_yaml_config())))
    assert again.to_yaml_config() == task.to_yaml_config()
    # SkyPilot's validator is the judge: a field it does not know is refused with its reason.
    config["resources"]["colour"] = "red"
    with pytest.raises(UserError, match="SkyPilot refuses the task for envbench-l4"):
        skyapi.validated_task(config)


def test_prices_come_from_the_catalog_unless_the_matrix_gives_one(sky_home):
    m = models.parse(three())
    assert skyapi.cached_clouds() == ["lambda", "paperspace"]
    price, instance, source = skyapi.hourly_price(m.targets["h100"].cloud)
    assert (price, instance, source) == (2.49, "gpu_1x_h100_pcie", "SkyPilot catalog (lambda)")
    price, instance, _ = skyapi.hourly_price(m.targets["l4"].cloud)
    assert (price, instance) == (0.22, "1x_L4_SECURE")  # the spot price: use_spot is on
    price, _, why = skyapi.hourly_price(m.targets["a100"].cloud)
    assert price is None and "no SkyPilot catalog on this machine for aws" in why


def dry_run(matrix_path: Path, out: Path, sky_home: Path,
            reports: Path) -> subprocess.CompletedProcess:
    """`envbench cloud --dry-run` as a user runs it, against the fixture catalog."""
    env = dict(os.environ, SKY_RUNTIME_DIR=str(sky_home), SKYPILOT_DISABLE_USAGE_COLLECTION="1")
    return subprocess.run([sys.executable, "-m", "envbench", "cloud", "--dry-run", "--matrix",
                           str(matrix_path), "--out", str(out), "--reports", str(reports)],
                          cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=300)


def test_the_dry_run_prints_the_plan_and_writes_three_valid_task_yamls(sky_home, tmp_path):
    matrix_path = tmp_path / "matrix.yaml"
    matrix_path.write_text(three())
    out = tmp_path / "tasks"
    proc = dry_run(matrix_path, out, sky_home, tmp_path / "none")
    assert proc.returncode == 0, proc.stdout
    print(proc.stdout)
    text = proc.stdout
    assert "h100: H100:1 on lambda, $2.49/h (SkyPilot catalog (lambda), gpu_1x_h100_pcie)" in text
    assert "l4: L4:1 on paperspace, $0.22/h (SkyPilot catalog (paperspace), 1x_L4_SECURE)" in text
    assert "a100: A100:1 on aws, $1.10/h (matrix)" in text
    # Environment g is the CUDA stack: 2 batch sizes x 2 amp values x 3 repeats per target.
    assert text.count("cells: 12 (g)") == 3
    assert "have no earlier results here" in text and "cost: at least $0.58" in text
    # 2.49 $/h x (8 min to start + 6 min to build the CUDA stack g) = $0.581
    assert "time: provisioning allowance 8 min + image builds 6 min (1 stack) + " in text
    written = sorted(p.name for p in out.iterdir())
    assert written == ["envbench-a100.yaml", "envbench-h100.yaml", "envbench-l4.yaml"]
    import sky

    for name in written:
        task = sky.Task.from_yaml_config(yaml.safe_load((out / name).read_text()))
        (resources,) = task.resources
        assert resources.autostop_config.down  # autostop-with-down: the safety net


def test_no_cloud_targets_and_unknown_ones_are_clear_errors(tmp_path):
    m = models.parse(GOOD)
    with pytest.raises(UserError, match="no cloud targets"):
        plan.plan(m, Options(matrix_path=ROOT / "matrix.yaml", reports_dir=tmp_path), ROOT)
    with pytest.raises(UserError, match="not a cloud target: cpu"):
        plan.plan(models.parse(three()), Options(matrix_path=ROOT / "matrix.yaml",
                                                 reports_dir=tmp_path, targets=("cpu",)), ROOT)
    # Refused before anything is planned or launched, not a traceback from the VM's digest.
    with pytest.raises(UserError, match="--data .*: no CIFAR-10 there"):
        plan.plan(models.parse(three()), Options(matrix_path=ROOT / "matrix.yaml",
                                                 reports_dir=tmp_path, data_dir=tmp_path), ROOT)


def test_earlier_results_give_the_time_and_cost_estimate(sky_home, tmp_path):
    import random

    from report_fixture import make_record

    from bench import result

    m = models.parse(three())
    results = tmp_path / "reports" / "results"
    results.mkdir(parents=True)
    record = make_record("g", "gpu", 256, 0, random.Random(1))
    record["cell"]["target"] = "h100"
    result.write_atomic(str(results / "a.json"), record)
    (p,) = plan.plan(m, Options(matrix_path=ROOT / "matrix.yaml",
                                reports_dir=tmp_path / "reports", targets=("h100",)), ROOT)
    first, steady = record["summary"]["first_epoch_s"], record["summary"]["epoch_s_median"]
    # The matrix's 2 epochs per cell: the first epoch, then one steady one, and the overhead.
    per_cell = first + steady + plan.CELL_OVERHEAD_S
    assert p.unknown_cells == 0 and p.run_s == pytest.approx(12 * per_cell)
    # The VM's start and set-up (8 min), the one CUDA stack's first build (6 min), the cells.
    assert p.build_s == 6 * 60
    assert p.cost == pytest.approx(2.49 * (8 * 60 + 6 * 60 + 12 * per_cell) / 3600)
    assert "(from earlier results)" in plan.describe([p]) and "at least" not in \
        plan.describe([p]).split("cost:")[1].splitlines()[0]


def test_local_runs_leave_cloud_targets_to_their_vms_and_check_lists_them(tmp_path):
    from envbench.cells import matrixrun

    path = tmp_path / "matrix.yaml"
    path.write_text(three())
    _, everything = matrixrun.plan_cells(Options(matrix_path=path))
    assert {c.target for c in everything} == {"gpu", "cpu"}
    # On the VM the kit names its target: then it runs there.
    _, on_vm = matrixrun.plan_cells(Options(matrix_path=path, targets=("l4",)))
    assert {c.target for c in on_vm} == {"l4"}
    proc = subprocess.run([sys.executable, "-m", "envbench", "check", "--matrix", str(path),
                           "--synthetic"], cwd=ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=300)
    assert "cloud target l4: L4:1 on paperspace (spot), autostop 30 min" in proc.stdout
    assert re.search(r"^g × l4 × .*\(repeat 1\): on l4's own VM \(\./noxw -s cloud\)$",
                     proc.stdout, flags=re.M), proc.stdout
    # 12 cells a stack and target: a (a CPU build) on cpu, g on gpu and cpu here and on
    # the 3 cloud targets.
    assert proc.stdout.splitlines()[-1] == "%s: valid, 72 cells (36 in this engine, 36 on " \
        "cloud VMs)" % path, proc.stdout


def _with_skypilot(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """An envbench command that starts SkyPilot's local API server, which is stopped after."""
    try:
        return subprocess.run([sys.executable, "-m", "envbench", *args], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=600)
    finally:  # the API server SkyPilot started for this home
        subprocess.run([sys.executable, "-c", "import sky; sky.api_stop()"], env=env,
                       capture_output=True, timeout=120)


def test_check_and_doctor_judge_a_cloud_only_matrix(sky_home, tmp_path):
    """A matrix of cloud targets only: check validates and lists every cell (exit 0); doctor
    runs SkyPilot's credential check and says which target's cloud is not enabled, and how
    to enable it (exit 1: here no cloud has credentials)."""
    path = tmp_path / "matrix.yaml"
    path.write_text("\n".join(line for line in three().splitlines()
                              if not line.startswith(("  gpu:", "  cpu:"))) + "\n")
    env = dict(os.environ, HOME=str(sky_home))
    check = subprocess.run([sys.executable, "-m", "envbench", "check", "--matrix", str(path),
                            "--synthetic"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=300)
    assert check.returncode == 0, check.stdout
    assert check.stdout.splitlines()[-1] == "%s: valid, 36 cells (36 on cloud VMs)" % path
    doctor = _with_skypilot(env, "doctor", "--matrix", str(path), "--synthetic")
    print(doctor.stdout)
    assert doctor.returncode == 1 and "Traceback" not in doctor.stdout
    lines = doctor.stdout.splitlines()
    assert lines[0] == "this host against 36 cell(s) of %s (--synthetic)" % path
    assert "✘ cloud target h100: lambda is not enabled in SkyPilot (`sky check`: none " \
        "enabled)" in lines
    assert "    fix: install envbench[cloud-aws], set its credentials, then run `sky check`" \
        in lines
    assert lines[-1] == "3 check(s), 3 to fix"


def test_results_come_home_from_the_job_log_byte_for_byte(tmp_path):
    """The run script's own printing loop, run by bash over real result files, then read
    back from a log whose lines carry SkyPilot's prefix."""
    import random

    from report_fixture import make_record

    from bench import result
    from envbench.cloud import fetch

    remote = tmp_path / "vm" / "reports" / "results"
    remote.mkdir(parents=True)
    rng = random.Random(2)
    for i, target in enumerate(("gpu", "cpu")):
        result.write_atomic(str(remote / ("r%d.json" % i)), make_record("g", target, 256, 0, rng))
    (remote / "junk.json").write_text("{not a result")
    script = tasks.run_script("h100", "matrix.yaml", False, False)
    loop = next(line for line in script.splitlines() if line.startswith("for f in"))
    printed = subprocess.run(["bash", "-c", loop], cwd=tmp_path / "vm", capture_output=True,
                             text=True, check=True).stdout
    log = "\n".join("(envbench-h100, pid=4242) " + line for line in
                    ["epoch 1/5 ...", *printed.splitlines(), "done"])
    log += "\n(envbench-h100, pid=4242) ENVBENCH-RESULT ../../etc/passwd.json e30="
    written, refused = fetch.restore(log, tmp_path / "home")
    assert sorted(p.name for p in written) == ["r0.json", "r1.json"]
    for path in written:
        assert path.read_bytes() == (remote / path.name).read_bytes()
    assert dict(refused)["../../etc/passwd.json"] == "not a result file name"
    assert dict(refused)["junk.json"].startswith("not valid JSON")
    assert not (tmp_path / "etc").exists()


def test_when_rsync_cannot_reach_the_cluster_the_job_log_brings_the_results_home(
        tmp_path, capsys):
    """A real rsync over a real ssh that is refused (nothing listens on 127.0.0.1:1): the
    fan-out says so and restores this target's result from the log, price filled in."""
    import base64
    import random

    from report_fixture import make_record

    from envbench.cloud import fanout
    from envbench.cloud.launcher import Remote

    text = three().replace('h100: {device: cuda, cloud: {accelerators: "H100:1", infra: lambda}}',
                           "h100: {device: cuda, price_per_hour: 2.0, cloud: "
                           "{accelerators: \"H100:1\", infra: lambda}}")
    m = models.parse(text)
    reports = tmp_path / "reports"
    (p,) = plan.plan(m, Options(matrix_path=ROOT / "matrix.yaml", reports_dir=reports,
                                targets=("h100",), synthetic=True), ROOT)
    record = make_record("g", "gpu", 256, 0, random.Random(3))
    record["cell"]["target"], record["cell"]["price_per_hour"] = "h100", None
    other = make_record("g", "gpu", 256, 1, random.Random(4))  # another target's: left out
    log = "\n".join("(task, pid=7) %s %s %s" % (tasks.RESULT_MARKER, name, base64.b64encode(
        json.dumps(r).encode()).decode()) for name, r in (("mine.json", record),
                                                          ("theirs.json", other)))
    fan = fanout.FanOut([p], launcher=None, m=m, reports=reports,
                        data=SYNTHETIC_DATA)
    outcome = fan.outcomes["h100"]
    refused = Remote("127.0.0.1", ["ssh", "-F", "/dev/null", "-p", "1", "-o", "BatchMode=yes",
                                   "-o", "ConnectTimeout=5"])
    fan._bring_home(p, outcome, refused, log)
    said = capsys.readouterr().out
    assert "[h100] rsync failed (exit " in said and "restoring results from the job's log" in said
    assert outcome.fetched_by == "the job's log" and outcome.state is ClusterState.DONE
    # Named by the record's own identity, not by the name the VM printed: a VM cannot pick
    # which file of reports/results it overwrites. The staging folder is gone.
    from envbench.results import identity, store
    stem = store.path_for(reports / "results", identity.of_record(record),
                          record["cell"].get("variant") or {}).name
    assert outcome.results == [stem] and stem != "mine.json"
    assert not (reports / "cloud" / "h100").exists()
    home = json.loads((reports / "results" / stem).read_text())
    assert home["cell"]["price_per_hour"] == 2.0 and home["cell"]["price_source"] == "matrix"
    assert home["epochs"] == record["epochs"]


def test_a_line_stream_hands_over_whole_lines_only():
    from envbench.cloud.launcher import LineStream

    lines: list[str] = []
    stream = LineStream(lines.append)
    stream.write("provisioning")
    stream.write(" 1/2\r\nsetup done\nepoch 1")
    assert lines == ["provisioning 1/2", "setup done"]
    stream.flush()
    assert lines[-1] == "epoch 1"


def test_with_skypilot_a_cluster_that_cannot_provision_is_recorded_with_its_reason(
        sky_home, tmp_path):
    """The SkyPilot launcher against SkyPilot itself: its SDK starts a local API server, whose
    `sky check` finds no cloud with credentials here, so the target is refused before any
    launch: its cells are recorded as failed with that reason, the cluster name is torn down
    all the same, and the report is written."""
    matrix_path = tmp_path / "matrix.yaml"
    matrix_path.write_text(three())
    reports = tmp_path / "reports"
    env = dict(os.environ, SKY_RUNTIME_DIR=str(sky_home), HOME=str(sky_home),
               SKYPILOT_DISABLE_USAGE_COLLECTION="1")
    proc = _with_skypilot(env, "cloud", "--matrix", str(matrix_path), "--target", "h100",
                          "--synthetic", "--reports", str(reports))
    print(proc.stdout)
    assert proc.returncode == 1, proc.stdout
    assert "Traceback" not in proc.stdout
    # `sky check` first: no cloud has credentials in this home, so none is enabled, and
    # the target is refused with that reason instead of a launch that cannot succeed.
    assert "SkyPilot: clouds enabled for compute: none (install envbench[cloud-aws]" \
        in proc.stdout
    # The cluster's name carries this machine and this run (envbench.cloud.runid).
    cluster = re.search(r"\[h100\] launching cluster (envbench-%s-[0-9a-f]{6}-h100): H100:1 on "
                        r"lambda \(SkyPilot\)" % runid.machine_tag(), proc.stdout)
    assert cluster, proc.stdout
    assert "[h100] failed: %s could not be provisioned: SkyPilot has no " \
        "credentials or SDK for lambda here (`sky check`): install envbench[cloud-lambda]" \
        % cluster.group(1) in proc.stdout
    assert "torn down: %s" % cluster.group(1) in proc.stdout
    # The run held a claim on its id while it ran, and let it go at the end: a later run
    # would take a cluster of this run that was somehow left for a leftover.
    claims = Path(env.get("ENVBENCH_CACHE") or sky_home / ".cache" / "envbench") / "cloud-runs"
    assert claims.is_dir()
    assert not (claims / ("%s.lock" % cluster.group(1).split("-")[2])).exists()
    records = [json.loads(p.read_text()) for p in (reports / "results").glob("*.json")]
    assert len(records) == 12  # environment g: 2 batch sizes x 2 amp values x 3 repeats
    for record in records:
        assert record["error"]["type"] == "ProvisionFailed"
        assert record["cell"]["price_per_hour"] == 2.49
        assert record["cell"]["price_source"] == "SkyPilot catalog (lambda)"
    runs = json.loads((reports / "cloud" / "runs.json").read_text())
    assert runs["launcher"] == "SkyPilot" and runs["runs"][0]["state"] == "failed"
    assert (runs["runs"][0]["cost"], runs["runs"][0]["cost_source"]) == (0.0,
                                                                         "never provisioned")
    assert (reports / "index.html").exists()


@pytest.mark.parametrize("infra, why", [
    ("k8s", "Kubernetes pods are containers"),
    ("kubernetes/my-context", "Kubernetes pods are containers"),
    ("ssh/gpu-pool", "SkyPilot's SSH node pools run their jobs in Kubernetes pods"),
    ("runpod", "RunPod's machines are containers"),
    ("vast", "Vast.ai's machines are containers"),
])
def test_infra_whose_machines_are_containers_is_refused_with_the_reason(infra, why):
    bad = three().replace("infra: lambda", "infra: %s" % infra)
    found = [p for p in problems(bad) if p.startswith("targets.h100.cloud.infra:")]
    assert len(found) == 1 and found[0].startswith(
        "targets.h100.cloud.infra: %s: %s" % (infra, why)), found
    assert found[0].endswith("the kit needs a VM with a Docker engine (aws, gcp, azure, "
                             "lambda, ...)")
    # The local launcher's own pool stays allowed: it is a rehearsal on sshd "VMs".
    local = models.parse(three().replace("infra: lambda", "infra: ssh/local"))
    assert local.targets["h100"].cloud.infra == "ssh/local"


def test_the_dry_run_refuses_a_k8s_target_before_writing_anything(tmp_path):
    matrix_path = tmp_path / "matrix.yaml"
    matrix_path.write_text(three().replace("infra: lambda", "infra: k8s"))
    out = tmp_path / "tasks"
    proc = subprocess.run([sys.executable, "-m", "envbench", "cloud", "--dry-run", "--matrix",
                           str(matrix_path), "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert "targets.h100.cloud.infra: k8s: Kubernetes pods are containers" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout and not out.exists()


def test_the_aws_task_checks_the_engine_first_and_joins_the_docker_group(sky_home):
    m = models.parse(three())
    config = tasks.task_config("a100", m.targets["a100"], ROOT, ROOT / "matrix.yaml")
    task = skyapi.validated_task(config)
    setup = task.setup.splitlines()
    # Before anything is fetched: the engine, the group, the check again in the new group.
    assert setup[1] == "if ! python3 -m envbench.provision check --quiet; then"
    assert '    sudo -n usermod -aG docker "$(id -un)"' in setup
    assert any(line.startswith("  sg docker -c 'python3 -m envbench.provision check' || {")
               for line in setup)
    assert setup[-1] == "./noxw --version"  # no pip needed on the VM
    assert 'else sg docker -c "$BENCH"; fi' in task.run and "BENCH='./noxw -s bench" in task.run
    (resources,) = task.resources
    assert resources.disk_size == 256  # SkyPilot's default; a CUDA stack builds in ~18 GB


def test_a_failed_job_is_told_by_bench_exit_code_and_its_last_error_line():
    from envbench.cloud import fanout
    log = "\n".join(["(task, pid=1) nox > Running session bench",
                     "(task, pid=1) error: this user cannot reach the Docker engine at "
                     "/var/run/docker.sock (permission denied)",
                     "(task, pid=1) envbench: bench exited with code 1",
                     "(task, pid=1) ENVBENCH-RESULT x.json ZXJyb3I="])
    assert fanout.bench_exit(log) == 1
    assert fanout.last_error(log) == ("(task, pid=1) error: this user cannot reach the Docker "
                                      "engine at /var/run/docker.sock (permission denied)")
    assert fanout.bench_exit("setup failed") is None and fanout.last_error("all fine") is None


def test_only_regular_result_files_come_home_from_a_vm(tmp_path):
    """The real rsync, its remote end run through a stand-in for ssh (a script that runs
    the command rsync asks for, here): what a hostile VM leaves in reports/results."""
    from envbench.cloud import fanout
    from envbench.cloud.launcher import Remote

    vm = tmp_path / "vm"
    results = vm / "reports" / "results"
    (results / "sub").mkdir(parents=True)
    secret = tmp_path / "id_ed25519"
    secret.write_text("PRIVATE KEY")
    (results / "good.json").write_text('{"ok": 1}')
    (results / "key.json").symlink_to(secret)                  # would copy the key home
    (results / "zero.json").symlink_to("/dev/zero")
    os.mkfifo(results / "fifo.json")
    (results / "big.json").write_bytes(b" " * (32 * 2**20 + 1))
    (results / "setuid.json").write_text("{}")
    os.chmod(results / "setuid.json", 0o4755)
    (results / "notes.txt").write_text("not a result")
    (results / "sub" / "deep.json").write_text("{}")
    ssh = tmp_path / "fake-ssh"
    ssh.write_text('#!/bin/sh\nshift\nexec sh -c "$*"\n')  # drop the host, run the command
    ssh.chmod(0o755)
    home = tmp_path / "home"
    problem = fanout.rsync(Remote("vm", [str(ssh)], str(vm)), "reports/results/", home)
    assert problem is None
    assert sorted(p.name for p in home.rglob("*")) == ["good.json", "setuid.json"]
    assert (home / "good.json").read_text() == '{"ok": 1}'
    assert (home / "setuid.json").stat().st_mode & 0o7777 == 0o644  # no setuid, no +x
    assert not any(p.is_symlink() for p in home.iterdir())


SECRET_MATRIX = """
# a comment naming ${AWS_SECRET_ACCESS_KEY} ships nothing
environments:
  g:
    python: "3.8"
    torch: "1.12.1"
    cuda: "11.6"
    index_url: "${ENVBENCH_TEST_MIRROR:-https://download.pytorch.org/whl}/cu116"
    base: "${ENVBENCH_TEST_BASE:-debian:bookworm-slim}"
targets:
  h100: {device: cuda, label: "${NOT_SHIPPED_EITHER}",
         cloud: {accelerators: "H100:1", infra: lambda}}
benchmark: {epochs: 2}
"""


def test_only_the_variables_environments_use_travel_and_as_secrets(sky_home, tmp_path,
                                                                   monkeypatch):
    for name in ("AWS_SECRET_ACCESS_KEY", "NOT_SHIPPED_EITHER", "ENVBENCH_TEST_BASE"):
        monkeypatch.setenv(name, "value-of-" + name.lower())
    monkeypatch.setenv("ENVBENCH_TEST_MIRROR", "https://user:tok3n@mirror.example/whl")
    matrix_path = tmp_path / "matrix.yaml"
    matrix_path.write_text(SECRET_MATRIX)
    m = models.load(matrix_path)
    assert tasks.matrix_variables(m) == {
        "ENVBENCH_TEST_BASE": "value-of-envbench_test_base",
        "ENVBENCH_TEST_MIRROR": "https://user:tok3n@mirror.example/whl"}
    out = tmp_path / "tasks"
    proc = dry_run(matrix_path, out, sky_home, tmp_path / "none")
    assert proc.returncode == 0, proc.stdout
    written = (out / "envbench-h100.yaml").read_text()
    task = yaml.safe_load(written)
    # The names travel as SkyPilot secrets; their values are in no file and no output.
    task["secrets"].pop("ENVBENCH_INDEX_URL", None)  # the host's index, where it has one
    assert task["secrets"] == {"ENVBENCH_TEST_BASE": None, "ENVBENCH_TEST_MIRROR": None}
    assert "ENVBENCH_TEST_MIRROR" not in task["envs"]
    for value in ("tok3n", "value-of-"):
        assert value not in written and value not in proc.stdout


@pytest.mark.parametrize("url", ["https://pypi.example/${ENVBENCH_SECRET}/simple",
                                 "https://${ENVBENCH_SECRET}.evil.example/simple"])
def test_a_variable_inside_an_index_url_is_refused(url):
    bad = GOOD.replace('a: {python: "3.11", torch: "2.13.0"}',
                       'a: {python: "3.11", torch: "2.13.0", index_url: "%s"}' % url)
    found = [p for p in problems(bad) if p.startswith("environments.a.index_url:")]
    assert found and "${ENVBENCH_SECRET} inside a URL would send its value to that server" \
        in found[0]


def test_credentials_in_a_printed_url_are_masked():
    from envbench.matrix import grammars
    assert grammars.masked("https://user:tok3n@mirror.example/whl/cu116") == \
        "https://***@mirror.example/whl/cu116"
    assert grammars.masked("https://mirror.example/whl") == "https://mirror.example/whl"


@pytest.mark.parametrize("first, second", [("gpu.a", "gpu-a"), ("GPU_A", "gpu-a"),
                                           ("a" * 61 + "x", "a" * 61 + "y")])
def test_targets_whose_cluster_names_collide_are_refused_before_anything_runs(first, second):
    text = three().replace("h100:", "%s:" % first, 1).replace("a100:", "%s:" % second, 1)
    with pytest.raises(UserError) as refused:
        plan.plan(models.parse(text), Options(matrix_path=ROOT / "matrix.yaml",
                                              synthetic=True), ROOT)
    assert str(refused.value).startswith("targets %s and %s would both be cluster %s"
                                         % (first, second, tasks.cluster_name(first)))
    assert tasks.cluster_name(first) == tasks.cluster_name(second)


def test_home_path_and_user_never_travel_even_when_an_environment_names_them(monkeypatch):
    text = GOOD.replace('a: {python: "3.11", torch: "2.13.0"}',
                        'a: {python: "3.11", torch: "2.13.0", wheelhouse: "${HOME}/wh", '
                        'base: "${USER}/img:${ENVBENCH_TEST_TAG}"}')
    monkeypatch.setenv("ENVBENCH_TEST_TAG", "1")
    assert tasks.matrix_variables(models.parse(text)) == {"ENVBENCH_TEST_TAG": "1"}


def test_the_vm_is_told_the_hosts_package_index_as_a_secret(sky_home):
    """A stock VM image has no pip to name an index: its ./noxw takes the host's, from
    ENVBENCH_INDEX_URL, as a secret (a token may sit in the userinfo, the path or the
    query): never in the task's YAML."""
    m = models.parse(three())
    for url in ("https://index.example/simple", "https://user:tok3n@index.example/simple",
                "https://index.example/tok3n/simple"):
        config = tasks.task_config("a100", m.targets["a100"], ROOT, ROOT / "matrix.yaml",
                                   index_url=url)
        assert "ENVBENCH_INDEX_URL" not in config["envs"]
        assert config["secrets"] == {"ENVBENCH_INDEX_URL": url}
        assert "index.example" not in yaml.safe_dump(tasks.redacted(config))
        skyapi.validated_task(config)


def test_the_hosts_package_index_is_named_or_asked_of_pip(monkeypatch, tmp_path):
    from envbench import provision
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    monkeypatch.setenv("ENVBENCH_INDEX_URL", "https://named.example/simple")
    assert provision.package_index() == "https://named.example/simple"
    monkeypatch.setenv("ENVBENCH_INDEX_URL", "file:///srv/wheels")  # means nothing on a VM
    assert provision.package_index() is None
    monkeypatch.delenv("ENVBENCH_INDEX_URL")
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nindex-url = https://configured.example/simple\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    assert provision.package_index() == "https://configured.example/simple"
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # nothing configured: pip's own default
    default = provision.package_index()
    assert default is not None and default.startswith("https://")
    assert "configured.example" not in default
    # Indexes no VM reaches: this host, and private or link-local addresses.
    for here in ("http://localhost:3141/root/pypi/+simple/", "http://127.0.0.1:8080/simple",
                 "https://10.1.2.3/simple", "http://[::1]:3141/simple",
                 "http://169.254.1.1/simple"):
        monkeypatch.setenv("ENVBENCH_INDEX_URL", here)
        assert provision.package_index() is None, here
    monkeypatch.setenv("ENVBENCH_INDEX_URL", "https://mirror.example.org/simple")
    assert provision.package_index() == "https://mirror.example.org/simple"


def test_a_workload_with_inputs_is_refused_on_cloud_targets_before_anything_runs(tmp_path):
    """An input lies on this host, anywhere, and may weigh tens of GB: a VM gets none."""
    text = three().replace("benchmark: {epochs: 2,", "benchmark: {epochs: 2, workload: {file: "
                           "ft.py, inputs: {weights: /data/bert}},")
    with pytest.raises(UserError) as refused:
        plan.plan(models.parse(text), Options(matrix_path=tmp_path / "matrix.yaml",
                                              synthetic=True), tmp_path)
    assert str(refused.value).startswith("workload ft names inputs:, which cloud targets "
                                         "cannot take yet")
