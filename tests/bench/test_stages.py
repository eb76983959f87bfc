"""bench.train's stages, each called alone in this process: setup and build give the parts,
the train step trains with them, an epoch fills its entry, and each after-run measurement adds
its own section and nothing else."""
from __future__ import annotations

import copy

import torch

from bench import parallel, result, train
from bench.options import parse_config
from bench.timing import NoClock

ARGS = ["--device", "cpu", "--synthetic", "--pipeline", "resident", "--epochs", "2",
        "--limit", "128", "--limit-test", "64", "--batch-size", "32", "--probe", "off"]


def _built(*extra: str):
    _, config = parse_config(ARGS + ["--out", "unwritten.json"] + list(extra))
    record = result.new_record(config)
    run = train.setup(config, record, parallel.plan(config), None)
    train.build(run, record)
    run.micro_step = train.train_step(run)
    return run, record


def test_the_train_step_steps_the_optimizer_once_per_accumulation_group():
    run, _ = _built("--accumulate", "2")
    inputs, targets = next(iter(run.pipeline.train_batches(0)))
    before = [p.detach().clone() for p in run.net.parameters()]
    loss_sum = torch.zeros(())
    run.micro_step(inputs, targets, 0, NoClock(), loss_sum)
    # The first of a group of two: gradients kept, no step.
    assert all(torch.equal(a, b) for a, b in zip(before, run.net.parameters()))
    assert all(p.grad is not None for p in run.net.parameters())
    sync, dtype = run.micro_step(inputs, targets, 1, NoClock(), loss_sum)
    assert sync and dtype == torch.float32 and float(loss_sum) > 0
    assert not all(torch.equal(a, b) for a, b in zip(before, run.net.parameters()))
    assert all(p.grad is None for p in run.net.parameters())  # zeroed, set to None


def test_an_epoch_adds_its_entry_and_the_after_run_measurements_each_add_their_section():
    run, record = _built()
    train.train_epoch(run, record, 0)
    (entry,) = record["epochs"]
    assert entry["samples"] == 128 and set(entry["phases_s"]) == set(result.PHASES)
    assert run.forward_dtype == "float32"
    added = []
    for measure in train.AFTER_RUN:
        before = copy.deepcopy(record)
        measure(run, record)
        added.append((measure.__name__, sorted(k for k in record if record[k] != before.get(k))))
    assert added == [("device_peaks", []), ("quantized_eval", []), ("memory_section", ["memory"]),
                     ("summary_section", ["summary"]), ("model_section", ["model"]),
                     ("saved_weights", []), ("profile_section", []),
                     ("clock_section", ["clock"]), ("probe_section", [])]
    assert record["summary"]["weights_sha256"] == train.weights_sha256(run.net)
    assert record["summary"]["epoch_s_median"] == entry["wall_s"]  # the only epoch
