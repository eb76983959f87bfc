"""A plain (non-editable) install works from any folder: the Dockerfile templates, the page
templates and bench/ with its schema ship inside the package, and build the very images a
checkout builds."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from e2e_support import E2E_MATRIX, ROOT

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> str:
    """`pip install .` into a folder of its own (the kit's dependencies come from this venv)."""
    target = tmp_path_factory.mktemp("site")
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                           "--target", str(target), str(ROOT)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not (target / "envbench" / "__init__.py").is_symlink()
    return str(target)


def _envbench(installed: str, env: dict[str, str], cwd: object,
              *args: object) -> subprocess.CompletedProcess[str]:
    # The installed copy first on the path, run from a folder that holds no checkout.
    env = dict(env, PYTHONPATH=installed)
    return subprocess.run([sys.executable, "-m", "envbench", *map(str, args)], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=900)


def test_the_installed_package_is_the_one_that_runs(installed, tmp_path):
    proc = subprocess.run([sys.executable, "-c", "import bench, envbench; "
                           "print(envbench.__file__); print(bench.__file__)"],
                          cwd=tmp_path, env=dict(os.environ, PYTHONPATH=installed),
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert all(line.startswith(installed) for line in proc.stdout.split()), proc.stdout


def test_check_and_build_from_another_folder_make_the_checkouts_images(installed, e2e_env,
                                                                       first_run, tmp_path):
    check = _envbench(installed, e2e_env, tmp_path, "check", "--matrix", E2E_MATRIX.resolve(),
                      "--synthetic")
    assert check.returncode == 0 and "Traceback" not in check.stderr, check.stderr
    assert "valid, 2 cells" in check.stdout
    build = _envbench(installed, e2e_env, tmp_path, "build", "--matrix", E2E_MATRIX.resolve(),
                      "--reports", tmp_path / "reports", "--offline")
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    # The same tags as the checkout's first run: the same Dockerfiles, bench/ and locks.
    for name in ("debian-torch1.13", "torch2.13-cpu"):
        assert "%s: envbench/%s:" % (name, name) in build.stdout
        assert "exists, not rebuilt" in build.stdout.split("%s: envbench/" % name)[1]
