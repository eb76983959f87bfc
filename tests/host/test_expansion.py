"""Cells: the cross product, the filters, --quick, and bench's command line and config."""
from __future__ import annotations

import pytest
from test_matrix import GOOD

from bench import result
from envbench.cells import expansion, matrixrun
from envbench.command_options import Options
from envbench.matrix import models
from envbench.results.identity import SYNTHETIC, DataIdentity
from envbench.user_errors import UserError


@pytest.fixture
def m() -> models.Matrix:
    return models.parse(GOOD)


def test_cells_are_envs_times_compatible_targets_times_sweep_times_repeats(m):
    all_cells = expansion.expand(m)
    # a: cpu only; g: gpu + cpu -> 3 pairs x 4 sweep points x 3 repeats
    assert len(all_cells) == 3 * 4 * 3 == m.cell_count()
    stems = {expansion.prepare(c, m.targets[c.target], 2, SYNTHETIC, "sha256:x").file_stem
             for c in all_cells}
    assert len(stems) == len(all_cells)
    assert {c.target for c in all_cells if c.environment == "a"} == {"cpu"}
    variants = {tuple(sorted(c.variant.items())) for c in all_cells}
    assert (("amp", "bf16"), ("batch_size", 32)) in variants


def test_filters_and_quick(m):
    assert {c.target for c in expansion.expand(m, kind="cuda")} == {"gpu"}
    only = expansion.expand(m, envs=["g"], targets=["cpu"])
    assert {(c.environment, c.target) for c in only} == {("g", "cpu")}
    quick = expansion.expand(m, quick=True)
    assert len(quick) == 3 * 4 and all(c.settings["epochs"] == 1 and c.quick for c in quick)
    with pytest.raises(UserError, match="unknown environment nope"):
        expansion.expand(m, envs=["nope"])


def test_bench_args_carry_the_cell_settings_and_the_planned_threads(m):
    cell = next(c for c in expansion.expand(m) if c.variant == {"batch_size": 32, "amp": "bf16"}
                and c.target == "gpu")
    p = expansion.prepare(cell, m.targets["gpu"], 4, DataIdentity("cifar10", "a" * 64),
                      "sha256:x")
    args = p.command()
    assert args[:2] == ["--device", "cuda"]
    assert args[args.index("--batch-size") + 1] == "32"
    assert args[args.index("--amp") + 1] == "bf16"
    assert args[args.index("--data") + 1] == "/data"
    assert args[args.index("--threads") + 1] == "4"  # the host's cores: the target sets none
    assert args[-2:] == ["--out", "/results/%s.json" % p.file_stem]
    cpu_cell = next(c for c in expansion.expand(m) if c.target == "cpu")
    synthetic = expansion.prepare(cpu_cell, m.targets["cpu"], 32, SYNTHETIC, "sha256:x")
    assert "--synthetic" in synthetic.args
    assert synthetic.args[synthetic.args.index("--threads") + 1] == "8"  # cpus: 8


def test_the_host_knows_the_config_bench_will_record(m):
    """bench's own parser turns the command line into the config section: every required
    key is there, with the values the cell asked for."""
    cell = expansion.expand(m)[0]
    p = expansion.prepare(cell, m.targets[cell.target], 2, SYNTHETIC, None)
    assert set(result.REQUIRED["config"]) <= set(p.config)
    assert p.config["batch_size"] == cell.settings["batch_size"]
    assert p.config["threads"] == p.resources.threads == 2
    assert p.config["synthetic"] is True and p.config["data"] is None


EVERY_OPTION = """
environments:
  e: {python: "3.11", torch: "2.13.0"}
targets:
  cpu: {device: cpu, cpus: 3, label: c, price_per_hour: 0}
benchmark:
  epochs: 7
  batch_size: 48
  pipeline: resident
  workers: 5
  amp: bf16
  compile: default
  accumulate: 3
  seed: 11
  model: lenet-dws
  quantize_eval: dynamic
  limit: 900
  limit_test: 300
  pin_memory: "on"
  non_blocking: "off"
  channels_last: true
  deterministic: true
  profile: true
  probe: false
  nproc: 2
  repeats: 2
  sweep: {parallel: [none, ddp]}
"""


