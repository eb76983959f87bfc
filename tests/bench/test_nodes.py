"""bench --nodes: one bench per node meeting at --rendezvous, as srun starts them. Here the
"nodes" are two processes of this machine (as a test cluster's two slurmd are): the meeting,
the ranks, the group and the record are the real ones; only the wire is the loopback."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
from bench_helpers import ROOT, problems, run_bench

from bench import nodes

SMALL = ("--device", "cpu", "--synthetic", "--limit", "512", "--limit-test", "200",
         "--pipeline", "resident", "--epochs", "2", "--batch-size", "64", "--seed", "3",
         "--deterministic", "--lr", "0.05", "--threads", "1", "--probe", "off")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_nodes(tmp_path, count, *args, rendezvous=None):
    """``count`` benches, as srun would start one per node, all told the same --out."""
    rendezvous = rendezvous or "127.0.0.1:%d" % free_port()
    out = os.path.join(str(tmp_path), "result.json")
    command = [sys.executable, "-m", "bench", *map(str, args), "--nodes", str(count),
               "--rendezvous", rendezvous, "--out", out]
    return out, [subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
                 for _ in range(count)]


def finish(procs, timeout=600):
    outputs = [p.communicate(timeout=timeout)[0] for p in procs]
    return [p.returncode for p in procs], outputs


def test_two_nodes_train_as_ddp_on_one_does_and_the_first_writes_the_one_result(tmp_path):
    out, procs = start_nodes(tmp_path / "nodes", 2, *SMALL, "--parallel", "ddp",
                             "--nproc", "1", "--save-weights", tmp_path / "nodes.pt")
    codes, outputs = finish(procs)
    assert codes == [0, 0], outputs
    assert sorted(os.listdir(str(tmp_path / "nodes"))) == ["result.json"]
    with open(out) as f:
        record = json.load(f)
    assert problems(record) == [], problems(record)
    parallel = record["parallel"]
    assert parallel["world_size"] == 2 and parallel["nodes"] == 2
    assert parallel["ranks_per_node"] == 1 and parallel["global_batch"] == 128
    assert parallel["hosts"] == [socket.gethostname()] * 2
    assert parallel["interface"] == "lo" and parallel["rendezvous"].startswith("127.0.0.1:")
    bandwidth = parallel["allreduce"]
    assert bandwidth["bytes"] == nodes.PROBE_BYTES["gloo"] and bandwidth["median_s"] > 0
    # nccl-tests' factor for two ranks: 2(n-1)/n = 1
    assert bandwidth["busbw_gbps"] == pytest.approx(bandwidth["algbw_gbps"], rel=1e-3)
    assert record["config"]["nodes"] == 2 and "rendezvous" not in record["config"]
    assert [r["rank"] for r in record["epochs"][0]["ranks"]] == [0, 1]
    said = [o for o in outputs if "this node's ranks finished" in o]
    assert len(said) == 1, outputs  # the second node says what it did; it writes nothing

    # The same two ranks as processes of one node: the same samples, the same all-reduced
    # gradients, so the same weights (only where the ranks meet differs).
    code, one, output = run_bench(tmp_path, *SMALL, "--parallel", "ddp", "--nproc", "2",
                                  "--save-weights", tmp_path / "one.pt", name="one.json")
    assert code == 0, output
    assert one["summary"]["weights_sha256"] == record["summary"]["weights_sha256"]
    assert [e["train_loss"] for e in one["epochs"]] == [e["train_loss"] for e in
                                                        record["epochs"]]
    assert "nodes" not in one["parallel"]


def test_two_ranks_on_each_of_two_nodes_make_a_world_of_four(tmp_path):
    out, procs = start_nodes(tmp_path, 2, *SMALL, "--parallel", "ddp", "--nproc", "2")
    codes, outputs = finish(procs)
    assert codes == [0, 0], outputs
    with open(out) as f:
        record = json.load(f)
    assert record["parallel"]["world_size"] == 4 and record["parallel"]["ranks_per_node"] == 2
    assert [r["rank"] for r in record["epochs"][-1]["ranks"]] == [0, 1, 2, 3]
    assert sum(r["samples"] for r in record["epochs"][-1]["ranks"]) == 512
    # the bus factor for four ranks, 2(n-1)/n = 1.5
    bandwidth = record["parallel"]["allreduce"]
    assert bandwidth["busbw_gbps"] == pytest.approx(1.5 * bandwidth["algbw_gbps"], rel=1e-3)


def test_a_node_that_never_comes_is_waited_for_then_named_in_a_sentence(tmp_path):
    # One bench of two: it hosts the store and waits in the group's rendezvous for the
    # other; a short timeout (set for the test) ends it with how many nodes came.
    address = "127.0.0.1:%d" % free_port()
    out = str(tmp_path / "result.json")
    proc = subprocess.run([sys.executable, "-c",
                           "import bench.parallel as p; p.RENDEZVOUS_TIMEOUT_S = 5; "
                           "from bench import cli; raise SystemExit(cli.main())",
                           *SMALL, "--parallel", "ddp", "--nproc", "1", "--nodes", "2",
                           "--rendezvous", address, "--out", out],
                          cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout
    with open(out) as f:
        record = json.load(f)
    assert record["status"] == "failed" and record["epochs"] == []
    assert record["error"]["message"].startswith(
        "the ranks did not form a group within 5 s: 1 of 2 nodes met at %s" % address), \
        record["error"]


def test_a_client_whose_first_node_never_comes_says_where_it_waited(tmp_path):
    # 192.0.2.1 (TEST-NET-1) is no address of this machine: the bench is a client at once.
    proc = subprocess.run([sys.executable, "-c",
                           "import bench.parallel as p; p.RENDEZVOUS_TIMEOUT_S = 3; "
                           "from bench import cli; raise SystemExit(cli.main())",
                           *SMALL, "--parallel", "ddp", "--nproc", "1", "--nodes", "2",
                           "--rendezvous", "192.0.2.1:29999",
                           "--out", str(tmp_path / "r.json")],
                          cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout
    with open(str(tmp_path / "r.json")) as f:
        record = json.load(f)
    assert record["error"]["type"] == "UnsupportedOption", record["error"]
    assert "did not meet at 192.0.2.1:29999 within 3 s" in record["error"]["message"]


def test_nodes_options_are_refused_where_they_cannot_apply(tmp_path):
    for args, said in (
            (("--nodes", "2"), "--nodes 2 needs --parallel ddp"),
            (("--parallel", "ddp", "--nproc", "1", "--rendezvous", "h:1"),
             "--rendezvous is where the nodes of a --nodes run meet"),
            (("--parallel", "ddp", "--nproc", "1", "--nodes", "2", "--rendezvous", "h"),
             "is not HOST:PORT")):
        proc = subprocess.run([sys.executable, "-m", "bench", *SMALL, *args,
                               "--out", str(tmp_path / "r.json")], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=120)
        assert proc.returncode == 2 and said in proc.stdout, proc.stdout
    code, record, _ = run_bench(tmp_path, *SMALL, "--parallel", "ddp", "--nproc", "1",
                                "--nodes", "2")
    assert code == 1 and "--nodes 2 needs --rendezvous HOST:PORT" in record["error"]["message"]


def test_the_interface_towards_an_address_is_the_one_that_holds_the_route():
    assert nodes.interface_towards("127.0.0.1") == "lo"
    assert nodes.is_local("127.0.0.1") and not nodes.is_local("192.0.2.1")
