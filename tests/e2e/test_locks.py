"""Locked stacks on a real engine: `lock` writes hashed locks, the image is built offline from
the host's cache, holds no wheels, passes pip check, rebuilds to the same packages, and a
tampered cached wheel is refused at install."""
from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

import pytest
from e2e_support import E2E_MATRIX, envbench

from envbench.images import build, dockerfile, lock, wheelcache
from envbench.matrix.models import load

pytestmark = pytest.mark.e2e


def _records(reports: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in (reports / "results").glob("*.json")]


def _in_image(client, image_id: str, script: str) -> str:
    return client.containers.run(image_id, entrypoint=["sh", "-c"], command=[script],
                                 remove=True, network_mode="none").decode()


def test_lock_writes_every_wheel_with_its_hash(e2e_env, tmp_path):
    proc = envbench(e2e_env, "lock", "--matrix", E2E_MATRIX, "--locks", tmp_path)
    assert proc.returncode == 0, proc.stdout
    assert "debian-torch1.13: Debian's packages, nothing to lock" in proc.stdout
    made = lock.read(tmp_path / "torch2.13-cpu.pylock.toml")
    # The count said is the count written; torch's closure, plus numpy (bench's default
    # data path needs it), is in it.
    assert "torch2.13-cpu: written, %d wheels" % len(made.wheels) in proc.stdout
    assert all(len(w.sha256) == 64 for w in made.wheels)
    assert {w.package for w in made.wheels} >= {"torch", "numpy", "filelock", "sympy",
                                                 "typing-extensions"}
    assert e2e_env["ENVBENCH_WHEELHOUSE"] not in made.path.read_text()
    again = envbench(e2e_env, "lock", "--matrix", E2E_MATRIX, "--locks", tmp_path)
    assert "torch2.13-cpu: unchanged" in again.stdout


def test_the_image_is_built_offline_from_the_lock_and_holds_no_wheel(first_run, client,
                                                                     e2e_env):
    reports, _ = first_run
    record = next(r for r in _records(reports) if r["cell"]["environment"] == "torch2.13-cpu")
    locked = lock.read(Path(e2e_env["ENVBENCH_LOCKS"]) / "torch2.13-cpu.pylock.toml")
    assert record["env"]["image"]["lock_sha256"] == locked.sha256
    image = client.images.get(record["env"]["image"]["id"])
    assert image.labels["envbench.lock.sha256"] == locked.sha256
    names = " ".join(w.filename for w in locked.wheels)
    found = _in_image(client, image.id, "ls /tmp/wheels 2>&1; find / -xdev -name '*.whl' "
                                         "-not -path '/usr/share/python-wheels/*'; echo end")
    assert found.split() == ["ls:", "cannot", "access", "'/tmp/wheels':", "No", "such", "file",
                             "or", "directory", "end"], found
    assert not any(name in found for name in names.split())
    checked = _in_image(client, image.id, "/opt/venv/bin/pip check")
    assert "No broken requirements found." in checked
    freeze = _in_image(client, image.id, "/opt/venv/bin/pip freeze")
    assert "torch==2.13.0+cpu" in freeze.split()
    # bench's fingerprint carries the installed packages: the lock's versions, exactly.
    def normal(name: str) -> str:  # PEP 503
        return re.sub(r"[-_.]+", "-", name).lower()

    installed = {normal(k): v for k, v in record["env"]["packages"].items()}
    for wheel in locked.wheels:
        assert installed.get(normal(wheel.package)) == wheel.version, wheel.package


def _copy_env(tmp_path: Path, name: str, template: str | None = None) -> Path:
    """The e2e pip stack under another name (so another image tag), same lock inputs."""
    text = E2E_MATRIX.read_text().replace("torch2.13-cpu:", "%s:" % name)
    if template is not None:
        (tmp_path / "offline.j2").write_text(template)
        text = text.replace('    wheelhouse: "${ENVBENCH_WHEELHOUSE}"',
                            '    wheelhouse: "${ENVBENCH_WHEELHOUSE}"\n'
                            '    dockerfile: offline.j2')
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(text)
    return matrix


