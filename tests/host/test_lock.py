"""Locks: resolved with uv for the image's Python, stale when their inputs change, and one
content-addressed host cache of wheels, verified on arrival and shared between stacks."""
from __future__ import annotations

import base64
import hashlib
import io
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from simple_index import serving

from envbench.images import lock, wheelcache
from envbench.matrix.models import Environment
from envbench.user_errors import UserError


def make_wheel(folder: Path, name: str, version: str, requires: tuple[str, ...] = (),
               tag: str = "py3-none-any") -> Path:
    """A small but real wheel: uv and pip read its METADATA like any other."""
    folder.mkdir(parents=True, exist_ok=True)
    dist = "%s-%s.dist-info" % (name, version)
    files = {
        "%s/__init__.py" % name: b"",
        "%s/METADATA" % dist: ("Metadata-Version: 2.1\nName: %s\nVersion: %s\n%s"
                               % (name, version, "".join("Requires-Dist: %s\n" % r
                                                         for r in requires))).encode(),
        "%s/WHEEL" % dist: ("Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                            "Tag: %s\n" % tag).encode(),
    }
    record = "".join("%s,sha256=%s,%d\n" % (
        path, base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode(),
        len(data)) for path, data in files.items()) + "%s/RECORD,,\n" % dist
    files["%s/RECORD" % dist] = record.encode()
    path = folder / ("%s-%s-%s.whl" % (name, version, tag))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for member, data in files.items():
            archive.writestr(member, data)
    path.write_bytes(buffer.getvalue())
    return path


@pytest.fixture
def wheelhouse(tmp_path) -> Path:
    folder = tmp_path / "wheelhouse"
    make_wheel(folder, "torch", "2.13.0", requires=("filelock",
                                                    "tomli; python_version < '3.11'"))
    make_wheel(folder, "filelock", "4.3.1")
    make_wheel(folder, "tomli", "2.0.1")
    make_wheel(folder, "torchvision", "0.28.0", requires=("torch==2.13.0",))
    return folder


def env(wheelhouse: Path, **changes) -> Environment:
    # numpy (a default of pip stacks) is tested on its own below; these wheelhouses lack it.
    return Environment(**dict({"python": "3.11", "torch": "2.13.0", "numpy": False,
                               "wheelhouse": str(wheelhouse)}, **changes))


def test_a_lock_pins_every_wheel_by_hash_and_names_no_local_path(tmp_path, wheelhouse):
    made = lock.write("e", env(wheelhouse), tmp_path, tmp_path / "locks")
    assert made.path == tmp_path / "locks" / "e.pylock.toml"
    assert {w.package for w in made.wheels} == {"torch", "filelock"}  # no tomli on 3.11
    for wheel in made.wheels:
        assert wheel.sha256 == wheelcache.sha256_of(wheelhouse / wheel.filename)
        assert wheel.url is None  # found by name in the wheelhouse
    text = made.path.read_text()
    assert str(tmp_path) not in text and "file://" not in text
    assert 'uv-version = "0.13.9"' in text
    requirements = made.requirements_text()
    assert "filelock==4.3.1 --hash=sha256:" in requirements
    assert "torch==2.13.0 --hash=sha256:" in requirements
    assert lock.read(made.path).sha256 == made.sha256


def test_a_foreign_python_gets_its_marker_only_dependencies(tmp_path, wheelhouse):
    """Resolved for Python 3.8 on this 3.11 host: tomli (python_version < '3.11') is in."""
    made = lock.write("old", env(wheelhouse, python="3.8"), tmp_path, tmp_path / "locks")
    assert {w.package for w in made.wheels} == {"torch", "filelock", "tomli"}


def test_a_foreign_python_from_the_package_index():
    """The same from PyPI itself, with small pure-Python packages: pytest 8.3.3 needs
    exceptiongroup and tomli below Python 3.11 only."""
    old = lock.resolve(["pytest==8.3.3"], "3.8", "x86_64-manylinux_2_28")
    new = lock.resolve(["pytest==8.3.3"], "3.12", "x86_64-manylinux_2_28")
    assert 'name = "exceptiongroup"' in old and 'name = "tomli"' in old
    assert 'name = "exceptiongroup"' not in new and 'name = "tomli"' not in new
    assert old.count("sha256 = ") == old.count("[[packages]]")


@pytest.mark.parametrize("change", [
    {"python": "3.12"}, {"torchvision": "0.28.0"}, {"platform": "x86_64-manylinux_2_28"},
    {"wheelhouse": "added"}, {"packages": ("tomli==2.0.1",)},
])
def test_a_changed_input_makes_the_lock_stale_and_it_is_refused(tmp_path, wheelhouse, change):
    locks = tmp_path / "locks"
    lock.write("e", env(wheelhouse), tmp_path, locks)
    assert lock.status("e", env(wheelhouse), tmp_path, locks).state is lock.LockState.CURRENT
    if change == {"wheelhouse": "added"}:
        make_wheel(wheelhouse, "filelock", "4.4.0")
        changed = env(wheelhouse)
    else:
        changed = env(wheelhouse, **change)
    assert lock.status("e", changed, tmp_path, locks).state is lock.LockState.STALE
    with pytest.raises(UserError, match=r"e.pylock.toml is stale: .* run `./noxw -s lock`"):
        lock.ensure("e", changed, tmp_path, locks, frozen=False, out=io.StringIO())


def test_a_missing_lock_is_created_and_said_unless_frozen(tmp_path, wheelhouse):
    out = io.StringIO()
    with pytest.raises(UserError, match="missing and --frozen forbids creating it"):
        lock.ensure("e", env(wheelhouse), tmp_path, tmp_path / "locks", frozen=True, out=out)
    made = lock.ensure("e", env(wheelhouse), tmp_path, tmp_path / "locks", frozen=False,
                       out=out)
    assert "e: no lock yet, resolving it into" in out.getvalue()
    assert "locked 2 wheels" in out.getvalue() and made.path.exists()
    again = io.StringIO()
    assert lock.ensure("e", env(wheelhouse), tmp_path, tmp_path / "locks", frozen=True,
                       out=again).sha256 == made.sha256
    assert again.getvalue() == ""


def test_two_environments_share_one_cached_wheel(tmp_path, wheelhouse):
    locks, cache = tmp_path / "locks", tmp_path / "cache"
    first = lock.write("a", env(wheelhouse), tmp_path, locks)
    second = lock.write("b", env(wheelhouse, torchvision="0.28.0"), tmp_path, locks)
    paths_a = wheelcache.ensure(first, wheelhouse, io.StringIO(), cache)
    paths_b = wheelcache.ensure(second, wheelhouse, io.StringIO(), cache)
    torch_a = next(p for p in paths_a if p.name.startswith("torch-"))
    torch_b = next(p for p in paths_b if p.name.startswith("torch-"))
    assert torch_a == torch_b and torch_a.stat().st_ino == torch_b.stat().st_ino
    assert len(list((cache / "wheels").iterdir())) == 3  # torch, filelock, torchvision
    # Hard-linked from the wheelhouse where the file system allows: no second copy at all.
    assert torch_a.stat().st_ino == (wheelhouse / torch_a.name).stat().st_ino


def test_a_wheel_whose_hash_differs_from_the_lock_is_refused_and_not_kept(tmp_path,
                                                                         wheelhouse):
    made = lock.write("e", env(wheelhouse), tmp_path, tmp_path / "locks")
    victim = wheelhouse / next(w.filename for w in made.wheels if w.package == "filelock")
    victim.unlink()
    make_wheel(wheelhouse, "filelock", "4.3.1", requires=("six",))  # same name, other bytes
    with pytest.raises(UserError, match="sha256 [0-9a-f]{64}, but the lock says"):
        wheelcache.ensure(made, wheelhouse, io.StringIO(), tmp_path / "cache")
    kept = [p for p in (tmp_path / "cache" / "wheels").rglob("*") if p.is_file()
            and p.name.startswith("filelock")]
    assert kept == []


def test_an_unreadable_lock_says_what_to_run(tmp_path):
    bad = tmp_path / "x.pylock.toml"
    bad.write_text("lock-version = [")
    with pytest.raises(UserError, match="not a readable lock .* run `./noxw -s lock`"):
        lock.read(bad)
    bad.write_text('lock-version = "1.0"\n')
    with pytest.raises(UserError, match="not an envbench lock"):
        lock.read(bad)


def test_a_pip_stack_gets_numpy_unless_the_matrix_says_otherwise(tmp_path, wheelhouse):
    make_wheel(wheelhouse, "numpy", "2.3.0")
    made = lock.write("n", env(wheelhouse, numpy=True), tmp_path, tmp_path / "locks")
    assert {w.package for w in made.wheels} == {"torch", "filelock", "numpy"}
    without = lock.write("m", env(wheelhouse), tmp_path, tmp_path / "locks")
    assert "numpy" not in {w.package for w in without.wheels}


def test_a_workloads_packages_are_locked_with_the_stack(tmp_path, wheelhouse):
    """An environment's packages (what a user's workload imports) are resolved with torch
    and pinned by hash in the same lock: one install, checked as a whole."""
    made = lock.write("w", env(wheelhouse, packages=("tomli==2.0.1",)), tmp_path,
                      tmp_path / "locks")
    assert {w.package for w in made.wheels} == {"torch", "filelock", "tomli"}
    assert "tomli==2.0.1 --hash=sha256:" in made.requirements_text()
    with pytest.raises(UserError, match="uv could not resolve .*tomli==9.9"):
        lock.write("x", env(wheelhouse, packages=("tomli==9.9",)), tmp_path, tmp_path / "locks")


def test_a_package_its_wheelhouse_lacks_is_named_with_the_two_ways_out(tmp_path, wheelhouse):
    """The demo's pip stack has a wheelhouse, and it is the one users copy: a package added to
    it failed with uv's "not found in the provided package locations"."""
    with pytest.raises(UserError) as refused:
        lock.write("w", env(wheelhouse, packages=("transformers==5.23.0",)), tmp_path,
                   tmp_path / "locks")
    assert str(refused.value) == (
        "environments.w: transformers is not in its wheelhouse %s, the stack's only source "
        "of wheels (with a wheelhouse no index is asked). Either add it and its dependencies "
        "there (`python3 -m pip download transformers==5.23.0 -d %s --python-version 3.11 "
        "--only-binary :all:`), or remove `wheelhouse:` so the stack resolves from an index "
        "(for torch's CPU build: `index_url: https://download.pytorch.org/whl/cpu`)"
        % (wheelhouse, wheelhouse))


# --- hostile lock files: a lock is a file anyone can change in a pull request

def _hostile_lock(tmp_path: Path, wheelhouse: Path, entry: str) -> Path:
    """A real lock with its filelock wheel entry replaced by ``entry`` (TOML inline table)."""
    made = lock.write("e", env(wheelhouse), tmp_path, tmp_path / "locks")
    lines = made.path.read_text().splitlines()
    start = lines.index('name = "filelock"')
    wheel = next(i for i in range(start, len(lines)) if lines[i].startswith("wheels = ["))
    lines[wheel] = "wheels = [%s]" % entry  # uv writes the list on one line
    made.path.write_text("\n".join(lines) + "\n")
    return made.path


GOOD_HASH = "a" * 64


@pytest.mark.parametrize("entry, refusal", [
    ('{ name = "../../../../tmp/envbench-x/pwn.whl", hashes = { sha256 = "%s" } }' % GOOD_HASH,
     "is not a wheel file name"),
    ('{ name = "/tmp/envbench-x/pwn.whl", hashes = { sha256 = "%s" } }' % GOOD_HASH,
     "is not a wheel file name"),
    ('{ url = "https://files.example/..%%2F..%%2Ftmp%%2Fpwn-1-py3-none-any.whl", size = 10, '
     'hashes = { sha256 = "%s" } }' % GOOD_HASH, "is not a wheel file name"),
    ('{ name = "filelock-4.3.1-py3-none-any.whl", hashes = { sha256 = "../.." } }',
     "hashes.sha256 '../..' is not 64 lower-case hex digits"),
    ('{ name = "filelock-4.3.1-py3-none-any.whl", hashes = { sha256 = "%s" } }'
     % GOOD_HASH.upper(), "is not 64 lower-case hex digits"),
    ('{ url = "file:///dev/zero", size = 10, hashes = { sha256 = "%s" } }' % GOOD_HASH,
     "only https:// downloads are accepted"),
    ('{ url = "http://files.example/filelock-4.3.1-py3-none-any.whl", size = 10, '
     'hashes = { sha256 = "%s" } }' % GOOD_HASH, "only https:// downloads are accepted"),
    ('{ url = "ftp://files.example/filelock-4.3.1-py3-none-any.whl", size = 10, '
     'hashes = { sha256 = "%s" } }' % GOOD_HASH, "only https:// downloads are accepted"),
    ('{ url = "data:application/zip;base64,UEsFBgAAAAAAAAAAAAAAAAAAAAAAAA==", size = 10, '
     'hashes = { sha256 = "%s" } }' % GOOD_HASH, "only https:// downloads are accepted"),
    ('{ url = "https://files.example/filelock-4.3.1-py3-none-any.whl", '
     'hashes = { sha256 = "%s" } }' % GOOD_HASH, "a downloaded wheel needs its size"),
    ('{ url = "https://files.example/filelock-4.3.1-py3-none-any.whl", size = 1000000000000, '
     'hashes = { sha256 = "%s" } }' % GOOD_HASH, "is not a number of bytes up to"),
])
def test_a_hostile_lock_entry_is_refused_naming_the_file_and_package(tmp_path, wheelhouse,
                                                                     entry, refusal):
    path = _hostile_lock(tmp_path, wheelhouse, entry)
    with pytest.raises(UserError) as refused:
        lock.read(path)
    message = str(refused.value)
    assert message.startswith("%s: filelock 4.3.1: " % path) and refusal in message, message
    assert not Path("/tmp/envbench-x").exists()


def test_a_wheelhouse_file_that_links_outside_it_is_refused(tmp_path, wheelhouse):
    made = lock.write("e", env(wheelhouse), tmp_path, tmp_path / "locks")
    victim = next(w for w in made.wheels if w.package == "filelock")
    outside = tmp_path / "elsewhere" / victim.filename
    outside.parent.mkdir()
    (wheelhouse / victim.filename).rename(outside)
    (wheelhouse / victim.filename).symlink_to(outside)  # same bytes, same hash: only the
    with pytest.raises(UserError, match="is a link to .*elsewhere.*outside it: refused"):
        wheelcache.ensure(made, wheelhouse, io.StringIO(), tmp_path / "cache")  # place tells
    assert not list((tmp_path / "cache" / "wheels").rglob("filelock*"))


def test_lock_check_catches_a_hash_edited_by_hand_that_the_inputs_hash_cannot(tmp_path,
                                                                             wheelhouse):
    from envbench.command_options import Options
    from envbench.commands import lock as lockcommand

    opts = Options(matrix_path=tmp_path / "matrix.yaml", locks=tmp_path / "locks", check=True)
    made = lock.write("e", env(wheelhouse), tmp_path, tmp_path / "locks")
    out = io.StringIO()
    assert lockcommand._check("e", env(wheelhouse), opts, out)
    assert out.getvalue() == "e: %s matches a fresh resolution (2 wheels)\n" % made.path
    victim = next(w for w in made.wheels if w.package == "filelock")
    forged = "b" * 64
    made.path.write_text(made.path.read_text().replace(victim.sha256, forged))
    # The inputs did not change, so the lock still reads as current: only --check tells.
    assert lock.status("e", env(wheelhouse), tmp_path, tmp_path / "locks").state \
        is lock.LockState.CURRENT
    out = io.StringIO()
    assert not lockcommand._check("e", env(wheelhouse), opts, out)
    assert "e: %s differs from what its index serves for its own pins (1 difference(s)); " \
        "run `./noxw -s lock`:" % made.path in out.getvalue()
    assert "%s: sha256 is %s in the lock, %s in what the index serves for the lock's pins" % (
        victim.filename, forged, victim.sha256) in out.getvalue()
    assert made.path.read_text().count(forged) == 1  # --check wrote nothing


def test_a_lock_from_an_index_names_no_host_and_its_wheels_come_through_pip(tmp_path):
    """A lock resolved from the default index keeps file names, sizes and hashes only; the
    cache fetches each file through the host's pip (its configured index), hash-pinned."""
    stack = Environment(python="3.12", torch="2.14.1", numpy=False)
    made = lock.write("p", stack, tmp_path, tmp_path / "locks", pins=["iniconfig==2.0.0"])
    text = made.path.read_text()
    assert "url = " not in text and "https://" not in text
    (wheel,) = made.wheels
    assert (wheel.url, wheel.filename) == (None, "iniconfig-2.0.0-py3-none-any.whl")
    assert (made.python, made.platform) == ("3.12", lock.platform_tag(stack))
    out = io.StringIO()
    (path,) = wheelcache.ensure(made, None, out, tmp_path / "cache")
    assert path == wheelcache.path_for(wheel, tmp_path / "cache")
    assert wheelcache.sha256_of(path) == wheel.sha256 and path.stat().st_size == wheel.size
    assert "p: fetching 1 wheel(s)" in out.getvalue()
    assert not list((tmp_path / "cache" / "wheels" / ".fetch").iterdir())  # staging cleared


def test_a_version_published_as_two_fitting_wheels_is_served_by_the_one_pip_takes(
        tmp_path, monkeypatch):
    """regex publishes each version as a manylinux2014 and a manylinux_2_28 wheel, both fit
    the image, and the lock lists both; pip, asked for the version with both hashes, takes
    one. The fetch took that for 'another file' and refused the stack."""
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # the test's index, and only it
    for name in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX",
                 "UV_INDEX_URL", "UV_DEFAULT_INDEX", "UV_FIND_LINKS", "ENVBENCH_INDEX_URL"):
        monkeypatch.delenv(name, raising=False)
    served = tmp_path / "served"
    files = [make_wheel(served, "twofold", "1.0", tag=tag)
             for tag in ("py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64",
                         "py3-none-manylinux_2_17_x86_64.manylinux_2_28_x86_64")]
    with serving({"twofold": files}) as index:
        # The host's index (as the issue met it), which the lock and the fetch both use.
        monkeypatch.setenv("ENVBENCH_INDEX_URL", "http://127.0.0.1:%d/simple" % index.port)
        stack = Environment(python="3.12", torch="2.14.1", numpy=False)
        made = lock.write("p", stack, tmp_path, tmp_path / "locks", pins=["twofold==1.0"])
        assert sorted(w.filename for w in made.wheels) == sorted(f.name for f in files)
        out = io.StringIO()
        (path,) = wheelcache.ensure(made, None, out, tmp_path / "cache")
        (taken,) = [w for w in made.wheels if w.filename == path.name]
        assert wheelcache.sha256_of(path) == taken.sha256
        assert "p: fetching 2 wheel(s)" in out.getvalue()
        # The version is served: a second build fetches nothing.
        asked = len(index.asked)
        again = io.StringIO()
        assert wheelcache.ensure(made, None, again, tmp_path / "cache") == [path]
        assert len(index.asked) == asked and "fetching" not in again.getvalue()
    # The image installs it: pip, given the lock's requirements and only the one file.
    wheels = tmp_path / "context"
    wheels.mkdir()
    shutil.copy(path, wheels)
    (tmp_path / "requirements.lock").write_text(made.requirements_text())
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-index", "--find-links", str(wheels),
         "--require-hashes", "--no-deps", "-r", str(tmp_path / "requirements.lock"),
         "--target", str(tmp_path / "site"), "--python-version", "3.12",
         "--only-binary", ":all:"]
        + [arg for tag in wheelcache.pip_platforms(made.platform) for arg in ("--platform", tag)],
        capture_output=True, text=True)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert (tmp_path / "site" / "twofold" / "__init__.py").is_file()


