"""Workloads in the matrix: names and entries, the user's own file (found, checked, hashed,
mounted), each cell's batch size and limits, and what bench is told."""
from __future__ import annotations

from pathlib import Path

import pytest
from test_matrix import problems

from bench import workloads as catalog
from envbench.cells import containerrun, expansion
from envbench.matrix import models
from envbench.matrix.workloads import resolve_all
from envbench.results.identity import SYNTHETIC, DataIdentity
from envbench.user_errors import UserError

HEAD = """
environments:
  e: {python: "3.12", torch: "2.14.1"}
targets:
  cpu: {device: cpu, cpus: 2}
"""
CIFAR = DataIdentity("cifar10", "c" * 64)


def matrix(benchmark: str) -> models.Matrix:
    return models.parse(HEAD + "benchmark:\n" + benchmark)


def _arg(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


def test_a_swept_workload_is_named_in_the_variant_and_each_gets_its_own_batch():
    """The batch size: the sweep's, else the workload entry's, else benchmark.batch_size
    where the matrix writes it, else the workload's own default."""
    m = matrix("  repeats: 1\n  sweep:\n    workload: [lenet, resnet18-cifar, "
               "{name: resnet50, batch_size: 16, limit: 64}, gpt-tiny]\n")
    cells = {c.variant["workload"]: c for c in expansion.expand(m)}
    assert list(cells) == ["lenet", "resnet18-cifar", "resnet50", "gpt-tiny"]
    batches = {name: c.settings["batch_size"] for name, c in cells.items()}
    assert batches == {"lenet": 256, "resnet18-cifar": 128, "resnet50": 16, "gpt-tiny": 32}
    assert cells["resnet50"].settings["limit"] == 64 and cells["lenet"].settings["limit"] is None
    given = matrix("  repeats: 1\n  batch_size: 8\n  sweep:\n    workload: [lenet, "
                   "{name: resnet50, batch_size: 16}]\n")
    assert [c.settings["batch_size"] for c in expansion.expand(given)] == [8, 16]
    swept = matrix("  repeats: 1\n  sweep:\n    workload: [lenet, gpt-tiny]\n"
                   "    batch_size: [4, 8]\n")
    assert [(c.variant["workload"], c.settings["batch_size"])
            for c in expansion.expand(swept)] == [("lenet", 4), ("lenet", 8), ("gpt-tiny", 4),
                                                  ("gpt-tiny", 8)]


def test_what_bench_is_told_for_each_kind_of_workload():
    m = matrix("  repeats: 1\n  sweep:\n    workload: [lenet-gap, resnet50]\n")
    gap, r50 = expansion.expand(m)
    p = expansion.prepare(gap, m.targets["cpu"], 2, CIFAR, None)
    assert _arg(p.args, "--workload") == "lenet-gap" and _arg(p.args, "--data") == "/data"
    assert p.config["workload"] == "lenet-gap" and p.config["workload_file"] is None
    assert p.identity.data == CIFAR
    # resnet50 has no data set to be given: synthetic in every run, and so is its identity.
    q = expansion.prepare(r50, m.targets["cpu"], 2, CIFAR, None)
    assert _arg(q.args, "--workload") == "resnet50" and "--synthetic" in q.args
    assert "--data" not in q.args and q.identity.data == SYNTHETIC
    assert q.config["lr"] == pytest.approx(0.1 * 64 / 256)  # scaled to its batch


def test_the_old_model_key_reads_as_workload():
    m = matrix("  repeats: 1\n  model: lenet-dws\n")
    assert m.benchmark.workload.label == "lenet-dws"
    swept = matrix("  repeats: 1\n  sweep: {model: [lenet, lenet-gap]}\n")
    assert [c.variant for c in expansion.expand(swept)] == [{"workload": "lenet"},
                                                            {"workload": "lenet-gap"}]


@pytest.mark.parametrize("benchmark, expected", [
    ("  workload: resnet5\n", "benchmark.workload: unknown workload 'resnet5' (built in: "
                              + ", ".join(catalog.NAMES)),
    ("  sweep: {workload: [lenet, vgg]}\n", "benchmark.sweep.workload: 'vgg': unknown workload"),
    ("  workload: {name: lenet, function: make}\n",
     "benchmark.workload: function: needs file:"),
    ("  workload: {file: /etc/mine.py}\n", "benchmark.workload: file: '/etc/mine.py': a path "
                                          "relative to the matrix's folder"),
    ("  workload: {file: '${HOME}/x.py'}\n", "benchmark.workload: file: '${HOME}/x.py': a path"),
    ("  workload: {file: w/lenet.py}\n", "benchmark.workload: name: 'lenet' is a built-in"),
    ("  workload: {file: w.py, function: '1x'}\n", "benchmark.workload.function: '1x'"),
    ("  workload: {file: w.py, colour: red}\n", "benchmark.workload.colour: unknown key"),
    ("  sweep: {workload: [{file: a/w.py}, {file: b/w.py}]}\n",
     "benchmark.sweep.workload: two workloads are named w (give one a name:)"),
    ("  sweep: {workload: [{name: lenet, batch_size: 8}], batch_size: [4]}\n",
     "benchmark: sweep.batch_size and a batch_size of workload lenet: give one"),
    ("  model: lenet\n  workload: lenet\n", "benchmark: model: and workload: both given"),
    ("  sweep: {model: [lenet], workload: [lenet]}\n", "benchmark.sweep.model: and workload: "
                                                       "both swept"),
    ("  workload: {name: resnet50, batch_size: 0}\n", "benchmark.workload.batch_size: 0"),
])
def test_a_bad_workload_is_refused_with_its_key(benchmark, expected):
    found = problems(HEAD + "benchmark:\n" + benchmark)
    assert any(p.startswith(expected) for p in found), found


@pytest.mark.parametrize("packages, expected", [
    ('["einops==0.8.2", "timm>=1.0,<2", "rich[jupyter]"]', None),
    ('["https://example.org/x.whl"]', "is not a package requirement"),
    ('["--index-url=https://evil.example"]', "is not a package requirement"),
    ('["pkg; python_version<\'3.9\'"]', "is not a package requirement"),
    ('["./local/folder"]', "is not a package requirement"),
    ('["Torch==2.0"]', "Torch is the stack's own"),
    ('["numpy"]', "numpy is the stack's own"),
])
def test_packages_are_requirements_not_urls_options_or_the_stack(packages, expected):
    text = HEAD.replace('torch: "2.14.1"}', 'torch: "2.14.1", packages: %s}' % packages)
    if expected is None:
        assert models.parse(text).environments["e"].packages[0] == "einops==0.8.2"
        return
    found = problems(text)
    assert any(p.startswith("environments.e.packages: ") and expected in p for p in found), found


def test_a_debian_stack_takes_no_pip_packages():
    text = HEAD.replace('e: {python: "3.12", torch: "2.14.1"}',
                        'd: {source: debian, packages: [einops]}')
    assert any("a Debian stack installs Debian's packages" in p for p in problems(text))


def _user_matrix(tmp_path: Path, entry: str, extra: str = "") -> models.Matrix:
    (tmp_path / "matrix.yaml").write_text(HEAD + "benchmark:\n  repeats: 1\n" + extra
                                          + "  workload: %s\n" % entry)
    return models.load(tmp_path / "matrix.yaml")


def test_a_users_workload_is_hashed_mounted_read_only_and_part_of_the_identity(tmp_path):
    folder = tmp_path / "workloads" / "vit"
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("def make(ctx):\n    return {}\n")
    m = _user_matrix(tmp_path, "{file: workloads/vit, function: make, batch_size: 64}")
    (cell,) = expansion.expand(m, matrix_dir=tmp_path)
    assert cell.variant == {} and cell.workload.name == "vit"
    assert cell.workload.sha256 == catalog.digest(str(folder))
    p = expansion.prepare(cell, m.targets["cpu"], 2, CIFAR, "sha256:i")
    assert p.args[p.args.index("--workload"):p.args.index("--workload") + 8] == [
        "--workload", "vit", "--workload-file", "/workload/vit", "--workload-function", "make",
        "--workload-sha256", cell.workload.sha256]
    assert _arg(p.args, "--batch-size") == "64" and _arg(p.args, "--data") == "/data"
    assert p.config["workload_sha256"] == cell.workload.sha256
    # Mounted read-only where bench looks for it; nothing else of the host.
    options = containerrun.container_options(
        p.args, p.resources, type("Image", (), {"id": "sha256:i", "tags": []})(),
        containerrun.Mounts(tmp_path, tmp_path, None, tmp_path), "cell", tmp_path / "out",
        cell.workload)
    (mount,) = [m for m in options["mounts"] if m["Source"] == str(folder.resolve())]
    assert mount["Target"] == "/workload/vit" and mount["ReadOnly"] is True
    assert mount["Type"] == "bind" and "volumes" not in options
    # Changed code is another measurement, with another result file.
    (folder / "model.py").write_text("# a new layer\n")
    (again,) = expansion.expand(m, matrix_dir=tmp_path)
    q = expansion.prepare(again, m.targets["cpu"], 2, CIFAR, "sha256:i")
    assert q.identity != p.identity and q.file_stem != p.file_stem


@pytest.mark.parametrize("setup, entry, expected", [
    (None, "{file: nope.py}", "benchmark.workload.file: nope.py does not exist"),
    ("outside", "{file: ../outside.py}", "benchmark.workload.file: ../outside.py lies outside "
                                         "the matrix's folder"),
    ("folder", "{file: pkg}", "benchmark.workload.file: pkg is a folder without __init__.py"),
    ("text", "{file: notes.txt}", "benchmark.workload.file: notes.txt is not a .py file"),
    ("link", "{file: link.py}", "benchmark.workload.file: link.py is a symbolic link"),
    ("inner-link", "{file: pkg}", "benchmark.workload.file: secret: a symbolic link inside"),
])
def test_a_users_workload_that_cannot_be_mounted_is_refused_before_anything_runs(
        tmp_path, setup, entry, expected):
    here = tmp_path / "m"
    here.mkdir()
    if setup == "outside":
        (tmp_path / "outside.py").write_text("def build(ctx): pass\n")
    elif setup in ("folder", "inner-link"):
        (here / "pkg").mkdir()
        if setup == "inner-link":
            (here / "pkg" / "__init__.py").write_text("")
            (here / "pkg" / "secret").symlink_to("/etc/shadow")
    elif setup == "text":
        (here / "notes.txt").write_text("")
    elif setup == "link":
        (tmp_path / "real.py").write_text("")
        (here / "link.py").symlink_to(tmp_path / "real.py")
    m = _user_matrix(here, entry)
    with pytest.raises(UserError) as caught:
        resolve_all(m, here)
    assert str(caught.value).startswith(expected), str(caught.value)


def test_quick_takes_each_workloads_own_short_limits():
    m = matrix("  repeats: 2\n  limit: 100\n  sweep:\n    workload: [lenet, resnet50, "
               "gpt2-small]\n")
    limits = {c.variant["workload"]: (c.settings["limit"], c.settings["limit_test"])
              for c in expansion.expand(m, quick=True)}
    # A smaller limit of the matrix's stands; else the workload's quick limits.
    assert limits == {"lenet": (100, 1000), "resnet50": (100, 64), "gpt2-small": (32, 8)}


def test_the_example_matrix_runs_the_builtin_workloads_beside_every_example():
    root = Path(__file__).resolve().parents[2] / "examples"
    m = models.load(root / "matrix.yaml")
    plans = resolve_all(m, root)
    examples = {"vit": "vit", "regression": "regression.py", "gru-tokens": "gru-tokens",
                "hf-bert": "hf-bert", "timm-resnet": "timm-resnet"}
    assert set(plans) >= {"lenet", "resnet50", "gpt2-small"} | set(examples)
    for name, path in examples.items():
        assert plans[name].sha256 == catalog.digest(str(root / path)), name
    # What the examples import, declared on every stack that runs them.
    assert all(e.packages == ("einops==0.8.2", "transformers==5.25.0", "timm==1.0.31")
               for e in m.environments.values())
    cells = expansion.expand(m, matrix_dir=root)
    assert {c.variant["workload"] for c in cells} == set(plans)
