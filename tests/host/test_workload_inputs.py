"""A user's workload's inputs (pretrained weights, a data set of one's own): named in the
matrix, found and hashed on the host (each file once per version), mounted read-only where
build() finds them, part of the cell's identity, copied once by digest for Slurm, refused
with their key where they cannot be used."""
from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_matrix import problems
from test_matrix_workloads import CIFAR, HEAD, _arg

from envbench.cells import containerrun, expansion
from envbench.matrix import inputs, models
from envbench.matrix.workloads import resolve_all
from envbench.results import identity
from envbench.slurm import run as slurmrun
from envbench.slurm import staging
from envbench.user_errors import UserError

ROOT = Path(__file__).resolve().parents[2]
WORKLOAD = "def build(ctx):\n    return {}\n"


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    """Each test its own digest cache: what one hashed never answers for another."""
    monkeypatch.setenv("ENVBENCH_CACHE", str(tmp_path / "cache"))


def _weights(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"hidden_size": 8}')
    (folder / "model.safetensors").write_bytes(bytes(range(256)) * 64)
    (folder / "tokenizer").mkdir()
    (folder / "tokenizer" / "vocab.txt").write_text("[PAD]\n[UNK]\nhello\n")
    return folder


def _matrix(here: Path, inputs_text: str) -> models.Matrix:
    here.mkdir(exist_ok=True)
    (here / "ft.py").write_text(WORKLOAD)
    (here / "matrix.yaml").write_text(HEAD + "benchmark:\n  repeats: 1\n  workload: "
                                      "{file: ft.py, inputs: %s}\n" % inputs_text)
    return models.load(here / "matrix.yaml")


def _expected_digest(folder: Path) -> str:
    """The digest as the docs define it, written out here: each file's relative name and
    its bytes' sha256, in name order."""
    sha = hashlib.sha256()
    files = sorted(p for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else [folder]
    for path in sorted(files, key=lambda p: p.relative_to(folder).as_posix()
                       if folder.is_dir() else p.name):
        name = path.relative_to(folder).as_posix() if folder.is_dir() else path.name
        sha.update(name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).hexdigest().encode()
                   + b"\0")
    return sha.hexdigest()


def _prepared(m: models.Matrix, here: Path):
    (cell,) = expansion.expand(m, matrix_dir=here)
    return cell, expansion.prepare(cell, m.targets["cpu"], 2, CIFAR, "sha256:i")


def test_inputs_are_hashed_mounted_read_only_told_to_bench_and_part_of_the_identity(tmp_path):
    weights = _weights(tmp_path / "data" / "bert-small")
    corpus = tmp_path / "data" / "reviews.csv"
    corpus.write_text("text,label\ngood,1\n")
    here = tmp_path / "m"
    m = _matrix(here, "{weights: %s, corpus: ../data/reviews.csv}" % weights)
    cell, p = _prepared(m, here)
    by_name = {given.name: given for given in cell.workload.inputs}
    assert list(by_name) == ["corpus", "weights"]
    assert by_name["weights"].sha256 == _expected_digest(weights)
    assert by_name["corpus"].sha256 == _expected_digest(corpus)
    assert (by_name["weights"].files, by_name["weights"].size) == (3, 16384 + 17 + 19)
    # bench is told where each is, and its digest; the config records both.
    assert p.args.count("--input") == 2
    assert p.config["inputs"] == {
        "corpus": {"path": "/inputs/corpus/reviews.csv", "sha256": by_name["corpus"].sha256},
        "weights": {"path": "/inputs/weights", "sha256": by_name["weights"].sha256}}
    # Mounted read-only where bench looks: the folder itself, a file under its own name.
    options = containerrun.container_options(
        p.args, p.resources, type("Image", (), {"id": "sha256:i", "tags": []})(),
        containerrun.Mounts(tmp_path, tmp_path, None, tmp_path), "cell", tmp_path / "out",
        cell.workload)
    mounts = {mount["Target"]: mount for mount in options["mounts"]}
    assert mounts["/inputs/weights"]["Source"] == str(weights.resolve())
    assert mounts["/inputs/corpus/reviews.csv"]["Source"] == str(corpus.resolve())
    assert all(mounts[t]["ReadOnly"] is True and mounts[t]["Type"] == "bind"
               for t in ("/inputs/weights", "/inputs/corpus/reviews.csv"))
    # The same files: the same measurement.
    _, same = _prepared(m, here)
    assert same.identity == p.identity
    # One changed byte of the weights: another measurement, another result file.
    blob = weights / "model.safetensors"
    data = bytearray(blob.read_bytes())
    data[100] ^= 1
    blob.write_bytes(bytes(data))
    cell2, changed = _prepared(m, here)
    assert changed.identity != p.identity and changed.file_stem != p.file_stem
    assert {g.name: g.sha256 for g in cell2.workload.inputs}["weights"] == \
        _expected_digest(weights)


