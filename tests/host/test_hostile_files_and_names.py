"""Hostile files and names: compare's gate cannot be bent, no small input costs minutes or
gigabytes, a finished result is never lost, names cannot impersonate, and a parse error is
one sentence. Every case runs on real files (and a real small file system where the disk
must be full)."""
from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from report_fixture import make_record

from bench import result
from envbench.results import store
from envbench.user_errors import UserError

ROOT = Path(__file__).resolve().parents[2]


def envbench(*args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "envbench", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, **env))


def a_run(folder: Path, seed: int = 1) -> Path:
    rng = random.Random(seed)
    for repeat in range(3):
        result.write_atomic(str(folder / ("r%d.json" % repeat)),
                            make_record("a", "cpu", 256, repeat, rng))
    return folder


# --- compare's gate -------------------------------------------------------------------

@pytest.mark.parametrize("value", ["-1", "0", "1.5", "nan"])
def test_a_target_accuracy_outside_its_range_is_refused(tmp_path, value):
    run = a_run(tmp_path / "run")
    proc = envbench("report", run, "--target-accuracy=" + value, "--out", tmp_path / "o")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "is not a fraction above 0 and up to 1" in proc.stderr, proc.stderr
    assert not (tmp_path / "o").exists()


def test_a_walk_of_the_machine_is_refused_not_read(tmp_path):
    old = a_run(tmp_path / "old")
    for root in ("/proc", "/sys/class"):
        proc = envbench("compare", old, root, timeout=60)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr
        assert "is the kernel's view of the machine, not a folder of results" in proc.stderr
    started = time.perf_counter()
    proc = envbench("compare", old, "/", timeout=120)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "/ holds more than 200000 entries: give the folder of results" in proc.stderr
    assert time.perf_counter() - started < 90


def test_the_walk_is_bounded_by_its_entries(tmp_path, monkeypatch):
    monkeypatch.setattr(store, "MAX_ENTRIES", 50)
    for i in range(60):
        (tmp_path / ("f%d.txt" % i)).write_text("")
    with pytest.raises(UserError, match="holds more than 50 entries"):
        store.result_files([tmp_path])


def test_a_report_over_folders_that_come_and_go_reads_what_stays(tmp_path, monkeypatch):
    """A run's `.cells/cell-*` folders appear and vanish while the report walks the reports
    folder; a folder that vanishes mid-walk is skipped, `.cells` is never entered."""
    reports = tmp_path / "reports"
    a_run(reports / "results")
    churn = reports / ".cells"
    stop = threading.Event()

    def come_and_go() -> None:
        n = 0
        while not stop.is_set():
            folder = churn / ("cell-%d" % n)
            (folder / "deep").mkdir(parents=True, exist_ok=True)
            result.write_atomic(str(folder / "deep" / "x.json"), {"partial": True})
            shutil.rmtree(folder, ignore_errors=True)
            n += 1

    worker = threading.Thread(target=come_and_go)
    worker.start()
    try:
        for _ in range(20):
            loaded, skipped = store.load_all([reports])
            assert len(loaded) == 3 and skipped == []
    finally:
        stop.set()
        worker.join()
    # And a folder that vanishes while it is walked (not .cells): skipped, no traceback.
    other = reports / "scratch"
    paths = []
    for i in range(200):
        paths.append(other / ("d%d" % i))
        paths[-1].mkdir(parents=True)
    original_walk = os.walk

    def walk_that_loses_folders(top, *args, **kwargs):
        for root, dirs, names in original_walk(top, *args, **kwargs):
            if Path(root) == reports:
                shutil.rmtree(other)
            yield root, dirs, names
    monkeypatch.setattr(os, "walk", walk_that_loses_folders)
    loaded, _ = store.load_all([reports])
    assert len(loaded) == 3 and not other.exists()


# --- a finished result, a report, never lost ---------------------------------------------

@pytest.fixture
def small_disk(tmp_path):
    """A real file system of 256 kB (a tmpfs): room for one report, then filled."""
    if os.getuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
                   check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def fill(folder: Path) -> None:
    with (folder / "filler").open("wb", buffering=0) as f:
        try:
            while f.write(b"\0" * 4096):
                pass
        except OSError:
            pass


