"""The built-in workloads through bench's CLI: each trains, records what it is and counts in its
unit; options that cannot apply are refused by name; the quantised test pass."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from bench_helpers import ROOT, needs_torchvision, run_bench
from test_flops import LENETS

from bench import workloads
from bench.workloads import gpt

SMALL = ("--device", "cpu", "--synthetic", "--pipeline", "resident", "--epochs", "2")

# (workload, parameters as the architectures define them, unit, per sample); each runs at its
# catalog's smoke sizes (train, test, batch). gpt2-small is built below, not trained.
RUNS = [
    ("lenet", 62006, "images", 1),
    ("lenet-gap", sum(p for p, _ in LENETS["lenet-gap"]), "images", 1),
    ("lenet-dws", sum(p for p, _ in LENETS["lenet-dws"]), "images", 1),
    ("resnet18-cifar", 11173962, "images", 1),
    ("resnet50", 25557032, "images", 1),
    ("gpt-tiny", 1902720, "tokens", 128),
]


def smoke(name: str) -> tuple[str, ...]:
    train, test, batch = workloads.info(name).smoke
    return ("--limit", str(train), "--limit-test", str(test), "--batch-size", str(batch))


@pytest.mark.parametrize("name,parameters,unit,per_sample", RUNS, ids=[r[0] for r in RUNS])
def test_each_builtin_workload_trains_and_records_what_it_is(tmp_path, name, parameters, unit,
                                                             per_sample):
    code, record, out = run_bench(tmp_path, *SMALL, "--workload", name, *smoke(name))
    assert code == 0, out
    model = record["model"]
    assert record["config"]["workload"] == model["name"] == name
    assert model["parameters"] == parameters
    assert (model["unit"], model["units_per_sample"]) == (unit, per_sample)
    assert model["source"] == "builtin" and model["sha256"] is None
    assert model["flops"]["forward"] == model["flops_per_image"] > 0
    assert model["flops"]["train"] > 2 * model["flops"]["forward"]
    assert model["flops"]["method"] in ("flop_counter", "hooks")
    assert model["quality"] == ("loss" if unit == "tokens" else "accuracy")
    last = record["epochs"][-1]
    assert last["samples"] == workloads.info(name).smoke[0] and last["test_loss"] > 0
    assert record["summary"]["final_test_loss"] == last["test_loss"]
    assert 0 <= last["test_acc"] <= 1
    # The progress line counts in the workload's unit: a GPT's sequences are its tokens.
    assert out.count("tok/s" if unit == "tokens" else "img/s") == 2, out


def test_every_builtin_workload_is_trained_here_or_built_below():
    assert {r[0] for r in RUNS} | {"gpt2-small"} == set(workloads.NAMES)


def test_gpt2_small_is_gpt2_small():
    """124 M parameters (GPT-2 small's, with its vocabulary padded to 50304 as nanoGPT
    does), a 1024-token context; built, not trained (a CPU step takes seconds)."""
    net = gpt.GPT.of(gpt.SHAPES["gpt2-small"], fused=False)
    assert sum(p.numel() for p in net.parameters()) == 124475904
    assert net.position.num_embeddings == 1024 and net.head.weight is net.token.weight


def test_the_gpt_records_its_attention_and_both_kinds_compute_the_same():
    fused = gpt.has_fused_attention()
    assert fused == (int(torch.__version__.split(".")[0]) >= 2)
    explicit = gpt.CausalSelfAttention(32, 4, 16, fused=False)
    x = torch.randn(2, 16, 32)
    if fused:
        other = gpt.CausalSelfAttention(32, 4, 16, fused=True)
        other.load_state_dict(explicit.state_dict())
        assert torch.allclose(explicit(x), other(x), atol=1e-5)
    # Causal: the first position's output does not depend on later tokens.
    changed = x.clone()
    changed[:, 1:] += 1.0
    assert torch.allclose(explicit(x)[:, 0], explicit(changed)[:, 0], atol=1e-6)


# Debian's torch is built on the reference BLAS (BLAS_INFO=generic): its matrix products run
# 20-30x slower than an optimised build's, and this test's 64 steps take five minutes there.
# It runs in the suite's other leg (the host's torch), which trains the same code.
generic_blas = pytest.mark.skipif(
    "BLAS_INFO=generic" in torch.__config__.show(),
    reason="this torch's BLAS is the reference one (Debian's build): a GPT's matrix products "
           "take minutes; learning is checked on the host's torch")


@generic_blas
def test_the_gpt_learns_its_synthetic_tokens(tmp_path):
    code, record, out = run_bench(tmp_path, "--device", "cpu", "--synthetic", "--pipeline",
                                  "resident", "--epochs", "4", "--workload", "gpt-tiny",
                                  "--limit", "256", "--limit-test", "32", "--batch-size", "16",
                                  "--lr", "0.003")
    assert code == 0, out
    losses = [e["test_loss"] for e in record["epochs"]]
    assert losses[-1] < 0.8 * losses[0], losses
    assert record["model"]["attention"] == ("sdpa" if gpt.has_fused_attention()
                                            else "explicit")


def test_optimizer_defaults_follow_the_workload(tmp_path):
    from bench.options import parse_config

    def config(*args):
        return parse_config(["--device", "cpu", "--synthetic", "--epochs", "1",
                             "--pipeline", "resident", "--out", "x.json", *args])[1]

    # The tutorial's for the LeNets, at any batch; the ResNets' scale with the batch.
    assert (config("--batch-size", "32")["lr"], config("--batch-size", "32")["momentum"]) \
        == (0.001, 0.9)
    assert config("--workload", "resnet18-cifar", "--batch-size", "64")["lr"] == 0.025
    assert config("--workload", "resnet50", "--batch-size", "64", "--accumulate", "4")["lr"] \
        == 0.1
    assert config("--workload", "gpt2-small", "--batch-size", "8")["lr"] == 6e-4
    assert config("--workload", "resnet50", "--batch-size", "64", "--lr", "0.5")["lr"] == 0.5
    assert config("--model", "lenet-gap", "--batch-size", "8")["workload"] == "lenet-gap"


def _usage(*args):
    proc = subprocess.run([sys.executable, "-m", "bench", "--device", "cpu", "--epochs", "1",
                           "--batch-size", "8", "--pipeline", "resident", "--out",
                           "/nonexistent/x.json", *args], cwd=ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=120)
    return proc.returncode, proc.stdout


def test_workload_usage_errors_name_the_problem():
    code, out = _usage("--synthetic", "--workload", "resnet5")
    assert code == 2 and "unknown workload 'resnet5'" in out
    for name in workloads.NAMES:
        assert name in out
    code, out = _usage("--data", "/tmp", "--workload", "gpt-tiny")
    assert code == 2 and "seeded synthetic data" in out and "--synthetic" in out
    code, out = _usage("--synthetic", "--workload-sha256", "0" * 64)
    assert code == 2 and "needs --workload-file" in out
    code, out = _usage("--synthetic", "--workload", "lenet", "--workload-file", "x.py")
    assert code == 2 and "built-in workload's name" in out


def test_channels_last_on_token_inputs_is_refused_by_name(tmp_path):
    code, record, out = run_bench(tmp_path, *SMALL, "--workload", "gpt-tiny", "--limit", "16",
                                  "--batch-size", "8", "--channels-last")
    assert code == 1 and record["error"]["type"] == "UnsupportedOption"
    assert "gpt-tiny's inputs are tokens" in record["error"]["message"]
    assert "Traceback" not in out


def test_quantized_eval_of_a_gpt_keeps_its_tokens_integers(tmp_path):
    code, record, out = run_bench(tmp_path, *SMALL, "--workload", "gpt-tiny", "--limit", "16",
                                  "--limit-test", "8", "--batch-size", "8",
                                  "--quantize-eval", "dynamic")
    assert code == 0, out
    q = record["quantized_eval"]
    assert q["float_test_acc"] == record["epochs"][-1]["test_acc"]
    assert q["weight_bytes"] < q["float_weight_bytes"]


def test_quantized_eval_sits_beside_the_float_test(tmp_path, cifar_dir):
    code, record, out = run_bench(tmp_path, "--device", "cpu", "--data", cifar_dir,
                                  "--pipeline", "resident", "--epochs", "3", "--batch-size", "16",
                                  "--lr", "0.01", "--quantize-eval", "dynamic")
    assert code == 0, out
    q = record["quantized_eval"]
    assert q["method"] == "dynamic" and q["device"] == "cpu" and q["layers"] == ["Linear"]
    # The float pass on CPU is the same model the last epoch tested.
    assert q["float_test_acc"] == record["epochs"][-1]["test_acc"]
    assert abs(q["test_acc"] - q["float_test_acc"]) <= 0.05
    # int8 linear weights: LeNet's 62k parameters are 95% linear, so the state shrinks ~3x.
    assert q["weight_bytes"] < 0.5 * q["float_weight_bytes"]
    assert q["test_s"] > 0 and q["float_test_s"] > 0


def test_the_classic_pipeline_feeds_token_ids_without_torchvision(tmp_path):
    """A workload of tensors gets the tutorial's DataLoader (workers, shuffling) over them,
    with no image transforms: it runs where torchvision does not import."""
    code, record, out = run_bench(tmp_path, "--device", "cpu", "--synthetic", "--pipeline",
                                  "classic", "--workers", "2", "--epochs", "1", "--workload",
                                  "gpt-tiny", "--limit", "16", "--limit-test", "8",
                                  "--batch-size", "8")
    assert code == 0, out
    assert record["epochs"][0]["samples"] == 16 and record["epochs"][0]["phases_s"]["data"] > 0


@needs_torchvision
def test_the_classic_pipeline_transforms_imagenet_shaped_images(tmp_path):
    code, record, out = run_bench(tmp_path, "--device", "cpu", "--synthetic", "--pipeline",
                                  "classic", "--workers", "2", "--epochs", "1", "--workload",
                                  "resnet50", "--limit", "4", "--limit-test", "2",
                                  "--batch-size", "2")
    assert code == 0, out
    assert record["epochs"][0]["samples"] == 4 and record["env"]["torchvision"]
