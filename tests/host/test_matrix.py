"""matrix.yaml validation: the default file is valid, bad files are refused with key paths."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from envbench import matrix
from envbench.errors import MatrixError

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
        matrix.parse(text)
    return caught.value.problems


def test_the_default_matrix_holds_the_seed_stack_and_the_write_up_settings():
    m = matrix.load(ROOT / "matrix.yaml")
    seed = m.environments["seed-torch1.12-cu116"]
    assert (seed.python, seed.torch, seed.torchvision, seed.cuda) == ("3.8", "1.12.1", "0.13.1",
                                                                     "11.6")
    assert any(e.cuda and e.cuda.startswith("12.") for e in m.environments.values())
    assert any(e.cuda is None for e in m.environments.values())
    assert m.targets["gpu"].device == "cuda" and m.targets["cpu"].device == "cpu"
    assert m.targets["gpu"].label and m.targets["cpu"].price_per_hour > 0
    b = m.benchmark
    assert (b.epochs, b.batch_size, b.repeats) == (5, 256, 3)
    assert b.sweep == {"batch_size": (32, 256)}


def test_a_good_matrix_parses_and_pairs_targets_by_device():
    m = matrix.parse(GOOD)
    assert m.targets_for("a") == ["cpu"] and m.targets_for("g") == ["gpu", "cpu"]
    assert m.benchmark.sweep["amp"] == ("off", "bf16")  # YAML's bare off is not False
    assert m.targets["gpu"].gpu_count == -1 and m.targets["cpu"].gpu_count == 0


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
    (("  cpu: {device: cpu, cpus: 8,", "  cpu: {device: cpu, gpus: 1, cpus: 8,"),
     "targets.cpu: gpus: a cpu target has no GPUs"),
    (("label: \"RTX 3060\", ", ""), "targets.gpu.label: required key is missing"),
    (("  a: {python", "  a: {targets: [gpu], python"),
     "environments.a.targets[0]: target 'gpu' needs CUDA but a is a CPU-only stack"),
    (("  a: {python", "  a: {targets: [tpu], python"),
     "environments.a.targets[0]: unknown target 'tpu'"),
    (("  a: {", "  'a b': {"), "environments: 'a b' is not a valid name"),
])
def test_a_bad_matrix_is_refused_with_the_key_path(change, expected):
    old, new = change
    assert old in GOOD
    found = problems(GOOD.replace(old, new, 1))
    assert any(p.startswith(expected) for p in found), found


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
