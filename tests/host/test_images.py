"""Rendered Dockerfiles and content-hash tags (the builds themselves are in tests/e2e)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from envbench import images
from envbench.errors import UserError
from envbench.matrix import Environment

SEED = Environment(python="3.8", torch="1.12.1", torchvision="0.13.1", cuda="11.6",
                   index_url="https://wheels.example/cu116")


def test_cuda_image_pins_the_stack_and_checks_it_at_build_time():
    text = images.plan("seed", SEED, Path(".")).dockerfile
    assert text.startswith("# Rendered by envbench") and "FROM python:3.8-slim" in text
    assert ("pip install --extra-index-url https://wheels.example/cu116 torch==1.12.1 "
            "torchvision==0.13.1") in text
    assert "assert c == '11.6'" in text and "assert t.startswith('1.12.1')" in text
    assert "NVIDIA_VISIBLE_DEVICES=all" in text
    # bench/ is copied after torch is installed, so a code change reuses the torch layers.
    assert text.index("pip install") < text.index("COPY bench")
    assert "USER envbench" in text


def test_cpu_and_debian_images():
    cpu = images.plan("c", Environment(torch="2.13.0"), Path(".")).dockerfile
    assert "assert c is None" in cpu and "NVIDIA" not in cpu
    debian = images.plan("d", Environment(source="debian", base="envbench/debian:bookworm"),
                         Path(".")).dockerfile
    assert "FROM envbench/debian:bookworm" in debian
    assert "apt-get install -y --no-install-recommends python3 python3-torch" in debian
    assert "pip install" not in debian


def test_the_tag_is_a_content_hash(tmp_path, monkeypatch):
    p = images.plan("seed", SEED, Path("."))
    assert p.tag == images.plan("seed", SEED, Path(".")).tag
    assert p.tag.startswith("envbench/seed:")
    other = images.plan("seed", SEED.model_copy(update={"torch": "1.12.0"}), Path("."))
    assert other.tag != p.tag
    copy = tmp_path / "bench"
    shutil.copytree(images.BENCH_DIR, copy)
    monkeypatch.setattr(images, "BENCH_DIR", copy)
    assert images.plan("seed", SEED, Path(".")).tag == p.tag
    (copy / "model.py").write_text((copy / "model.py").read_text() + "\n# changed\n")
    assert images.plan("seed", SEED, Path(".")).tag != p.tag


def test_variables_custom_templates_and_wheelhouses(tmp_path, monkeypatch):
    env = Environment(torch="2.13.0", index_url="${ENVBENCH_TEST_INDEX}/cpu")
    monkeypatch.delenv("ENVBENCH_TEST_INDEX", raising=False)
    with pytest.raises(UserError, match=r"environments.x.index_url: \$\{ENVBENCH_TEST_INDEX\}"):
        images.plan("x", env, tmp_path)
    monkeypatch.setenv("ENVBENCH_TEST_INDEX", "https://idx.example/")
    rendered = images.plan("x", env, tmp_path).dockerfile
    assert "--extra-index-url https://idx.example/cpu " in rendered

    (tmp_path / "mine.j2").write_text("{% extends 'cpu.Dockerfile.j2' %}\n"
                                      "{% block device_env %}ENV MINE=1{% endblock %}\n")
    custom = images.plan("x", Environment(torch="2.13.0", dockerfile="mine.j2"), tmp_path)
    assert "ENV MINE=1" in custom.dockerfile
    with pytest.raises(UserError, match="dockerfile: .*nope.j2 does not exist"):
        images.plan("x", Environment(torch="2.13.0", dockerfile="nope.j2"), tmp_path)

    (tmp_path / "wheels").mkdir()
    with pytest.raises(UserError, match="wheelhouse: .*holds no wheels"):
        images.plan("x", Environment(torch="2.13.0", wheelhouse="wheels"), tmp_path)
    (tmp_path / "wheels" / "torch-2.13.0-cp311-none-any.whl").write_bytes(b"x")
    wheel = images.plan("x", Environment(torch="2.13.0", wheelhouse="wheels"), tmp_path)
    assert "pip install --no-index --find-links /tmp/wheelhouse torch==2.13.0" in wheel.dockerfile
