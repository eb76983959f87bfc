"""What a locked torch wheel was built for, read from the wheel in the host's cache before
anything is built.

The image checks its stack again once torch is installed (the Dockerfile's last RUN), but by
then a CUDA build has unpacked ~9 GB in the builder stage: a matrix that misnames the CUDA
version of its wheels (PyPI's torch 2.14.1 is a CUDA 13.0 build whatever the matrix says)
would cost that disk and minutes to learn what torch/version.py inside the wheel says now.
"""
from __future__ import annotations

import ast
import zipfile
from pathlib import Path

from envbench import files
from envbench.images.lock import MAX_WHEEL_BYTES
from envbench.user_errors import UserError

VERSION_FILE = "torch/version.py"
MAX_VERSION_BYTES = 64 * 1024


def built_for(wheel: Path) -> tuple[str, str | None]:
    """(torch's version, the CUDA version it was built for or None) from the wheel's
    torch/version.py, read as literals: nothing in the wheel runs on the host."""
    try:
        with files.regular(wheel, MAX_WHEEL_BYTES) as stream, \
                zipfile.ZipFile(stream) as archive:
            # Its declared size first: a planted zip bomb in the cache would otherwise
            # inflate gigabytes here, before pip's hash check in the build could refuse it.
            info = archive.getinfo(VERSION_FILE)
            if info.file_size > MAX_VERSION_BYTES:
                raise UserError("%s: its %s would unpack to %d bytes (torch's is under 1 kB): "
                                "not a torch wheel; remove it from the cache"
                                % (wheel.name, VERSION_FILE, info.file_size))
            with archive.open(info) as member:
                source = member.read(MAX_VERSION_BYTES + 1).decode("utf-8")
    except (files.Unreadable, OSError, KeyError, zipfile.BadZipFile,
            UnicodeDecodeError) as exc:
        raise UserError("%s: cannot read %s from it (%s)" % (wheel.name, VERSION_FILE, exc))
    values: dict[str, object] = {}
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise UserError("%s: its %s does not parse (%s)" % (wheel.name, VERSION_FILE, exc))
    for node in tree.body:
        # `cuda = '11.6'` (torch 1.x) and `cuda: Optional[str] = '13.0'` (torch 2.x).
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and isinstance(value, ast.Constant):
            values[target.id] = value.value
    version, cuda = values.get("__version__"), values.get("cuda")
    if not isinstance(version, str) or not (cuda is None or isinstance(cuda, str)):
        raise UserError("%s: its %s names no torch version or CUDA version"
                        % (wheel.name, VERSION_FILE))
    return version, cuda


def mismatch(wheels: list[Path], cuda: str | None) -> str | None:
    """The sentence the image's own check would print, for a locked torch wheel built for
    another CUDA version than the matrix names (or for one where the matrix names none);
    None where the wheels agree or hold no torch."""
    for wheel in wheels:
        if not wheel.name.lower().startswith("torch-"):
            continue
        _, built = built_for(wheel)
        if cuda is None and built is not None:
            return ("expected a CPU-only build of torch, got one for CUDA %s (%s)"
                    % (built, wheel.name))
        if cuda is not None and built is None:
            return ("torch built without CUDA (a CPU-only build), matrix says %s (%s)"
                    % (cuda, wheel.name))
        if cuda is not None and built != cuda:
            return "torch built for CUDA %s, matrix says %s (%s)" % (built, cuda, wheel.name)
    return None
