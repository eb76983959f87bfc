"""The Slurm target's block refused key by key before anything is submitted; each runtime's
command line as locked down as that runtime allows; the batch script read by a real bash.

Podman's command line runs on a real cluster in tests/e2e/test_slurm.py. Apptainer and Enroot
are not installable here: their lines are checked for what they must contain, and each
rendered script is parsed by bash (`bash -n`), not run.
"""
from __future__ import annotations

import subprocess
from pathlib import PurePosixPath

import pytest

from envbench.engine.spec import Bind, ContainerSpec
from envbench.matrix import models
from envbench.slurm import cluster, runtimes
from envbench.slurm.script import ImageUse, Step, render
from envbench.user_errors import MatrixError

BASE = """
environments:
  a: {python: "3.11", torch: "2.13.0"}
targets:
  t: {device: %s, %s slurm: {%s}}
benchmark: {epochs: 1}
"""
BLOCK = 'partition: gpu, time: "01:00:00", shared_dir: /scratch/me/envbench'


def parse(device: str = "cpu", block: str = BLOCK, extra: str = "") -> models.Matrix:
    return models.parse(BASE % (device, extra, block))


def problems(device: str = "cpu", block: str = BLOCK, extra: str = "") -> str:
    with pytest.raises(MatrixError) as caught:
        parse(device, block, extra)
    return "\n".join(caught.value.problems)


def test_a_valid_block_and_its_defaults():
    block = parse("cuda", BLOCK + ", gres: \"gpu:h100:2\", account: lab-1, qos: normal")\
        .targets["t"].slurm
    assert block is not None
    assert (block.exclusive, block.runtime, block.gpu_count) == (True, "podman", 2)
    assert parse("cuda", BLOCK + ", gpus: 4").targets["t"].slurm.gpu_count == 4
    assert parse("cuda", BLOCK + ", gres: \"gpu\"").targets["t"].slurm.gpu_count == 1


@pytest.mark.parametrize("block, device, words", [
    ('time: "1:00:00", shared_dir: /s', "cpu", "partition"),
    ('partition: gpu, shared_dir: /s', "cpu", "time"),
    ('partition: gpu, time: "1:00:00"', "cpu", "shared_dir"),
    (BLOCK.replace("/scratch/me/envbench", "scratch/me"), "cpu", "must be an absolute path"),
    (BLOCK.replace("/scratch/me/envbench", "\"/scratch/a:b\""), "cpu", "':'"),
    (BLOCK.replace("gpu,", "\"gpu; rm -rf /\","), "cpu", "partition"),
    (BLOCK.replace('"01:00:00"', '"one hour"'), "cpu", "time"),
    (BLOCK + ", runtime: docker", "cpu", "runtime"),
    (BLOCK + ", gres: \"mps:100\"", "cuda", "gres names the GPUs"),
    (BLOCK + ", gpus: 2, gres: \"gpu:2\"", "cuda", "give one of them"),
    (BLOCK, "cuda", "needs gpus or gres"),
    (BLOCK + ", gpus: 1", "cpu", "hold GPUs that no cell uses"),
    (BLOCK + ", exclusive: \"yes\"", "cpu", "exclusive"),
    (BLOCK + ", nodes: 4", "cpu", "slurm.nodes: 4 allocated, and no cell runs on more than 1"),
])
def test_a_bad_block_is_refused_naming_the_key_and_the_reason(block, device, words):
    said = problems(device, block)
    assert "targets.t.slurm" in said or "targets.t" in said, said
    assert words in said, said


def test_a_value_outside_sbatchs_grammar_is_refused_in_words_not_as_a_pattern():
    said = problems("cpu", BLOCK.replace('"01:00:00"', '"one hour"'))
    assert "'one hour' is not a time limit as sbatch reads it" in said
    assert "^(" not in said


def test_slurm_and_cloud_on_one_target_are_refused():
    said = problems("cpu", BLOCK, extra="cloud: {infra: aws},")
    assert "not both" in said


def _launch(gpus: int = 0) -> ContainerSpec:
    return ContainerSpec(
        name="a__t__r0", image="IMAGE", args=("--device", "cpu", "--out", "/results/x.json"),
        binds=(Bind("/scratch/run/cells/x/results", "/results", read_only=False),
               Bind("/scratch/data/abc", "/data"),
               Bind("/scratch/workloads/sha/mine", "/workloads/mine")),
        environment={"HOME": "/tmp", "NVIDIA_VISIBLE_DEVICES": "void"}, user="1000:1000",
        cpus=4, memory_bytes=2**31, gpus=gpus)