def test_a_report_onto_a_full_disk_is_one_sentence_and_the_old_report_stays_whole(
        tmp_path, small_disk):
    run = a_run(tmp_path / "run")
    out = small_disk / "report"
    first = envbench("report", run, "--out", out)
    assert first.returncode == 0, first.stderr
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert set(before) == {"index.html", "summary.md", "results.csv"}
    fill(small_disk)
    again = envbench("report", run, "--out", out, "--baseline", "cpu")
    assert again.returncode == 1 and "Traceback" not in again.stderr, again.stderr
    (line,) = again.stderr.strip().splitlines()
    assert line.startswith("error: no space left to write the report into %s (0.0 MB free "
                           "there): the files already there are as they were" % out), line
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # no temporary left
    cmp = envbench("compare", run, run, "--out", small_disk / "cmp")
    assert cmp.returncode == 1 and "no space left to write the comparison" in cmp.stderr


def test_out_naming_a_file_is_one_sentence(tmp_path):
    run = a_run(tmp_path / "run")
    (tmp_path / "a-file").write_text("mine\n")
    for verb in (("report", run), ("compare", run, run)):
        proc = envbench(*verb, "--out", tmp_path / "a-file")
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert "%s is a file, not a folder" % (tmp_path / "a-file") in proc.stderr
    assert (tmp_path / "a-file").read_text() == "mine\n"


def test_out_where_nothing_can_be_written_is_one_sentence(tmp_path):
    run = a_run(tmp_path / "run")
    for verb in (("report", run), ("compare", run, run)):
        proc = envbench(*verb, "--out", "/proc/1/nope")
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert "cannot write the " in proc.stderr and "into /proc/1/nope (" in proc.stderr


# --- small inputs that cost minutes or gigabytes; parse errors in one sentence ------------

def _matrix(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


def _laughs() -> str:
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for i in range(1, 9):
        lines.append("a%d: &a%d [%s]" % (i, i, ", ".join(["*a%d" % (i - 1)] * 9)))
    return "\n".join(lines) + "\nenvironments: *a8\ntargets: {cpu: {device: cpu}}\n"


GOOD_ENV = "environments:\n  a: {torch: '2.13.0'}\n"
HOSTILE_MATRICES = {
    "aliases.yaml": (_laughs(), "not valid YAML (its aliases expand to more than 100000 "
                                "values)"),
    "deep.yaml": ("environments: " + "[" * 5000 + "]" * 5000 + "\n",
                  "not valid YAML (nested more than 50 levels deep)"),
    "listkey.yaml": ("environments:\n  ? [a, b]\n  : {torch: '2.13.0'}\n",
                     "line 2, column 5: not valid YAML (a key must be a name, not a list)"),
    "latin1.yaml": ("environments:\n  caf\xe9: {torch: '2.13.0'}\n".encode("latin-1"),
                    "cannot be read as a matrix: not UTF-8 text (byte 0xe9 at line 2, "
                    "column 6; Latin-1 or another encoding?): save it as UTF-8"),
    "utf16.yaml": (GOOD_ENV.encode("utf-16"), "cannot be read as a matrix: UTF-16 text: save "
                                               "it as UTF-8"),
    "bigint.yaml": (GOOD_ENV + "targets: {cpu: {device: cpu, cpus: %s}}\n" % ("9" * 5000),
                    "not valid YAML (a number of 5000 characters"),
    "cpuset-huge.yaml": (GOOD_ENV + "targets: {cpu: {device: cpu, cpuset: "
                                    "'0-99999999999999999999'}}\n",
                         "targets.cpu.cpuset: CPU '0-99999999999999999999' is past the largest "
                         "Linux numbers (8191)"),
    "cpuset-30m.yaml": (GOOD_ENV + "targets: {cpu: {device: cpu, cpuset: '0-30000000'}}\n",
                        "targets.cpu.cpuset: CPU '0-30000000' is past the largest"),
    "cpuset-back.yaml": (GOOD_ENV + "targets: {cpu: {device: cpu, cpuset: '7-3'}}\n",
                         "targets.cpu.cpuset: '7-3' runs backwards"),
    "label-zws.yaml": (GOOD_ENV + "targets: {cpu: {device: cpu, label: \"my\u200bbox\"}}\n",
                       "holds U+200B ZERO WIDTH SPACE, which shows nothing"),
    "label-bidi.yaml": (GOOD_ENV + "targets: {cpu: {device: cpu, label: \"box \u202egnp\"}}\n",
                        "holds U+202E RIGHT-TO-LEFT OVERRIDE"),
    "long-value.yaml": ("environments:\n  a: {torch: '%s'}\ntargets: {cpu: {device: cpu}}\n"
                        % ("9" * 100000), "characters in all)"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_MATRICES))
def test_a_hostile_matrix_is_one_sentence_quickly(tmp_path, name):
    content, expected = HOSTILE_MATRICES[name]
    path = _matrix(tmp_path, name, content)
    started = time.perf_counter()
    proc = envbench("check", "--matrix", path, "--synthetic", timeout=60)
    assert time.perf_counter() - started < 30
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-1500:]
    assert expected in proc.stderr, proc.stderr[-1500:]
    assert len(proc.stderr) < 4000  # no value repeated in full


