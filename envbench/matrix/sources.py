"""Where an environment's packages come from, as this machine sees the matrix: ${VAR}s
expanded and checked, the wheelhouse folder, the index, the pinned requirements."""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from envbench.matrix import grammars
from envbench.matrix.models import Environment
from envbench.user_errors import BadInput, UserError

STACKS_HINT = "see docs/stacks.md, 'Offline and custom indexes'"


def expand(value: str, where: str, hint: str = STACKS_HINT) -> str:
    """${VAR} and ${VAR:-default} in matrix strings come from the environment, as in a shell;
    an unset variable without a default is a clear error (``hint``: where to read on)."""
    def sub(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if os.environ.get(name):
            return os.environ[name].rstrip("/")
        if default is not None:
            return default.rstrip("/")
        raise BadInput("%s: ${%s} is not set (%s)" % (where, name, hint))
    return grammars.VARIABLE.sub(sub, value)


def checked(value: str, check: Any, where: str) -> str:
    """A value after ${VAR} expansion, checked as strictly as one written in the matrix."""
    problem = check(value)
    if problem is not None:  # a matrix value the kit refuses: bad input, as in the file
        raise BadInput("%s: %s" % (where, problem))
    return value


def wheelhouse(name: str, env: Environment, matrix_dir: Path) -> Path | None:
    """The environment's wheelhouse folder (an offline mirror to lock against), or None."""
    if not env.wheelhouse:
        return None
    where = "environments.%s.wheelhouse" % name
    folder = (matrix_dir / expand(env.wheelhouse, where)).resolve()
    if not folder.is_dir() or not any(folder.glob("*.whl")):
        raise UserError("%s: %s holds no wheels (fill it with `pip download torch==%s -d DIR`)"
                        % (where, folder, env.torch))
    return folder


def index_url(name: str, env: Environment) -> str | None:
    if not env.index_url:
        return None
    where = "environments.%s.index_url" % name
    return checked(expand(env.index_url, where), grammars.index_url, where)


def requirements(env: Environment) -> list[str]:
    """What a pip environment pins: torch, torchvision where it names one, numpy (at the
    version the resolver picks for them) unless the matrix says numpy: false, and the
    packages a user's workload needs, as the matrix writes them."""
    if env.source != "pip":
        return []
    pins = ["torch==%s" % env.torch]
    if env.torchvision:
        pins.append("torchvision==%s" % env.torchvision)
    if env.numpy:
        pins.append("numpy")
    return pins + list(env.packages)