def test_podman_is_locked_down_as_a_docker_cell_is():
    words = runtimes.podman(_launch())
    line = " ".join(words)
    for flag in ("--network none", "--cap-drop all", "--security-opt no-new-privileges",
                 "--read-only", "--pids-limit 4096", "--user 1000:1000", "--cpus 4",
                 "--memory 2147483648 --memory-swap 2147483648", "--rm --replace"):
        assert flag in line, flag
    assert "type=bind,source=/scratch/data/abc,target=/data,ro=true" in line
    assert "type=bind,source=/scratch/run/cells/x/results,target=/results --" in line
    assert words[-7:-4] == ["IMAGE", "-m", "bench"] and words[-1] == "/results/x.json"
    assert runtimes.GPU_DEVICES not in words
    assert runtimes.GPU_DEVICES in runtimes.podman(_launch(gpus=1))


def test_apptainer_keeps_the_host_out_and_mounts_read_only_what_the_cell_only_reads():
    words = runtimes.apptainer(_launch(gpus=1))
    for flag in ("--containall", "--cleanenv", "--no-home", "--writable-tmpfs", "--nv"):
        assert flag in words
    line = " ".join(words)
    assert "--bind /scratch/data/abc:/data:ro" in line
    assert "--bind /scratch/run/cells/x/results:/results:rw" in line
    assert words[words.index("IMAGE") + 1:words.index("IMAGE") + 4] == ["python3", "-m",
                                                                         "bench"]
    assert "--nv" not in runtimes.apptainer(_launch())


def test_pyxis_takes_the_image_and_mounts_as_sruns_own_options():
    words = runtimes.pyxis(_launch())
    assert "--container-image=IMAGE" in words and "--no-container-mount-home" in words
    mounts = next(w for w in words if w.startswith("--container-mounts="))
    assert "/scratch/data/abc:/data:ro" in mounts
    assert "/scratch/run/cells/x/results:/results:rw" in mounts
    assert words[words.index("env") + 1:words.index("env") + 3] == ["HOME=/tmp",
                                                                     "NVIDIA_VISIBLE_DEVICES=void"]


@pytest.mark.parametrize("runtime", ["podman", "apptainer", "pyxis"])
def test_each_runtimes_batch_script_is_bash_and_asks_slurm_for_what_the_block_says(runtime):
    block = models.Slurm(partition="gpu", time="2-00:00:00", gres="gpu:a100:2",
                         account="lab", qos="high", constraint="a100&ib",
                         nodelist="gpu[01-04]", runtime=runtime,
                         shared_dir="/scratch/it's mine")
    launch = _launch(gpus=2)
    if runtime == "pyxis":
        step = Step("a__t__r0", ["--cpus-per-task=4"] + runtimes.pyxis(launch), [])
    else:
        step = Step("a__t__r0", ["--cpus-per-task=4"], runtimes.BUILDERS[runtime](launch))
    image = ImageUse(runtime, "/scratch/it's mine/images/x.tar", "REF")
    text = render("envbench-t", block, PurePosixPath("/scratch/it's mine/runs/r1"), [image],
                  [step, step])
    parsed = subprocess.run(["bash", "-n"], input=text, text=True, capture_output=True)
    assert parsed.returncode == 0, parsed.stderr
    for line in ("#SBATCH --partition=gpu", "#SBATCH --time=2-00:00:00",
                 "#SBATCH --gres=gpu:a100:2", "#SBATCH --account=lab", "#SBATCH --qos=high",
                 "#SBATCH --constraint=a100&ib", "#SBATCH --nodelist=gpu[01-04]",
                 "#SBATCH --exclusive", "#SBATCH --no-requeue"):
        assert line in text.splitlines(), line
    assert text.count("\nnext_port; cell a__t__r0 ") == 2


def test_a_shared_job_asks_for_no_whole_node():
    block = models.Slurm(partition="cpu", time="30", exclusive=False, shared_dir="/s")
    text = render("envbench-t", block, PurePosixPath("/s/runs/r"), [], [])
    assert "--exclusive" not in text and "--mem=0" not in text


def test_gres_strings_count_the_gpus_of_a_node():
    gres = ["gpu:h100:4(S:0-1)", "gpu:a100:8", "shard:10"]
    assert cluster.gres_gpus(gres) == 8
    assert cluster.gres_gpus(gres, "h100") == 4
    assert cluster.gres_gpus(gres, "v100") == 0
    assert cluster.gres_gpus(["gpu:2"]) == 2