@pytest.mark.parametrize("target", ["/dev/zero", "fifo"])
def test_a_matrix_that_is_a_link_or_a_fifo_is_refused_not_read(tmp_path, target):
    path = tmp_path / "matrix.yaml"
    if target == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to(target)
    proc = envbench("check", "--matrix", path, "--synthetic", timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert ("a symbolic link" if target != "fifo" else "not a regular file") in proc.stderr


def test_a_variable_that_expands_to_an_invalid_url_names_the_key(tmp_path):
    path = _matrix(tmp_path, "m.yaml", "environments:\n  a: {torch: '2.13.0', index_url: "
                                       "'${EVIL_URL}'}\ntargets: {cpu: {device: cpu}}\n")
    proc = envbench("check", "--matrix", path, "--synthetic", EVIL_URL="https://x y/$(id)")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "environments.a.index_url: 'https://x y/$(id)' is not an index URL" in proc.stderr


@pytest.mark.parametrize("url, reason", [("https://[::1/simple", "Invalid IPv6 URL"),
                                         ("https://tok@host:99999/simple", "Port out of range")])
def test_a_variable_that_expands_to_an_unparsable_url_is_one_sentence(tmp_path, url, reason):
    path = _matrix(tmp_path, "m.yaml", "environments:\n  a: {torch: '2.13.0', index_url: "
                                       "'${EVIL_URL}'}\ntargets: {cpu: {device: cpu}}\n")
    for verb in ("check", "lock"):
        proc = envbench(verb, "--matrix", path, EVIL_URL=url)
        assert proc.returncode == 2 and "Traceback" not in proc.stdout + proc.stderr
        assert "environments.a.index_url: " in proc.stdout + proc.stderr
        assert reason in proc.stdout + proc.stderr and "tok@" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("text, expected", [
    ('[tool]\nenvbench = 5\n', "no [tool.envbench] inputs-sha256"),
    ('packages = "x"\n[tool.envbench]\ninputs-sha256 = "a"\ninputs = "{}"\n',
     "packages is not a list of [[packages]] tables"),
    ('[[packages]]\nname = "x"\nversion = "1"\nwheels = "abc"\n[tool.envbench]\n'
     'inputs-sha256 = "a"\ninputs = "{}"\n', "x's wheels is not a list of tables"),
    ('[tool.envbench]\ninputs-sha256 = "a"\ninputs = "[1]"\n',
     "[tool.envbench] inputs is not the JSON the kit writes"),
    (b'\xff\xfe[\x00', "UTF-16 text"),
    ('[[packages]]\nname = "x"\nversion = "1"\nwheels = [{name = "a.whl", hashes = "x"}]\n'
     '[tool.envbench]\ninputs-sha256 = "a"\ninputs = "{}"\n',
     "hashes is not a table"),
])
def test_a_lock_with_the_wrong_types_is_one_sentence(tmp_path, text, expected):
    from envbench.images import lock

    path = tmp_path / "e.pylock.toml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(UserError) as caught:
        lock.read(path)
    assert expected in str(caught.value) and "\n" not in str(caught.value)


def test_a_lock_that_is_a_link_to_dev_zero_is_refused(tmp_path):
    from envbench.images import lock

    (tmp_path / "e.pylock.toml").symlink_to("/dev/zero")
    with pytest.raises(UserError, match="a symbolic link"):
        lock.read(tmp_path / "e.pylock.toml")


def test_a_data_cache_with_planted_files_is_refused_not_hashed(tmp_path):
    from envbench.cells import dataset

    root = tmp_path / "cache"
    root.mkdir()
    (root / "cifar-10-python.tar.gz").symlink_to("/dev/zero")
    started = time.perf_counter()
    with pytest.raises(UserError, match="a symbolic link .*remove it and run `./noxw -s data`"):
        dataset.fetch(root, url="file:///nowhere", md5="0" * 32)
    # A planted sparse terabyte as a batch: refused by its size, not read.
    folder = root / dataset.FOLDER
    folder.mkdir()
    for name in dataset.FILES:
        (folder / name).write_bytes(b"x")
    with (folder / "data_batch_1").open("wb") as f:
        f.truncate(10**12)
    with pytest.raises(UserError, match="1000000000000 bytes, more than the"):
        dataset.digest(root)
    assert time.perf_counter() - started < 10


def test_a_link_planted_as_the_fetch_lock_creates_nothing_at_its_target(tmp_path):
    from envbench.cells import dataset

    root = tmp_path / "shared"
    root.mkdir()
    target = tmp_path / "elsewhere" / "created-by-root"
    target.parent.mkdir()
    (root / ".fetch.lock").symlink_to(target)
    with pytest.raises(UserError, match=r"\.fetch\.lock cannot be opened as the download's "
                                        r"lock .*a symbolic link"):
        dataset.fetch(root, url="file:///nowhere", md5="0" * 32)
    assert not target.exists()


def test_a_zip_bomb_in_place_of_a_cached_torch_wheel_is_refused_without_inflating(tmp_path):
    import resource
    import zipfile

    from envbench.images import wheelstack

    bomb = tmp_path / "torch-2.14.1-cp312-cp312-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open("torch/version.py", "w", force_zip64=True) as member:
            block = b"#" * (1 << 20)
            for _ in range(2048):  # 2 GiB of comment, about 2 MB compressed
                member.write(block)
    assert bomb.stat().st_size < 20 * 2**20
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(UserError, match="would unpack to 2147483648 bytes"):
        wheelstack.built_for(bomb)
    grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kb < 200 * 1024  # far from the 2 GiB the member inflates to


def test_a_cached_wheel_of_the_wrong_size_is_fetched_again_not_trusted(tmp_path):
    import io

    from envbench.images import lock, wheelcache
    from envbench.matrix.models import Environment

    stack = Environment(python="3.12", torch="2.14.1", numpy=False)
    made = lock.write("p", stack, tmp_path, tmp_path / "locks", pins=["iniconfig==2.0.0"])
    (wheel,) = made.wheels
    planted = wheelcache.path_for(wheel, tmp_path / "cache")
    planted.parent.mkdir(parents=True)
    planted.write_bytes(b"PK not the wheel")
    out = io.StringIO()
    (path,) = wheelcache.ensure(made, None, out, tmp_path / "cache")
    assert "is 16 bytes, the lock says %d: fetching it again" % wheel.size in out.getvalue()
    assert wheelcache.sha256_of(path) == wheel.sha256


# --- names that impersonate -------------------------------------------------------------

@pytest.mark.parametrize("label", ["NVIDIA H200", "ＮＶＩＤＩＡ Ｈ２００", "NVIDIA Н200",
                                   "NVIDIΑ H2OO".replace("OO", "00")])
def test_a_label_in_look_alike_letters_is_flagged_as_the_plain_one_is(tmp_path, label):
    from envbench.report import pages

    folder = tmp_path / "results"
    record = make_record("e", "gpu", 256, 0, random.Random(1), label=label,
                         device_name="NVIDIA GeForce RTX 3060 Laptop GPU")
    result.write_atomic(str(folder / "r.json"), record)
    page = pages.render_files([folder], tmp_path / "out")["html"].read_text()
    assert "⚠ label says %s, measured NVIDIA GeForce RTX 3060" % label in page


def test_a_result_whose_name_hides_a_character_is_left_out(tmp_path):
    folder = a_run(tmp_path / "run")
    twin = make_record("a\u200b", "cpu", 256, 0, random.Random(9))
    result.write_atomic(str(folder / "twin.json"), twin)
    loaded, skipped = store.load_all([folder])
    assert {r.cell.environment for r in loaded} == {"a"}
    ((name, why),) = skipped
    assert name.endswith("twin.json")
    assert "environment holds U+200B ZERO WIDTH SPACE" in why
    wide = make_record("ａ", "cpu", 256, 0, random.Random(9))  # full-width a
    result.write_atomic(str(folder / "wide.json"), wide)
    _, skipped = store.load_all([folder])
    assert any("is not in NFKC form" in why for _, why in skipped)


@pytest.mark.parametrize("url", ["not a url", "https://u:tok@x y/simple", "ftp://mirror/simple"])
def test_a_bad_envbench_index_url_is_bad_input_before_anything_runs(tmp_path, url):
    path = _matrix(tmp_path, "m.yaml", "environments:\n  a: {torch: '2.13.0'}\n"
                                       "targets: {cpu: {device: cpu}}\n")
    for verb in ("doctor", "lock", "check"):
        proc = envbench(verb, "--matrix", path, "--locks", tmp_path / "locks",
                        ENVBENCH_INDEX_URL=url)
        assert proc.returncode == 2 and "Traceback" not in proc.stdout + proc.stderr
        assert "is not an http(s) URL" in proc.stderr and "tok" not in proc.stderr
        assert not (tmp_path / "locks").exists()  # nothing resolved