def test_each_file_is_read_once_per_version_and_a_rewrite_that_keeps_mtime_is_seen(
        tmp_path, monkeypatch):
    weights = _weights(tmp_path / "w")
    read: list[str] = []
    real = inputs._hash_file

    def counting(f, where):
        read.append(f.name)
        return real(f, where)

    monkeypatch.setattr(inputs, "_hash_file", counting)
    m = _matrix(tmp_path / "m", "{weights: %s}" % weights)
    first = resolve_all(m, tmp_path / "m")["ft"].inputs[0]
    assert sorted(read) == ["config.json", "model.safetensors", "tokenizer/vocab.txt"]
    read.clear()
    again = resolve_all(m, tmp_path / "m")["ft"].inputs[0]
    assert read == [] and again.sha256 == first.sha256
    # Other bytes of the same size, the modification time put back (as rsync -a or a
    # careless copy leaves it): the change time moved, so the file is read again.
    blob = weights / "model.safetensors"
    before = blob.stat()
    blob.write_bytes(bytes(reversed(blob.read_bytes())))
    os.utime(blob, ns=(before.st_atime_ns, before.st_mtime_ns))
    third = resolve_all(m, tmp_path / "m")["ft"].inputs[0]
    assert read == ["model.safetensors"] and third.sha256 != first.sha256
    assert third.sha256 == _expected_digest(weights)


def test_a_given_digest_is_checked(tmp_path):
    weights = _weights(tmp_path / "w")
    right = _expected_digest(weights)
    m = _matrix(tmp_path / "m", "{weights: {path: %s, sha256: %s}}" % (weights, right))
    assert resolve_all(m, tmp_path / "m")["ft"].inputs[0].sha256 == right
    wrong = _matrix(tmp_path / "m", "{weights: {path: %s, sha256: '%s'}}" % (weights, "0" * 64))
    with pytest.raises(UserError) as caught:
        resolve_all(wrong, tmp_path / "m")
    assert str(caught.value) == (
        "benchmark.workload.inputs.weights: %s has sha256 %s, not the %s the matrix gives: "
        "these are other files than the ones named; point at the right ones, or give the new "
        "digest" % (weights, right, "0" * 64))


def test_paths_take_variables_and_home(tmp_path, monkeypatch):
    weights = _weights(tmp_path / "home" / "models" / "w")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MODELS", str(tmp_path / "home" / "models"))
    for written in ("~/models/w", "${MODELS}/w", "${NOPE:-%s}" % weights):
        m = _matrix(tmp_path / "m", "{weights: '%s'}" % written)
        assert resolve_all(m, tmp_path / "m")["ft"].inputs[0].path == weights.resolve()


@pytest.mark.parametrize("setup, written, expected", [
    (None, "/nowhere/bert", "benchmark.workload.inputs.weights: /nowhere/bert does not exist"),
    ("empty", "{dir}", "benchmark.workload.inputs.weights: {dir} is an empty folder"),
    ("link", "{dir}", "benchmark.workload.inputs.weights: {dir}/model.bin is a symbolic link: "
                      "its target would not reach the cell"),
    ("fifo", "{dir}", "benchmark.workload.inputs.weights: {dir}/pipe is a FIFO"),
    (None, "${UNSET_INPUT_DIR}/w", "benchmark.workload.inputs.weights.path: ${UNSET_INPUT_DIR} "
                                   "is not set"),
])
def test_an_input_that_cannot_be_used_is_refused_with_its_key(tmp_path, setup, written,
                                                              expected):
    folder = tmp_path / "given"
    if setup is not None:
        folder.mkdir()
    if setup == "link":
        (tmp_path / "blob").write_bytes(b"x")
        (folder / "model.bin").symlink_to(tmp_path / "blob")
    elif setup == "fifo":
        os.mkfifo(folder / "pipe")
    m = _matrix(tmp_path / "m", "{weights: '%s'}" % written.replace("{dir}", str(folder)))
    with pytest.raises(UserError) as caught:
        resolve_all(m, tmp_path / "m")
    assert str(caught.value).startswith(expected.replace("{dir}", str(folder))), str(caught.value)