def test_a_job_state_says_which_job_ended_how():
    state = cluster.JobState("TIMEOUT", "TimeLimit", "gpu01")
    assert state.ended
    assert state.sentence("42") == ("Slurm job 42 ended TIMEOUT (the job reached its time "
                                    "limit (slurm: time), reason TimeLimit)")
    assert not cluster.JobState("PENDING", "Priority", None).ended


def test_a_failed_steps_last_words_carry_the_fix_where_it_is_known():
    from envbench.slurm.jobcells import _last_words
    log = ["Error: runc: runc create failed: unable to start container process: error during "
           "container init: error setting rlimits for ready process: error setting rlimit "
           "type 7: operation not permitted: OCI permission denied",
           "srun: error: node1: task 0: Exited with exit code 126"]
    said = _last_words(log)
    assert said.startswith("Error: runc: runc create failed")
    assert "default_ulimits = [] under [containers] in containers.conf" in said
    assert _last_words(["Traceback (most recent call last):", "ValueError: no"]) == \
        "ValueError: no"
    assert _last_words(["srun: error: x"]) == ""


def test_a_slurm_cell_gets_no_cores_of_the_kits_choosing():
    from envbench.cells import resources
    target = parse("cpu", BLOCK, extra="cpus: 4,").targets["t"]
    res = resources.plan(target, 64, pin_cores=target.slurm is None)
    assert (res.cpus, res.cpuset, res.threads) == (4, None, 4)
    assert "cpuset: a Slurm target's cells run on the cores Slurm gives" in problems(
        "cpu", BLOCK, extra='cpuset: "0-3",')


def test_the_nodes_gpu_is_held_against_each_stack_as_the_host_path_does():
    from envbench.slurm import preflight
    m = models.parse("""
environments:
  cu12: {python: "3.11", torch: "2.5.1", cuda: "12.4"}
  cu11: {python: "3.8", torch: "1.12.1", torchvision: "0.13.1", cuda: "11.6"}
targets:
  t: {device: cuda, gpus: 1, slurm: {partition: gpu, gpus: 1, time: "60", shared_dir: /s}}
benchmark: {epochs: 1}
""")
    old_driver = preflight.node_gpu("NVIDIA A100-SXM4-80GB, 470.182.03, 8.0, 81920 MiB")
    assert old_driver is not None and old_driver.gpus[0].capability == (8, 0)
    blocked = preflight.stack_blocks(dict(m.environments), old_driver)
    assert set(blocked) == {"cu12"} and blocked["cu12"].kind == "DriverTooOld"
    assert "470.182.03" in blocked["cu12"].sentence
    # torch 1.12.1 + CUDA 11.6 has no kernels for a Hopper GPU (sm_90).
    hopper = preflight.node_gpu("NVIDIA H100 80GB HBM3, 550.54.15, 9.0, 81559 MiB")
    assert set(preflight.stack_blocks(dict(m.environments), hopper)) == {"cu11"}
    assert preflight.node_gpu("NVIDIA-SMI has failed because it couldn't communicate") is None


def test_a_node_takes_a_job_unless_slurm_says_it_is_closed():
    nodes = cluster.parse_node_states(
        "n1|idle|none\nn2|drained|disk swap\nn3|down*|Not responding\nn4|mixed|none\n"
        "n5|idle~|none\nn6|idle+drain|kernel update\nn7|draining|reboot\nn8|allocated|none\n"
        "n9|idle*|none\nn2|drained|disk swap\n")
    assert [n.name for n in nodes] == ["n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9"]
    # n9 does not answer this moment (as just after a resume): the probe job judges it.
    assert [n.name for n in nodes if n.open] == ["n1", "n4", "n5", "n8", "n9"]
    assert nodes[1].describe() == "n2 drained (disk swap)"
    assert nodes[0].describe() == "n1 idle"


NODES = """
environments:
  a: {python: "3.11", torch: "2.13.0"}
targets:
  %s
benchmark: {epochs: 1, %s}
"""
CLUSTER = 't: {device: cpu, slurm: {%s, nodes: 2}}' % BLOCK