def test_a_wheel_the_index_serves_with_another_hash_is_refused_and_nothing_kept(tmp_path):
    stack = Environment(python="3.12", torch="2.14.1", numpy=False)
    made = lock.write("p", stack, tmp_path, tmp_path / "locks", pins=["iniconfig==2.0.0"])
    made.path.write_text(made.path.read_text().replace(made.wheels[0].sha256, "c" * 64))
    forged = lock.read(made.path)
    refused = ("p: pip could not fetch the locked wheels through its configured index: "
               ".*Expected sha256 c{64} Got [0-9a-f]{64}")
    with pytest.raises(UserError, match=refused):
        wheelcache.ensure(forged, None, io.StringIO(), tmp_path / "cache")
    assert not [p for p in (tmp_path / "cache" / "wheels").rglob("*") if p.is_file()]


def test_pip_is_asked_for_every_glibc_the_image_runs():
    tags = wheelcache.pip_platforms("x86_64-manylinux_2_36")
    assert tags[0] == "manylinux_2_36_x86_64" and "manylinux_2_17_x86_64" in tags
    assert tags[-1] == "manylinux2014_x86_64" and "manylinux_2_16_x86_64" not in tags
    assert wheelcache.pip_platforms("aarch64-manylinux_2_28")[0] == "manylinux_2_28_aarch64"
    with pytest.raises(UserError, match="not ARCH-manylinux_2_N"):
        wheelcache.pip_platforms("win_amd64")