@pytest.mark.parametrize("workload, expected", [
    ("{name: lenet, inputs: {w: /x}}", "benchmark.workload: inputs: needs file:"),
    ("{file: ft.py, inputs: {'1w': /x}}", "benchmark.workload.inputs.1w"),
    ("{file: ft.py, inputs: {w: {path: /x, sha256: abc}}}",
     "benchmark.workload.inputs.w.sha256"),
    ("{file: ft.py, inputs: {w: {path: /x, size: 3}}}",
     "benchmark.workload.inputs.w.size: unknown key"),
    ("{file: ft.py, inputs: {w: ''}}", "benchmark.workload.inputs.w.path: an empty path"),
])
def test_a_malformed_inputs_entry_is_refused_before_anything_runs(workload, expected):
    found = problems(HEAD + "benchmark:\n  workload: %s\n" % workload)
    assert any(p.startswith(expected) for p in found), found


def test_slurm_copies_an_input_once_by_digest_and_checks_the_copy(tmp_path):
    weights = _weights(tmp_path / "w")
    m = _matrix(tmp_path / "m", "{weights: %s}" % weights)
    given = resolve_all(m, tmp_path / "m")["ft"].inputs[0]
    shared = tmp_path / "shared"
    out = io.StringIO()
    copied = staging.copy_input(given, shared, out)
    assert copied == shared / "inputs" / given.sha256 / staging.FOLDER_LEAF
    assert _expected_digest(copied) == given.sha256 and "copying input weights" in out.getvalue()
    # Copied once: a second cell (or run) uses what lies there.
    out = io.StringIO()
    assert staging.copy_input(given, shared, out) == copied and out.getvalue() == ""
    # --print: the command, nothing written.
    printed = io.StringIO()
    elsewhere = staging.copy_input(given, tmp_path / "other", printed, copy=False)
    assert printed.getvalue().startswith("mkdir -p ") and not elsewhere.exists()
    # A file that changed after the host hashed it: the copy is refused, nothing left behind.
    (weights / "config.json").write_text('{"hidden_size": 9}')
    with pytest.raises(UserError) as caught:
        staging.copy_input(given, tmp_path / "third", io.StringIO())
    assert "it changed while it was copied" in str(caught.value)
    assert not any((tmp_path / "third" / "inputs").iterdir())
    # A file input: its name is part of its digest, and of where it lands.
    table = tmp_path / "table.txt"
    table.write_text("from the login node")
    m = _matrix(tmp_path / "m", "{table: %s}" % table)
    one = resolve_all(m, tmp_path / "m")["ft"].inputs[0]
    landed = staging.copy_input(one, shared, io.StringIO())
    assert landed == shared / "inputs" / one.sha256 / "table.txt"
    assert landed.read_text() == "from the login node"
    assert sorted(p.name for p in (shared / "inputs").iterdir()) == sorted(
        [given.sha256, one.sha256])  # nothing half-copied left beside them
    # The same weights under another folder name: the same digest, the same copy, and the
    # one a job may be reading is never removed.
    (weights / "config.json").write_text('{"hidden_size": 8}')  # as it was hashed
    shutil.copytree(weights, tmp_path / "renamed")
    m = _matrix(tmp_path / "m", "{weights: %s}" % (tmp_path / "renamed"))
    renamed = resolve_all(m, tmp_path / "m")["ft"].inputs[0]
    assert renamed.sha256 == given.sha256
    out = io.StringIO()
    assert staging.copy_input(renamed, shared, out) == copied and out.getvalue() == ""
    # A name Podman's --mount or a src:dst list would split is refused before any copy.
    odd = tmp_path / "reviews,2024.csv"
    odd.write_text("text,label\n")
    m = _matrix(tmp_path / "m", "{table: '%s'}" % odd)
    with pytest.raises(UserError, match="a file name holding ',' or ':'"):
        staging.copy_input(resolve_all(m, tmp_path / "m")["ft"].inputs[0],
                             tmp_path / "fourth", io.StringIO())
    assert not (tmp_path / "fourth").exists()


def test_bench_is_told_nothing_of_inputs_for_a_workload_without_them(tmp_path):
    here = tmp_path / "m"
    here.mkdir()
    (here / "ft.py").write_text(WORKLOAD)
    (here / "matrix.yaml").write_text(HEAD + "benchmark:\n  repeats: 1\n  workload: "
                                      "{file: ft.py}\n")
    m = models.load(here / "matrix.yaml")
    _, p = _prepared(m, here)
    assert "--input" not in p.args and p.config["inputs"] is None
    assert _arg(p.args, "--workload-file") == "/workload/ft.py"