@pytest.mark.parametrize("targets, benchmark, words", [
    (CLUSTER, "parallel: ddp, nproc: 1, nodes: 3",
     "benchmark.nodes: 3, but targets.t.slurm.nodes allocates 2"),
    ("t: {device: cpu}", "parallel: ddp, nproc: 1, nodes: 2",
     "benchmark.nodes: 2, but targets.t is not a Slurm target"),
    (CLUSTER, "nproc: 1, sweep: {nodes: [1, 2], parallel: [none, ddp]}",
     "benchmark.nodes: 2 needs benchmark.parallel: ddp in every cell"),
    (CLUSTER, "parallel: ddp, nproc: 1, sweep: {nodes: [0, 2]}", "sweep"),
])
def test_cells_across_nodes_are_refused_where_no_allocation_holds_them(targets, benchmark,
                                                                       words):
    with pytest.raises(MatrixError) as caught:
        models.parse(NODES % (targets, benchmark))
    assert words in "\n".join(caught.value.problems), caught.value.problems


def test_a_job_across_nodes_asks_for_them_and_its_steps_meet_at_the_first_node():
    matrix = models.parse(NODES % (CLUSTER, "parallel: ddp, nproc: 1, sweep: {nodes: [1, 2]}"))
    block = matrix.targets["t"].slurm
    assert block is not None and block.nodes == 2
    launch = _launch()
    command = runtimes.podman_per_node(runtimes.podman(launch))
    step = Step("a__t__r0", ["--nodes=2", "--ntasks=2", "--ntasks-per-node=1"],
                command + ["--rendezvous", runtimes.RENDEZVOUS])
    # Each node's container is named for its node; the rest is Podman's line as it was.
    assert command[:4] == ["bash", "-c", 'exec podman run --name "$0-${SLURM_NODEID:-0}" '
                           '"$@"', "envbench-a__t__r0"]
    assert command[4:] == [w for w in runtimes.podman(launch)[2:]
                           if w not in ("--name", "envbench-a__t__r0")]
    image = ImageUse("podman", "/s/images/x.tar", "IMAGEID", archive_sha256="ab" * 32)
    text = render("envbench-t", block, PurePosixPath("/s/runs/r"), [image], [step])
    # Podman's image store is each node's: the image is made ready on every node.
    assert "\nsrun --nodes=2 --ntasks=2 --ntasks-per-node=1 bash -c 'podman image exists " \
        "IMAGEID" in text
    parsed = subprocess.run(["bash", "-n"], input=text, text=True, capture_output=True)
    assert parsed.returncode == 0, parsed.stderr
    lines = text.splitlines()
    assert "#SBATCH --nodes=2" in lines and "#SBATCH --ntasks-per-node=1" in lines
    assert "#SBATCH --ntasks=1" not in lines
    # The rendezvous is the job's to expand (per step), not a quoted literal.
    assert text.rstrip().splitlines()[-2].endswith('--rendezvous "${ENVBENCH_RENDEZVOUS}"')
    # One node: the job as before.
    single = render("envbench-t", models.Slurm(partition="p", time="30", shared_dir="/s"),
                    PurePosixPath("/s/runs/r"), [], []).splitlines()
    assert "#SBATCH --nodes=1" in single and "#SBATCH --ntasks=1" in single


def test_the_prologue_finds_the_first_nodes_address_and_gives_each_step_its_port(tmp_path):
    """The job's own lines, run by bash with Slurm's answers in place of scontrol's."""
    block = models.Slurm(partition="p", time="30", shared_dir="/s", nodes=2)
    text = render("envbench-t", block, PurePosixPath(str(tmp_path)), [], [])
    prologue = text[text.index("ENVBENCH_FIRST="):text.index("others() {")]
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "scontrol").write_text(
        '#!/bin/sh\n[ "$2" = hostnames ] && { echo n7; echo n8; exit 0; }\n'
        'echo "NodeName=n7 Arch=x86_64 CoresPerSocket=4 NodeAddr=10.1.2.7 NodeHostName=n7"\n')
    (fake / "scontrol").chmod(0o755)
    shown = subprocess.run(
        ["bash", "-c", prologue + 'echo "$ENVBENCH_FIRST $ENVBENCH_PORT"; next_port; '
         'next_port; echo "$ENVBENCH_RENDEZVOUS"'], text=True,
        capture_output=True, env={"PATH": "%s:/usr/bin:/bin" % fake,
                                  "SLURM_JOB_ID": "4242", "SLURM_JOB_NODELIST": "n[7-8]"})
    first = 20000 + 242 * 32
    # Each step's line is preceded by next_port: its own port, set before its words expand.
    assert shown.stdout.split() == ["10.1.2.7", str(first), "10.1.2.7:%d" % (first + 2)], \
        shown.stderr
