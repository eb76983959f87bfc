"""Rendered Dockerfiles and content-hash tags (the builds themselves are in tests/e2e)."""
from __future__ import annotations

import io
import re
import shutil
import tarfile
import threading
from pathlib import Path

import pytest
from test_lock import make_wheel

from envbench.images import build, dockerfile, lock, wheelcache
from envbench.matrix.models import Environment
from envbench.user_errors import UserError

SEED = Environment(python="3.8", torch="1.12.1", torchvision="0.13.1", cuda="11.6",
                   index_url="https://wheels.example/cu116")


@pytest.fixture
def locked(tmp_path):
    """A pip stack locked against a small wheelhouse, and its lock."""
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "torch", "2.13.0", requires=("filelock",))
    make_wheel(wheels, "filelock", "4.3.1")
    make_wheel(wheels, "numpy", "2.3.0")  # pip stacks have numpy by default
    env = Environment(torch="2.13.0", wheelhouse="wheels")
    return env, lock.write("x", env, tmp_path, tmp_path / "locks")


def test_cuda_image_checks_its_stack_and_installs_the_lock_offline():
    text = dockerfile.plan("seed", SEED, Path(".")).dockerfile
    assert text.startswith("# Rendered by envbench") and "FROM python:3.8-slim AS system" in text
    # Wheels come from the lock, hash-checked, in a builder stage; pip never meets an index.
    assert ("pip install --no-index --find-links /tmp/wheels --require-hashes" in text
            and "-r /tmp/requirements.lock" in text and "pip check" in text)
    assert "--extra-index-url" not in text and "wheels.example" not in text
    assert "FROM system AS builder" in text and "COPY --from=builder /opt/venv /opt/venv" in text
    assert "c == '11.6' or sys.exit(" in text and "t.startswith('1.12.1') or sys.exit(" in text
    assert "NVIDIA_VISIBLE_DEVICES=all" in text
    # bench/ is copied after torch is installed, so a code change reuses the torch layers.
    assert text.index("pip install") < text.index("COPY bench")
    assert "USER envbench" in text


def test_cpu_and_debian_images():
    cpu = dockerfile.plan("c", Environment(torch="2.13.0"), Path(".")).dockerfile
    assert "c is None or sys.exit(" in cpu and "NVIDIA" not in cpu
    debian = dockerfile.plan("d", Environment(source="debian", base="envbench/debian:bookworm"),
                         Path(".")).dockerfile
    assert "FROM envbench/debian:bookworm AS system" in debian
    assert "apt-get install -y --no-install-recommends python3 python3-torch" in debian
    assert "pip install" not in debian


def test_the_tag_hashes_the_dockerfile_bench_and_the_lock(tmp_path, monkeypatch, locked):
    env, made = locked
    p = dockerfile.plan("x", env, tmp_path, made)
    assert p.tag == dockerfile.plan("x", env, tmp_path, made).tag
    assert p.tag.startswith("envbench/x:") and p.labels["envbench.lock.sha256"] == made.sha256
    assert dockerfile.plan("x", env, tmp_path).tag != p.tag  # no lock: another tag
    make_wheel(tmp_path / "wheels", "filelock", "4.4.0")
    relocked = lock.write("x", env, tmp_path, tmp_path / "locks")
    assert relocked.sha256 != made.sha256
    assert dockerfile.plan("x", env, tmp_path, relocked).tag != p.tag
    copy = tmp_path / "bench"
    shutil.copytree(dockerfile.BENCH_DIR, copy)
    monkeypatch.setattr(dockerfile, "BENCH_DIR", copy)
    assert dockerfile.plan("x", env, tmp_path, made).tag == p.tag
    (copy / "train.py").write_text((copy / "train.py").read_text() + "\n# changed\n")
    assert dockerfile.plan("x", env, tmp_path, made).tag != p.tag