def _check(here: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "envbench", "check", "--matrix",
                           str(here / "matrix.yaml"), "--synthetic"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_check_lists_each_input_with_its_digest_and_refuses_a_missing_one(tmp_path):
    weights = _weights(tmp_path / "w")
    here = tmp_path / "m"
    _matrix(here, "{weights: %s}" % weights)
    env = dict(os.environ, ENVBENCH_CACHE=str(tmp_path / "cache"))
    proc = _check(here, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "workload ft, input weights: %s (16.0 kB in 3 files, sha256 %s)" % (
        weights, _expected_digest(weights)) in proc.stdout.splitlines()
    shutil.rmtree(weights)
    proc = _check(here, env)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "benchmark.workload.inputs.weights: %s does not exist" % weights in proc.stderr


def test_a_file_given_through_a_link_keeps_the_links_name(tmp_path):
    """A hub snapshot's model.safetensors is a link to blobs/<sha>: the cell sees it under
    the name the matrix gave, which readers go by."""
    blob = tmp_path / "blobs" / ("f" * 40)
    blob.parent.mkdir()
    blob.write_bytes(b"weights")
    link = tmp_path / "snapshot" / "model.safetensors"
    link.parent.mkdir()
    link.symlink_to(blob)
    m = _matrix(tmp_path / "m", "{weights: %s}" % link)
    given = resolve_all(m, tmp_path / "m")["ft"].inputs[0]
    assert given.path == blob and given.mount_point == "/inputs/weights/model.safetensors"
    assert given.sha256 == _expected_digest(link)
    # A loop of links is one sentence, not a traceback.
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    m = _matrix(tmp_path / "m", "{weights: %s}" % (tmp_path / "a"))
    with pytest.raises(UserError, match="benchmark.workload.inputs.weights: "):
        resolve_all(m, tmp_path / "m")


def test_a_cell_without_inputs_is_the_measurement_a_record_without_the_key_was(tmp_path):
    """Results written before inputs existed have no config.inputs: the same cell run now
    (inputs None) must find them current, under the same file name."""
    here = tmp_path / "m"
    here.mkdir()
    (here / "ft.py").write_text(WORKLOAD)
    (here / "matrix.yaml").write_text(HEAD + "benchmark:\n  repeats: 1\n  workload: "
                                      "{file: ft.py}\n")
    _, p = _prepared(models.load(here / "matrix.yaml"), here)
    older = {k: v for k, v in p.config.items() if k != "inputs"}
    assert p.config["inputs"] is None
    assert identity.make("e", "cpu", "sha256:i", {}, older, CIFAR, False, 1) == \
        identity.make("e", "cpu", "sha256:i", {}, p.config, CIFAR, False, 1)


SLURM_MATRIX = """
environments:
  e: {python: "3.12", torch: "2.14.1"}
targets:
  hpc: {device: cpu, slurm: {partition: p, time: "00:10:00", shared_dir: %s}}
benchmark:
  epochs: 1
  workload: {file: %s, inputs: {weights: %s}}
"""


@pytest.mark.parametrize("workload,weights,said", [
    ("net:v2.py", "weights.pt", "workload net-v2: a file name holding ',' or ':' (net:v2.py)"),
    ("net.py", "w,1.pt", "input weights: a file name holding ',' or ':' (w,1.pt)"),
])
def test_a_slurm_run_refuses_a_name_its_mounts_would_split_before_anything_runs(
        tmp_path, monkeypatch, workload, weights, said):
    """Podman's --mount and Apptainer's and Pyxis's lists split at ',' and ':': a workload
    or input named with one is refused in one sentence before any preflight, build, copy or
    submission (no Slurm command is reachable here: the refusal must come first)."""
    from envbench.command_options import Options

    (tmp_path / workload).write_text("def build(ctx):\n    return {}\n")
    (tmp_path / weights).write_bytes(b"w")
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(SLURM_MATRIX % (tmp_path / "shared", '"%s"' % workload,
                                      '"%s"' % weights))
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    out = io.StringIO()
    with pytest.raises(UserError) as refused:
        slurmrun.run(Options(matrix_path=matrix), out)
    assert str(refused.value).startswith(said), str(refused.value)
    assert "reads them as separators: rename it" in str(refused.value)
    assert out.getvalue() == "" and not (tmp_path / "shared").exists()
