"""pip's settings, read the way pip reads them (by the host, and by ./noxw before any pip).

Standard library only, Python 3.8 syntax: bench (in every image: torch maybe absent), the
host and ./noxw (bootstrap/noxw.py imports it by path, before anything is installed) share it.
"""
from __future__ import annotations

import configparser
import os
import sys
from typing import Callable, Dict, List, Mapping, Optional

from bench.boundedread import Unreadable, read_regular
from bench.messages import first_line

PIP_CONFIG_BYTES = 1 << 20   # a pip.conf is a few lines
# The index an installed pip uses when nothing is configured, asked of that pip (the kit
# writes no package registry's address of its own): pip's internal name, so callers guard it.
PIP_DEFAULT_QUERY = "from pip._internal.models.index import PyPI; print(PyPI.simple_url)"


def pip_config_files(environ: Mapping[str, str], prefix: str = sys.prefix) -> List[str]:
    """pip's configuration files in the order pip loads them, a later one winning: the
    site-wide ones (each of XDG_CONFIG_DIRS, then /etc), the user's (the legacy ~/.pip, then
    XDG_CONFIG_HOME's), the interpreter's own (its prefix: a venv's), then PIP_CONFIG_FILE.
    The user's are skipped where PIP_CONFIG_FILE names a file that exists; none at all is
    read where it names the null device (pip's way to turn configuration off)."""
    named = environ.get("PIP_CONFIG_FILE")
    if named == os.devnull:
        return []
    home = environ.get("HOME") or os.path.expanduser("~")
    found = [os.path.join(d, "pip", "pip.conf")
             for d in (environ.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(os.pathsep) if d]
    found.append("/etc/pip.conf")
    if not (named and os.path.exists(named)):
        found.append(os.path.join(home, ".pip", "pip.conf"))
        found.append(os.path.join(environ.get("XDG_CONFIG_HOME") or
                                  os.path.join(home, ".config"), "pip", "pip.conf"))
    found.append(os.path.join(prefix, "pip.conf"))
    if named:
        found.append(named)
    return found


def _pip_name(name: str) -> str:
    return name.lower().replace("_", "-").lstrip("-")


def pip_settings(environ: Optional[Mapping[str, str]] = None, prefix: str = sys.prefix,
                 warn: Optional[Callable[[str], None]] = None) -> Dict[str, str]:
    """pip's settings by name ('index-url', 'cert', 'proxy', ...), weighed as pip weighs them:
    a PIP_* variable over the section of the commands the kit runs ([install] over
    [download]) over [global], each section merged over the files in pip's order, a later
    file winning. Read without pip, which a stock VM lacks; a file that cannot be read or
    parsed is passed over, said through ``warn``."""
    environ = os.environ if environ is None else environ

    def passed_over(path: str, why: object) -> None:
        if warn is not None:
            warn("pip's configuration %s is passed over: %s" % (path, why))

    # Each section merged over the files; then global, download, install, the variables.
    sections = {"global": {}, "download": {}, "install": {}}  # type: Dict[str, Dict[str, str]]
    for path in pip_config_files(environ, prefix):
        try:
            text = read_regular(path, PIP_CONFIG_BYTES).decode("utf-8")
        except Unreadable as exc:
            if exc.kind != "os" or os.path.lexists(path):  # not there: nothing configured
                passed_over(path, exc)
            continue
        except UnicodeDecodeError:
            passed_over(path, "not UTF-8 text")
            continue
        parser = configparser.RawConfigParser()
        try:
            parser.read_string(text, source=path)
        except configparser.Error as exc:
            passed_over(path, first_line(exc))
            continue
        for section in parser.sections():
            if section in sections:
                sections[section].update((_pip_name(k), v) for k, v in parser.items(section))
    found = dict(sections["global"])
    found.update(sections["download"])
    found.update(sections["install"])  # uv and the VMs install: install's settings win
    found.update((_pip_name(k[4:]), v) for k, v in environ.items()
                 if k.startswith("PIP_") and v and k != "PIP_CONFIG_FILE")
    return {k: v for k, v in found.items() if v}
