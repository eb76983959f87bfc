"""matrix.yaml validation: the default file is valid, bad files are refused with key paths."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from envbench.engine import gpu
from envbench.matrix import models
from envbench.results.identity import SYNTHETIC as SYNTHETIC_DATA
from envbench.user_errors import MatrixError

ROOT = Path(__file__).resolve().parents[2]

GOOD = """
environments:
  a: {python: "3.11", torch: "2.13.0"}
  g: {python: "3.8", torch: "1.12.1", torchvision: "0.13.1", cuda: "11.6"}
targets:
  gpu: {device: cuda, gpus: all, label: "RTX 3060", price_per_hour: 0.35}
  cpu: {device: cpu, cpus: 8, label: "i7-11800H", price_per_hour: 0.10}
benchmark: {epochs: 2, sweep: {batch_size: [32, 256], amp: [off, bf16]}}
"""


def problems(text: str) -> list[str]:
    with pytest.raises(MatrixError) as caught:
        models.parse(text)
    return caught.value.problems


def test_the_default_matrix_holds_the_seed_stack_and_the_write_up_settings():
    m = models.load(ROOT / "matrix.yaml")
    seed = m.environments["seed-torch1.12-cu116"]
    assert (seed.python, seed.torch, seed.torchvision, seed.cuda) == ("3.8", "1.12.1", "0.13.1",
                                                                     "11.6")
    assert any(e.cuda and e.cuda.startswith("12.") for e in m.environments.values())
    assert any(e.cuda is None for e in m.environments.values())
    assert m.targets["gpu"].device == "cuda" and m.targets["cpu"].device == "cpu"
    # The targets are this machine's GPUs and CPU: no typed hardware name, no quota.
    assert m.targets["gpu"].label is None and m.targets["cpu"].label is None
    assert m.targets["cpu"].cpus is None and m.targets["cpu"].cpuset is None
    b = m.benchmark
    assert (b.epochs, b.batch_size, b.repeats) == (5, 256, 3)
    assert b.sweep == {"batch_size": (32, 256)}


def test_a_good_matrix_parses_and_pairs_targets_by_device():
    m = models.parse(GOOD)
    assert m.targets_for("a") == ["cpu"] and m.targets_for("g") == ["gpu", "cpu"]
    assert m.benchmark.sweep["amp"] == ("off", "bf16")  # YAML's bare off is not False
    assert gpu.requested_count(m.targets["gpu"].gpus) == -1 and m.targets["cpu"].gpus is None


@pytest.mark.parametrize("change, expected", [
    (("cuda: \"11.6\"", "cuda: \"12.x\""),
     "environments.g.cuda: '12.x' is not a CUDA version"),
    (("torch: \"2.13.0\"}", "torch: \"2.13.0\", colour: red}"),
     "environments.a.colour: unknown key"),
    (("torch: \"2.13.0\"", "torch: \"two\""), "environments.a.torch: 'two' is not a version"),
    (("epochs: 2", "epochs: lots"), "benchmark.epochs: 'lots': Input should be a valid integer"),
    (("price_per_hour: 0.35", "price_per_hour: -1"), "targets.gpu.price_per_hour: -1"),
    (("batch_size: [32, 256]", "batch_size: []"), "benchmark.sweep.batch_size: empty list"),
    (("amp: [off, bf16]", "amp: [off, fp8]"), "benchmark.sweep.amp: 'fp8'"),
    (("amp: [off, bf16]", "colour: [red]"), "benchmark.sweep.colour: not sweepable"),
    (("amp: [off, bf16]", "pin_memory: [null, \"on\"]"),
     "benchmark.sweep.pin_memory: null is not a value to sweep"),
    (("  cpu: {device: cpu, cpus: 8,", "  cpu: {device: cpu, gpus: 1, cpus: 8,"),
     "targets.cpu: gpus: a cpu target has no GPUs"),
    (("label: \"RTX 3060\", ", "label: \"\", "), "targets.gpu.label: '': String should have "
                                                "at least 1 character"),
    (("  a: {python", "  a: {targets: [gpu], python"),
     "environments.a.targets[0]: target 'gpu' needs CUDA but a is a CPU-only stack"),
    (("  a: {python", "  a: {targets: [tpu], python"),
     "environments.a.targets[0]: unknown target 'tpu'"),
    (("  a: {", "  'a b': {"), "environments: 'a b' is not a valid name"),
    # YAML numbers are no versions: 3.10 would be 3.1 and 12.10 would be 12.1.
    (('python: "3.11"', "python: 3.10"),
     'environments.a.python: 3.10 was read as a number, which can lose digits (YAML reads '
     '3.10 as 3.1): quote it: `python: "3.10"`'),
    (('cuda: "11.6"', "cuda: 12.10"), 'environments.g.cuda: 12.10 was read as a number'),
    (('torch: "2.13.0"', "torch: 2.13"), 'environments.a.torch: 2.13 was read as a number'),
    # Booleans and floats are no counts; strings are no numbers.
    (("gpus: all", "gpus: true"), "targets.gpu.gpus: true: expected 'all' or a number of GPUs"),
    (("gpus: all", "gpus: 0"), "targets.gpu.gpus: 0: expected 'all' or a number of GPUs"),
    (("epochs: 2", "epochs: 2.0"), "benchmark.epochs: 2.0: Input should be a valid integer"),
    (("epochs: 2", "epochs: true"), "benchmark.epochs: true: Input should be a valid integer"),
    (("epochs: 2", "batch_size: 2.5"), "benchmark.batch_size: 2.5: Input should be a valid "
                                       "integer"),
    (("batch_size: [32, 256]", "batch_size: [true, 2]"),
     "benchmark.sweep.batch_size: true: Input should be a valid integer"),
    (("batch_size: [32, 256]", "batch_size: [32, 64.0]"),
     "benchmark.sweep.batch_size: 64.0: Input should be a valid integer"),
    (("amp: [off, bf16]", "channels_last: [false, 1]"),
     "benchmark.sweep.channels_last: 1: Input should be a valid boolean"),
    (("price_per_hour: 0.35", 'price_per_hour: "0.35"'),
     "targets.gpu.price_per_hour: '0.35': Input should be a valid number"),
    (("price_per_hour: 0.35", "price_per_hour: .inf"),
     "targets.gpu.price_per_hour: .inf: Input should be a finite number"),
    (("cpus: 8,", "cpus: 2.5,"), "targets.cpu.cpus: 2.5: Input should be a valid integer"),
    (("cpus: 8,", 'cpus: 8, cpuset: "0-3",'), "targets.cpu: cpus: 8, but cpuset '0-3' names 4"),
    (("cpus: 8,", "cpus: 8, swap: 1g,"), "targets.cpu: swap: needs memory"),
    # Bounds.
    (("epochs: 2", "epochs: 1001"), "benchmark.epochs: 1001: Input should be less than or "
                                    "equal to 1000"),
    (("epochs: 2", "repeats: 0"), "benchmark.repeats: 0: expected a number of repeats from "
                                  "1 to 100, or auto"),
    (("epochs: 2", "repeats: 101"), "benchmark.repeats: 101: expected a number of repeats "
                                    "from 1 to 100, or auto"),
    (("epochs: 2", "repeats: always"), "benchmark.repeats: 'always': expected a number of "
                                       "repeats from 1 to 100, or auto"),
    (("epochs: 2", "repeats: auto, max_repeats: 2"), "benchmark.max_repeats: 2: Input should "
                                                     "be greater than or equal to 3"),
    (("epochs: 2", "repeats: auto, precision: 0"), "benchmark.precision: 0: Input should be "
                                                   "greater than 0"),
    # The write-up's other techniques.
    (("amp: [off, bf16]", "parallel: [none, ddp]"),
     "benchmark.parallel: ddp on the CPU target 'cpu' needs benchmark.nproc"),
    (("epochs: 2", "epochs: 2, parallel: ddp"),
     "benchmark.parallel: ddp on the CPU target 'cpu' needs benchmark.nproc"),
    (("amp: [off, bf16]", "parallel: [none, horovod]"), "benchmark.sweep.parallel: 'horovod'"),
    (("amp: [off, bf16]", "model: [lenet, resnet]"),
     "benchmark.sweep.workload: 'resnet': unknown workload 'resnet' (built in: lenet, "
     "lenet-gap, lenet-dws, resnet18-cifar, resnet50, gpt-tiny, gpt2-small; your own: "),
    (("epochs: 2", "epochs: 2, nproc: 0"), "benchmark.nproc: 0: Input should be greater"),
    (("epochs: 2", "epochs: 2, pin_memory: maybe"), "benchmark.pin_memory: 'maybe'"),
    (("epochs: 2", "epochs: 2, quantize_eval: static"), "benchmark.quantize_eval: 'static'"),
])
def test_a_bad_matrix_is_refused_with_the_key_path(change, expected):
    old, new = change
    assert old in GOOD
    found = problems(GOOD.replace(old, new, 1))
    assert any(p.startswith(expected) for p in found), found


def test_the_techniques_sweep_and_yaml_on_off_are_words():
    text = GOOD.replace("amp: [off, bf16]", "parallel: [none, ddp], pin_memory: [on, off], "
                        "model: [lenet, lenet-gap]").replace("epochs: 2", "epochs: 2, nproc: 2")
    m = models.parse(text)
    assert m.benchmark.sweep["pin_memory"] == ("on", "off")  # YAML's bare on/off are words
    assert m.benchmark.nproc == 2
    from envbench.cells import expansion

    by_mode = {}
    for cell in expansion.expand(m, envs=["a"]):
        p = expansion.prepare(cell, m.targets["cpu"], 8, SYNTHETIC_DATA,
                          "sha256:x")
        by_mode.setdefault(cell.variant["parallel"], set()).add(p.config["nproc"])
    # nproc goes to the ddp cells only: the none cells of the same sweep stay runnable.
    assert by_mode == {"none": {None}, "ddp": {2}}


def test_a_matrix_of_more_than_ten_thousand_cells_is_refused_with_its_count():
    sizes = ", ".join(str(2**i) for i in range(12))  # 12 batch sizes
    text = GOOD.replace("benchmark: {epochs: 2, sweep: {batch_size: [32, 256],",
                        "benchmark: {epochs: 2, repeats: 100, sweep: {batch_size: [%s]," % sizes)
    # 3 (environment, target) pairs x 12 batch sizes x 2 amp values x 100 repeats: allowed
    assert models.parse(text).cell_count() == 7200
    text = text.replace("amp: [off, bf16]", "amp: [off, bf16, fp16]")
    assert problems(text) == ["the matrix expands to 10800 cells (at most 10000): fewer "
                              "environments, targets, sweep values or repeats"]


def test_labels_and_prices_are_optional():
    m = models.parse(GOOD.replace('label: "RTX 3060", price_per_hour: 0.35', "gpus: 1"
                                  ).replace("gpus: all, gpus: 1", "gpus: 1"))
    assert m.targets["gpu"].label is None and m.targets["gpu"].price_per_hour is None


def test_duplicate_names_are_refused_not_silently_merged():
    text = GOOD.replace("  g: {", "  a: {python: \"3.11\", torch: \"2.1.0\"}\n  g: {")
    assert problems(text) == ["environments.a: duplicate name 'a' (line 4)"]


def test_not_yaml_and_not_a_mapping():
    assert problems("environments: [")[0].startswith("line 1, column")
    assert "mapping" in problems("- just\n- a list\n")[0]


def test_the_cli_refuses_a_bad_file_without_a_traceback(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD.replace("cuda: \"11.6\"", "cuda: \"12.x\""))
    proc = subprocess.run([sys.executable, "-m", "envbench", "check", "--matrix", str(bad)],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 2
    assert "environments.g.cuda: '12.x' is not a CUDA version" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    missing = subprocess.run([sys.executable, "-m", "envbench", "bench", "--matrix",
                              str(tmp_path / "nope.yaml"), "--synthetic"],
                             cwd=ROOT, capture_output=True, text=True)
    assert missing.returncode == 2 and "nope.yaml" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_the_docs_matrix_example_is_a_valid_matrix():
    text = (ROOT / "docs" / "matrix.md").read_text()
    example = text[text.index("```yaml") + len("```yaml"):]
    m = models.parse(example[:example.index("```")])
    assert "seed-torch1.12-cu116" in m.environments and m.benchmark.sweep