def test_every_setting_reaches_bench_in_one_exact_command_line():
    """Written out by hand from the matrix above: each option once, with its own value; nproc
    only where a parallel mode uses it; the flags only when true."""
    m = models.parse(EVERY_OPTION)
    cells = expansion.expand(m)
    assert [(c.variant, c.repeat) for c in cells] == [
        ({"parallel": "none"}, 0), ({"parallel": "none"}, 1),
        ({"parallel": "ddp"}, 0), ({"parallel": "ddp"}, 1)]
    common = ["--device", "cpu", "--epochs", "7", "--batch-size", "48", "--pipeline",
              "resident", "--workers", "5", "--amp", "bf16", "--compile", "default",
              "--accumulate", "3", "--seed", "11", "--threads", "3", "--workload", "lenet-dws"]
    data = DataIdentity("cifar10", "a" * 64)
    none, ddp = (expansion.prepare(cells[i], m.targets["cpu"], 16, data, None) for i in (0, 2))
    tail = ["--quantize-eval", "dynamic", "--data", "/data", "--limit", "900", "--limit-test",
            "300", "--pin-memory", "on", "--non-blocking", "off"]
    assert none.args == common + ["--parallel", "none"] + tail + [
        "--channels-last", "--deterministic", "--profile", "--probe", "off"]
    # --threads is the cell's total (bench divides it between the ranks).
    assert ddp.args == common + ["--parallel", "ddp"] + tail + [
        "--nproc", "2", "--channels-last", "--deterministic", "--profile", "--probe", "off"]
    assert none.command() == none.args + ["--out", "/results/%s.json" % none.file_stem]
    # What bench will record for them, by bench's own parser.
    assert (none.config["nproc"], ddp.config["nproc"]) == (None, 2)
    assert (ddp.config["limit"], ddp.config["limit_test"], ddp.config["channels_last"],
            ddp.config["deterministic"], ddp.config["pin_memory"]) == (900, 300, True, True,
                                                                      "on")
    assert (ddp.config["profile"], ddp.config["probe"]) == (True, "off")
    assert none.identity.repeat == 0 and none.identity.data == data


def test_defaults_leave_optional_flags_out():
    m = models.parse(EVERY_OPTION.split("  epochs: 7")[0] + "  repeats: 1\n")
    (cell,) = expansion.expand(m)
    args = expansion.prepare(cell, m.targets["cpu"], 16, SYNTHETIC, None).args
    assert args == ["--device", "cpu", "--epochs", "5", "--batch-size", "256", "--pipeline",
                    "classic", "--workers", "2", "--amp", "off", "--compile", "off",
                    "--accumulate", "1", "--seed", "0", "--threads", "3", "--workload", "lenet",
                    "--parallel", "none", "--quantize-eval", "off", "--synthetic"]


def test_cells_come_in_matrix_order_with_sweep_and_repeats_innermost(m):
    cells = expansion.expand(m)
    assert [(c.environment, c.target) for c in cells[::12]] == [("a", "cpu"), ("g", "gpu"),
                                                                ("g", "cpu")]
    assert [(c.variant, c.repeat) for c in cells[:12:3]] == [
        ({"batch_size": 32, "amp": "off"}, 0), ({"batch_size": 32, "amp": "bf16"}, 0),
        ({"batch_size": 256, "amp": "off"}, 0), ({"batch_size": 256, "amp": "bf16"}, 0)]
    assert [c.repeat for c in cells[:3]] == [0, 1, 2]
    # Each cell's settings: the benchmark's, with its own sweep point on top.
    first = cells[0]
    assert first.settings["epochs"] == 2 and first.settings["batch_size"] == 32
    assert set(first.settings) == set(models.Settings.model_fields)
    assert not first.quick


def test_filters_combine_and_unknown_names_list_what_the_matrix_has(m):
    assert {(c.environment, c.target) for c in expansion.expand(m, targets=["gpu"])} == {
        ("g", "gpu")}
    assert expansion.expand(m, envs=["a"], kind="cuda") == []
    assert {(c.environment, c.target) for c in expansion.expand(m, kind="cpu")} == {
        ("a", "cpu"), ("g", "cpu")}
    with pytest.raises(UserError) as caught:
        expansion.expand(m, envs=["zz", "nope", "a"])
    assert str(caught.value) == "unknown environment nope, zz (the matrix has: a, g)"
    with pytest.raises(UserError) as caught:
        expansion.expand(m, targets=["tpu"])
    assert str(caught.value) == "unknown target tpu (the matrix has: gpu, cpu)"


def test_quick_is_one_short_epoch_of_a_small_subset(m):
    quick = expansion.expand(m, quick=True)
    assert {c.repeat for c in quick} == {0}
    assert all((c.settings["epochs"], c.settings["limit"], c.settings["limit_test"])
               == (1, 5000, 1000) and "repeats" not in c.settings for c in quick)


def test_a_cells_label_says_what_it_runs(m):
    cells = expansion.expand(m, envs=["g"], targets=["gpu"])
    assert cells[4].label == "g × gpu × amp=bf16 batch_size=32 (repeat 2)"
    quick = expansion.expand(m, envs=["a"], quick=True)[0]
    assert quick.label == "a × cpu × amp=off batch_size=32 (quick) (repeat 1)"
    unswept = EVERY_OPTION.replace("  sweep: {parallel: [none, ddp]}\n", "")
    # A workload other than LeNet is named even where it is not swept: it is what runs.
    assert expansion.expand(models.parse(unswept))[1].label == \
        "e × cpu × workload=lenet-dws (repeat 2)"
    plain = expansion.expand(models.parse(unswept.replace("  model: lenet-dws\n", "")))[1]
    assert plain.label == "e × cpu (repeat 2)"