def test_lock_check_reports_drift_without_failing_and_fails_a_version_the_index_lacks(
        tmp_path):
    """Against the real index: a lock holding an older filelock than a fresh resolution picks
    is drift (said, exit status good); one naming a filelock version that was never released
    fails."""
    from envbench.command_options import Options
    from envbench.commands import lock as lockcommand

    stack = Environment(python="3.12", torch="2.14.1", numpy=False)
    opts = Options(matrix_path=tmp_path / "matrix.yaml", locks=tmp_path / "locks", check=True)
    current = lock.write("d", stack, tmp_path, tmp_path / "locks")
    older = [p if not p.startswith("filelock==") else "filelock==3.12.0"
             for p in current.pins()]
    drifted = lock.write("d", stack, tmp_path, tmp_path / "locks", pins=older)
    # The pins are a lock's inputs only through the matrix: the file still reads as current.
    assert lock.status("d", stack, tmp_path, tmp_path / "locks").state is lock.LockState.CURRENT
    out = io.StringIO()
    assert lockcommand._check("d", stack, opts, out)
    said = out.getvalue()
    assert "matches its index (%d wheels); drift: a fresh resolution picks newer" \
        % len(drifted.wheels) in said
    assert "filelock-3.12.0-py3-none-any.whl: in the lock, not in a fresh resolution" in said
    text = drifted.path.read_text()
    drifted.path.write_text(text.replace('version = "3.12.0"', 'version = "3.12.999"'))
    out = io.StringIO()
    assert not lockcommand._check("d", stack, opts, out)
    assert "names versions its index no longer resolves" in out.getvalue()


def test_the_committed_locks_are_current_for_the_default_matrix_and_name_no_host():
    """What CI's `./noxw -s lock -- --check` compares against the index: here, that each
    committed lock reads, is current for matrix.yaml, and names file names only."""
    from envbench.matrix import models

    root = Path(__file__).resolve().parents[2]
    committed = sorted((root / "locks").glob("*" + lock.LOCK_SUFFIX))
    assert committed, "no lock is committed"
    m = models.load(root / "matrix.yaml")
    for path in committed:
        name = path.name[:-len(lock.LOCK_SUFFIX)]
        assert name in m.environments, "%s locks no environment of matrix.yaml" % path.name
        found = lock.status(name, m.environments[name], root, root / "locks")
        assert found.state is lock.LockState.CURRENT, "%s is stale" % path.name
        assert "://" not in path.read_text().split("[tool.envbench]")[0]