def test_a_build_has_no_network_and_two_builds_of_one_lock_install_the_same(client, e2e_env,
                                                                            tmp_path,
                                                                            monkeypatch):
    # The build's own containers see only the loopback interface: the network is off.
    template = ('{% extends "cpu.Dockerfile.j2" %}\n{% block device_env %}\n'
                'RUN test "$(ls /sys/class/net)" = "lo"\n{% endblock %}\n')
    matrix = _copy_env(tmp_path, "offline-proof", template)
    for old in client.images.list(filters={"label": "envbench.environment=offline-proof"}):
        client.images.remove(old.id, force=True)  # left by an earlier run: build anew
    proc = envbench(e2e_env, "build", "--matrix", matrix, "--env", "offline-proof",
                    "--reports", tmp_path / "reports")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert re.search(r"offline-proof: building \S+ with the network off", proc.stdout)
    # The builder stage (every wheel, and the venv again) is not left behind in the engine.
    assert re.search(r"removed the builder stage's image \(\d+\.\d\d GB\)", proc.stdout)
    assert client.images.list(filters={"dangling": True, "label": "envbench.stage=builder"}) \
        == []
    for key in ("ENVBENCH_BASE", "ENVBENCH_PYTHON_BASE", "ENVBENCH_WHEELHOUSE"):
        monkeypatch.setenv(key, e2e_env[key])  # the plan below expands the matrix here
    m = load(matrix)
    made = lock.read(Path(e2e_env["ENVBENCH_LOCKS"]) / "offline-proof.pylock.toml")
    plan = dockerfile.plan("offline-proof", m.environments["offline-proof"], tmp_path, made)
    first = client.images.get(plan.tag)
    freeze_one = _in_image(client, first.id, "/opt/venv/bin/pip freeze")
    client.images.remove(first.id, force=True)
    rebuilt = build.build(client, plan, tmp_path / "logs", allow_pull=False,
                      out=io.StringIO(), nocache=True)
    freeze_two = _in_image(client, rebuilt.id, "/opt/venv/bin/pip freeze")
    assert client.images.list(filters={"dangling": True, "label": "envbench.stage=builder"}) \
        == []
    assert (rebuilt.labels or {}).get("envbench.stage") is None  # the final stage is not one
    client.images.remove(rebuilt.id, force=True)
    assert freeze_one == freeze_two and "torch==2.13.0+cpu" in freeze_one


def test_a_tampered_wheel_in_the_cache_is_refused_at_install(e2e_env, tmp_path):
    cache = tmp_path / "cache"
    env = dict(e2e_env, ENVBENCH_CACHE=str(cache))
    matrix = _copy_env(tmp_path, "tampered")
    assert envbench(env, "lock", "--matrix", matrix, "--env", "tampered").returncode == 0
    made = lock.read(Path(e2e_env["ENVBENCH_LOCKS"]) / "tampered.pylock.toml")
    victim = next(w for w in made.wheels if w.package == "filelock")
    wheelcache.ensure(made, Path(e2e_env["ENVBENCH_WHEELHOUSE"]), root=cache)
    cached = wheelcache.path_for(victim, cache)
    data = bytearray(cached.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one byte, same size: only its hash tells
    cached.unlink()  # a copy of its own: the wheelhouse's file (a hard link) stays intact
    cached.write_bytes(bytes(data))
    proc = envbench(env, "build", "--matrix", matrix, "--env", "tampered", "--reports",
                    tmp_path / "reports")
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "building tampered failed" in proc.stdout
    assert "THESE PACKAGES DO NOT MATCH THE HASHES" in proc.stdout
    assert victim.sha256 in proc.stdout and "Traceback" not in proc.stdout
    shutil.rmtree(cache)