def test_a_cells_resources_follow_the_matrixs_threads_and_its_parallel_mode():
    """The plan gets the cell's own threads (the matrix's, not derived from the target) and
    its parallel mode (gpus: all trains on one GPU without dp/ddp, so one is attached)."""
    m = models.parse(GOOD.replace("benchmark: {epochs: 2,",
                                  "benchmark: {epochs: 2, threads: 3, nproc: 2,")
                     .replace("amp: [off, bf16]", "parallel: [none, ddp]"))
    cells = {(c.target, c.variant["parallel"]): c for c in expansion.expand(m, envs=["g"])}
    cpu = expansion.prepare(cells[("cpu", "none")], m.targets["cpu"], 16, SYNTHETIC, None)
    assert (cpu.resources.threads, cpu.resources.threads_from) == (3, "matrix")
    assert cpu.args[cpu.args.index("--threads") + 1] == "3"
    gpus = {mode: expansion.prepare(cells[("gpu", mode)], m.targets["gpu"], 16, SYNTHETIC,
                                    None).resources.gpus for mode in ("none", "ddp")}
    assert gpus == {"none": 1, "ddp": "all"}


def _written(tmp_path, text: str):
    path = tmp_path / "matrix.yaml"
    path.write_text(text)
    return path


def test_a_gpu_target_without_a_cuda_stack_says_which_stacks_lack_a_cuda_build(tmp_path):
    path = _written(tmp_path, 'environments:\n  a: {python: "3.11", torch: "2.13.0"}\n'
                    '  b: {python: "3.12", torch: "2.14.1"}\n'
                    "targets:\n  h100: {device: cuda, gpus: all}\n"
                    "  cpu: {device: cpu}\n")
    with pytest.raises(UserError) as refused:
        matrixrun.select_cells(Options(matrix_path=path, targets=("h100",)))
    assert str(refused.value) == (
        "no cells match (kind=any, env=any, target=h100) in %s: h100 is a GPU, and a, b are "
        "CPU builds (no cuda:); give a stack a cuda: version (docs/stacks.md), or ask for a "
        "CPU target" % path)
    # Asked for a CPU target, the reason does not apply and is not given.
    with pytest.raises(UserError, match=r"in \S+matrix.yaml$"):
        matrixrun.select_cells(Options(matrix_path=path, targets=("cpu",), kind="cuda"))


def test_a_run_here_of_a_slurm_only_matrix_says_where_its_cells_run(tmp_path):
    path = _written(tmp_path, 'environments:\n  a: {python: "3.11", torch: "2.13.0"}\n'
                    "targets:\n  hpc:\n    device: cpu\n"
                    "    slurm: {partition: batch, time: \"01:00:00\", runtime: podman, "
                    "shared_dir: /shared/envbench}\n")
    with pytest.raises(UserError) as refused:
        matrixrun.plan_cells(Options(matrix_path=path))
    assert str(refused.value) == (
        "none of the asked cells of %s runs in this machine's engine: they are on Slurm "
        "targets (./noxw -s slurm runs them)" % path)
    assert len(matrixrun.select_cells(Options(matrix_path=path)).slurm) == 3


def test_the_kit_pins_a_cells_cores_and_leaves_a_slurm_cells_to_slurm():
    """A cpus quota on this machine's engine names the first cores (cpuset); on Slurm the
    job's cores are Slurm's to bind, so the cell names none."""
    m = models.parse('environments:\n  a: {python: "3.11", torch: "2.13.0"}\n'
                     "targets:\n  here: {device: cpu, cpus: 2}\n"
                     "  hpc:\n    device: cpu\n    cpus: 2\n"
                     '    slurm: {partition: batch, time: "01:00:00", shared_dir: /s}\n'
                     "benchmark: {epochs: 1, repeats: 1}\n")
    cells = {c.target: c for c in expansion.expand(m)}
    here = expansion.prepare(cells["here"], m.targets["here"], 8, SYNTHETIC, None)
    hpc = expansion.prepare(cells["hpc"], m.targets["hpc"], 8, SYNTHETIC, None)
    assert here.resources.cpuset == "0-1" and here.resources.cpus == 2
    assert hpc.resources.cpuset is None and hpc.resources.cpus == 2


def test_a_workload_file_without_the_matrixs_folder_is_refused(tmp_path):
    (tmp_path / "mine.py").write_text("def build(ctx):\n    return {}\n")
    (tmp_path / "matrix.yaml").write_text(
        'environments:\n  a: {python: "3.11", torch: "2.13.0"}\n'
        "targets:\n  cpu: {device: cpu}\nbenchmark: {workload: {file: mine.py}}\n")
    m = models.load(tmp_path / "matrix.yaml")
    with pytest.raises(UserError) as refused:
        expansion.expand(m)
    assert str(refused.value) == \
        "the matrix names a workload file, but not where the matrix is"
    assert {c.workload.name for c in expansion.expand(m, matrix_dir=tmp_path)} == {"mine"}