def test_the_build_context_carries_the_locked_wheels_and_nothing_else(tmp_path, locked):
    env, made = locked
    (tmp_path / "wheels" / "unlocked-1.0-py3-none-any.whl").write_bytes(b"not in the lock")
    p = dockerfile.plan("x", env, tmp_path, made)
    paths = wheelcache.ensure(made, p.wheelhouse, io.StringIO(), tmp_path / "cache")
    with build._context(p, paths) as chunks:
        sent = b"".join(chunks)
    with tarfile.open(fileobj=io.BytesIO(sent)) as tar:
        names = tar.getnames()
        requirements = tar.extractfile("requirements.lock").read().decode()
        wheel = tar.extractfile("wheels/" + paths[0].name).read()
    assert sorted(n for n in names if n.startswith("wheels/")) == sorted(
        "wheels/" + w.filename for w in made.wheels)
    assert "Dockerfile" in names and "bench/result.schema.json" in names
    assert requirements == made.requirements_text()
    assert wheel == paths[0].read_bytes()
    assert p.offline  # no apt packages: the build runs with the network off


def test_a_context_that_cannot_be_written_says_why_instead_of_a_short_tar(tmp_path, locked):
    env, made = locked
    p = dockerfile.plan("x", env, tmp_path, made)
    paths = wheelcache.ensure(made, p.wheelhouse, io.StringIO(), tmp_path / "cache")
    paths[-1].unlink()  # removed from the cache while the context is being sent
    with build._context(p, paths) as chunks:
        with pytest.raises(UserError, match="writing x's build context failed: .*No such file"):
            b"".join(chunks)


def test_a_reader_that_stops_early_does_not_leave_the_writer_blocked(tmp_path, locked):
    """The engine may stop reading (a build that fails at once): the writing thread ends."""
    env, made = locked
    p = dockerfile.plan("x", env, tmp_path, made)
    paths = wheelcache.ensure(made, p.wheelhouse, io.StringIO(), tmp_path / "cache")
    big = tmp_path / "big.whl"
    big.write_bytes(b"\0" * (8 * build.CONTEXT_CHUNK))  # far more than a pipe holds
    before = threading.active_count()
    with build._context(p, paths + [big]) as chunks:
        next(chunks)
    assert threading.active_count() == before


def test_custom_templates_and_checked_sources(tmp_path, monkeypatch):
    (tmp_path / "mine.j2").write_text("{% extends 'cpu.Dockerfile.j2' %}\n"
                                      "{% block device_env %}ENV MINE=1{% endblock %}\n")
    custom = dockerfile.plan("x", Environment(torch="2.13.0", dockerfile="mine.j2"), tmp_path)
    assert "ENV MINE=1" in custom.dockerfile
    with pytest.raises(UserError, match="dockerfile: .*nope.j2 does not exist"):
        dockerfile.plan("x", Environment(torch="2.13.0", dockerfile="nope.j2"), tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="wheelhouse: .*holds no wheels"):
        dockerfile.plan("x", Environment(torch="2.13.0", wheelhouse="empty"), tmp_path)
    monkeypatch.delenv("ENVBENCH_TEST_INDEX", raising=False)
    with pytest.raises(UserError, match=r"environments.x.index_url: \$\{ENVBENCH_TEST_INDEX\}"):
        dockerfile.plan("x", Environment(torch="2.13.0", index_url="${ENVBENCH_TEST_INDEX}/cpu"),
                    tmp_path)


@pytest.mark.parametrize("template", [
    "{{ cycler.__init__.__globals__.os.getcwd() }}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ lipsum.__globals__['os'].system('touch PWNED') }}",
])
def test_a_template_that_reaches_for_python_is_refused_and_runs_nothing(tmp_path, monkeypatch,
                                                                         template):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "evil.j2").write_text("FROM scratch\n" + template + "\n")
    with pytest.raises(UserError) as refused:
        dockerfile.plan("x", Environment(torch="2.13.0", dockerfile="evil.j2"), tmp_path)
    assert str(refused.value).startswith("environments.x.dockerfile: %s reaches outside the "
                                         "template's sandbox" % (tmp_path / "evil.j2"))
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize("where", ["../outside.j2", "/etc/hostname", "sub/../../outside.j2"])
def test_a_dockerfile_outside_the_matrix_folder_is_refused(tmp_path, where):
    matrix_dir = tmp_path / "project"
    (matrix_dir / "sub").mkdir(parents=True)
    (tmp_path / "outside.j2").write_text("{% extends 'cpu.Dockerfile.j2' %}\n")
    with pytest.raises(UserError, match="environments.x.dockerfile: %s lies outside the "
                                        "matrix's folder" % re.escape(where)):
        dockerfile.plan("x", Environment(torch="2.13.0", dockerfile=where), matrix_dir)
