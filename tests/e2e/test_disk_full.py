"""A build that fills the engine's disk: one sentence with the engine's reason, no traceback.

A second, small engine (its data on a 400 MiB tmpfs, its socket in a temporary folder)
is started for this test alone and stopped after it.
"""
from __future__ import annotations

import json
import os
import subprocess

import pytest
from e2e_support import envbench, second_engine

pytestmark = pytest.mark.e2e


@pytest.fixture
def small_engine(client, base_tag, tmp_path_factory):
    home = tmp_path_factory.mktemp("small-engine")
    data = home / "data"
    data.mkdir()
    if os.getuid() != 0:
        pytest.skip("starting a second engine needs root")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=400m", "tmpfs", str(data)], check=True)
    try:
        with second_engine(client, base_tag, home, data) as socket:
            yield socket
    finally:
        subprocess.run(["umount", str(data)], check=False)


def test_a_build_that_fills_the_disk_is_one_sentence(small_engine, e2e_env, base_tag, tmp_path):
    (tmp_path / "full.j2").write_text("FROM {{ base }}\n"
                                      "RUN dd if=/dev/zero of=/big bs=1M count=600\n")
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text("environments:\n  full: {source: debian, base: \"%s\", dockerfile: full.j2}\n"
                      "targets:\n  cpu: {device: cpu}\n"
                      "benchmark: {epochs: 1, repeats: 1, data: synthetic}\n" % base_tag)
    env = dict(e2e_env, DOCKER_HOST=small_engine)
    proc = envbench(env, "bench", "--matrix", matrix, "--reports", tmp_path / "reports",
                    "--offline", timeout=600)
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "Traceback" not in proc.stdout
    # A Debian stack's size is a guess (no lock): the kit warns before, the build decides.
    assert "warning: the images to build may not fit: " in proc.stdout
    assert "building full failed" in proc.stdout and "No space left on device" in proc.stdout
    assert "\x1b[" not in proc.stdout  # the engine's colour codes are stripped
    cell = [line for line in proc.stdout.splitlines() if line.startswith("[1/1]")]
    assert cell and "failed: image build failed" in cell[0], proc.stdout[-2000:]


@pytest.fixture
def full_results(tmp_path):
    """REPORTS/results on a tmpfs of one page, filled: bench and the host's logs have room
    (REPORTS/.cells and REPORTS/logs are elsewhere), the saved record has none."""
    if os.getuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    results = tmp_path / "reports" / "results"
    results.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", str(results)],
                   check=True)
    try:
        with (results / "filler").open("wb", buffering=0) as f:
            try:
                while f.write(b"\0" * 1024):
                    pass
            except OSError:
                pass  # full
        yield results
    finally:
        subprocess.run(["umount", str(results)], check=False)


def test_a_finished_result_the_disk_has_no_room_for_is_kept_and_taken_in_next_time(
        full_results, e2e_env, tmp_path):
    matrix = tmp_path / "matrix.yaml"
    # The e2e matrix's Debian stack, as it writes it: its image is built once for the module.
    matrix.write_text("environments:\n  debian-torch1.13: {python: \"3.11\", torch: \"1.13\", "
                      "source: debian, base: \"${ENVBENCH_BASE}\"}\n"
                      "targets:\n  cpu: {device: cpu}\n"
                      "benchmark: {epochs: 1, repeats: 1, data: synthetic, limit: 512,"
                      " limit_test: 256, probe: false}\n")
    reports = tmp_path / "reports"
    proc = envbench(e2e_env, "bench", "--matrix", matrix, "--reports", reports, "--offline",
                    timeout=900)
    assert proc.returncode == 1 and "Traceback" not in proc.stdout, proc.stdout[-3000:]
    said = [line for line in proc.stdout.splitlines() if line.startswith("error: ")]
    assert len(said) == 1, proc.stdout[-2000:]
    assert said[0].startswith("error: no space left to save the result of "
                              "debian-torch1.13__cpu__")
    assert "bench's record of it is kept as %s" % (reports / ".cells") in said[0]
    assert "on the disk of %s, 0.0 MB free" % full_results in said[0]
    assert said[0].endswith("which takes the kept result in instead of running the cell again")
    (kept,) = (reports / ".cells").glob("kept-cell-*/*.json")
    # Room again: the same command takes the kept result in and runs no container.
    (full_results / "filler").unlink()
    subprocess.run(["mount", "-o", "remount,size=1m", str(full_results)], check=True)
    again = envbench(e2e_env, "bench", "--matrix", matrix, "--reports", reports, "--offline",
                     timeout=900)
    assert again.returncode == 0, again.stdout[-3000:]
    assert "taken from the run that filled the disk" in again.stdout
    assert "epoch 1/1" not in again.stdout  # bench did not run again
    saved = json.loads((full_results / kept.name).read_text())
    assert saved["status"] == "ok" and saved["cell"]["environment"] == "debian-torch1.13"
    assert "disk filled" in saved["noise"]["unavailable"]
    assert not list((reports / ".cells").glob("kept-*"))
