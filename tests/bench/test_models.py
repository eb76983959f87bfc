"""The light models: their size from their layers, training, and the quantised test pass."""
from __future__ import annotations

from bench_helpers import run_bench

from bench import model

SMALL = ("--device", "cpu", "--synthetic", "--limit", "512", "--limit-test", "256",
         "--pipeline", "resident", "--epochs", "1", "--batch-size", "64")


def _conv(c_in, c_out, k, out_hw, groups=1):
    """(parameters, multiply-adds) of a convolution, from its shape."""
    weights = c_out * (c_in // groups) * k * k
    return weights + c_out, out_hw * out_hw * weights


def _linear(n_in, n_out):
    return n_in * n_out + n_out, n_in * n_out


def test_parameters_and_flops_follow_from_the_layers():
    lenet = [_conv(3, 6, 5, 28), _conv(6, 16, 5, 10), _linear(400, 120), _linear(120, 84),
             _linear(84, 10)]
    gap = lenet[:2] + [_linear(16, 10)]
    dws = [_conv(3, 3, 5, 28, groups=3), _conv(3, 6, 1, 28), _conv(6, 6, 5, 10, groups=6),
           _conv(6, 16, 1, 10)] + lenet[2:]
    for name, layers in (("lenet", lenet), ("lenet-gap", gap), ("lenet-dws", dws)):
        described = model.describe(name)
        assert described["parameters"] == sum(p for p, _ in layers), name
        assert described["flops_per_image"] == 2 * sum(m for _, m in layers), name
    # The tutorial's LeNet, as commonly quoted: 62,006 parameters, 0.65 M multiply-adds.
    assert model.describe("lenet")["parameters"] == 62006


def test_each_model_trains_and_records_its_size(tmp_path):
    for name in model.MODELS:
        code, record, out = run_bench(tmp_path, *SMALL, "--model", name, name=name + ".json")
        assert code == 0, out
        assert record["config"]["model"] == name
        assert record["model"] == model.describe(name)


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
