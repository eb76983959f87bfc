"""What a locked torch wheel was built for, read from its torch/version.py before any build:
the sentences the image's own check would print, without the ~9 GB a CUDA build unpacks
first. The wheels here are real zip files whose version.py is written the way torch 1.12
(`cuda = '11.6'`) and torch 2.x (`cuda: Optional[str] = '13.0'`) write it."""
from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from envbench.images import wheelstack
from envbench.user_errors import UserError

TORCH_1_12 = """\
__version__ = '1.12.1+cu116'
debug = False
cuda = '11.6'
git_version = '664058fa83f1d8eede5d66418abff6e20bd76ca8'
hip = None
"""
TORCH_2_14 = """\
from typing import Optional

__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'xpu']
__version__ = '2.14.1'
debug = False
cuda: Optional[str] = '13.0'
git_version = '0000000000000000000000000000000000000000'
hip: Optional[str] = None
xpu: Optional[str] = None
"""
TORCH_CPU = TORCH_2_14.replace("__version__ = '2.14.1'", "__version__ = '2.13.0+cpu'") \
    .replace("cuda: Optional[str] = '13.0'", "cuda: Optional[str] = None")


def wheel(folder: Path, name: str, version_py: str | None) -> Path:
    path = folder / name
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("torch/__init__.py", "")
        if version_py is not None:
            archive.writestr("torch/version.py", version_py)
    return path


def test_the_version_and_cuda_are_read_as_either_torch_writes_them(tmp_path):
    assert wheelstack.built_for(wheel(tmp_path, "torch-1.12.1+cu116-cp310-cp310-linux_x86_64"
                                      ".whl", TORCH_1_12)) == ("1.12.1+cu116", "11.6")
    assert wheelstack.built_for(wheel(tmp_path, "torch-2.14.1-cp311-cp311-manylinux_2_28_"
                                      "x86_64.whl", TORCH_2_14)) == ("2.14.1", "13.0")
    assert wheelstack.built_for(wheel(tmp_path, "torch-2.13.0+cpu-cp311-cp311-linux_x86_64"
                                      ".whl", TORCH_CPU)) == ("2.13.0+cpu", None)


def test_a_wheel_built_for_another_cuda_is_named_with_both_versions(tmp_path):
    numpy = wheel(tmp_path, "numpy-2.2.0-cp311-cp311-linux_x86_64.whl", None)
    vision = wheel(tmp_path, "torchvision-0.29.1-cp311-cp311-linux_x86_64.whl", None)
    cu130 = wheel(tmp_path, "torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl", TORCH_2_14)
    assert wheelstack.mismatch([numpy, vision, cu130], "13.0") is None
    assert wheelstack.mismatch([numpy, vision, cu130], "12.8") == (
        "torch built for CUDA 13.0, matrix says 12.8 (%s)" % cu130.name)
    # A CPU stack must not carry a CUDA build (the CPU image's own check, said earlier).
    assert wheelstack.mismatch([cu130], None) == (
        "expected a CPU-only build of torch, got one for CUDA 13.0 (%s)" % cu130.name)


def test_a_cpu_build_is_refused_for_a_cuda_stack_and_passes_for_a_cpu_one(tmp_path):
    cpu = wheel(tmp_path, "torch-2.13.0+cpu-cp311-cp311-linux_x86_64.whl", TORCH_CPU)
    assert wheelstack.mismatch([cpu], None) is None
    assert wheelstack.mismatch([cpu], "12.8") == (
        "torch built without CUDA (a CPU-only build), matrix says 12.8 (%s)" % cpu.name)


def test_wheels_without_torch_say_nothing(tmp_path):
    # Debian's stacks have no wheels; a lock may hold no torch at all.
    assert wheelstack.mismatch([], "13.0") is None
    assert wheelstack.mismatch([wheel(tmp_path, "numpy-2.2.0-py3-none-any.whl", None)],
                               "13.0") is None


@pytest.mark.parametrize("version_py, why", [
    (None, "cannot read torch/version.py"),
    ("cuda = '13.0'\n", "names no torch version"),
    ("__version__ = '2.14.1'\ncuda = 13\n", "names no torch version or CUDA version"),
    ("__version__ = (\n", "does not parse"),
])
def test_a_torch_wheel_without_a_readable_version_is_refused_naming_it(tmp_path, version_py,
                                                                       why):
    bad = wheel(tmp_path, "torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl", version_py)
    with pytest.raises(UserError) as caught:
        wheelstack.mismatch([bad], "13.0")
    assert str(caught.value).startswith(bad.name + ": ") and why in str(caught.value)


def test_a_file_that_is_not_a_zip_is_refused_naming_it(tmp_path):
    bad = tmp_path / "torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl"
    bad.write_bytes(b"not a zip")
    with pytest.raises(UserError, match="^%s: cannot read torch/version.py" % bad.name):
        wheelstack.built_for(bad)
