"""The torch wheelhouse the demo and the tests build from: PyTorch's CPU index is asked once
before pip is pointed at it, and an index that does not answer costs one short wait, not
pip's retries (85 s from a fresh clone here); an index that answers is the one used.
Real pip against real servers on 127.0.0.1, with wheels made here."""
from __future__ import annotations

import io
import os
import socket
import threading
import zipfile
from pathlib import Path

import pytest
from simple_index import serving

from envbench.images import wheelhouse


def _wheel(folder: Path, name: str, version: str) -> Path:
    """A minimal, valid pure-Python wheel: enough for `pip download` to take it."""
    folder.mkdir(parents=True, exist_ok=True)
    info = "%s-%s.dist-info" % (name, version)
    path = folder / ("%s-%s-py3-none-any.whl" % (name, version))
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("%s/__init__.py" % name, "")
        z.writestr(info + "/METADATA", "Metadata-Version: 2.1\nName: %s\nVersion: %s\n"
                   % (name, version))
        z.writestr(info + "/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: "
                   "true\nTag: py3-none-any\n")
        z.writestr(info + "/RECORD", "")
    return path


def _wheels(folder: Path) -> list[Path]:
    return [_wheel(folder, "torch", "2.13.0"), _wheel(folder, "numpy", "2.0.0")]


@pytest.fixture
def isolated_pip(tmp_path, monkeypatch):
    """The host's pip with no configuration of its own (no index, no local wheels), and a
    cache of the test's own."""
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("ENVBENCH_CACHE", str(tmp_path / "cache"))
    for name in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX",
                 "PIP_CONSTRAINT", "PIP_RETRIES", "PIP_PROXY", "PIP_TRUSTED_HOST"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_an_index_that_does_not_answer_is_asked_once_then_the_hosts_configuration_serves(
        tmp_path, isolated_pip):
    silent = socket.socket()  # accepts connections and never says a word
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)
    accepted: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                accepted.append(silent.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    isolated_pip.setattr(wheelhouse, "PYTORCH_CPU_INDEX",
                         "http://127.0.0.1:%d/whl/cpu" % silent.getsockname()[1])
    isolated_pip.setattr(wheelhouse, "INDEX_ANSWER_S", 1)
    # The host's configuration: an index that answers. pip, pointed at the silent one, would
    # connect again and again (a short timeout and one retry keep that to seconds here).
    torch, numpy = _wheels(tmp_path / "served")
    isolated_pip.setenv("PIP_DEFAULT_TIMEOUT", "2")
    isolated_pip.setenv("PIP_RETRIES", "1")
    said = io.StringIO()
    try:
        with serving({"torch": torch, "numpy": numpy}) as hosts:
            isolated_pip.setenv("PIP_INDEX_URL", "http://127.0.0.1:%d/whl/cpu" % hosts.port)
            folder = wheelhouse.ensure_wheelhouse("2.13.0", "3.11", said)
    finally:
        silent.close()
    assert sorted(p.name for p in folder.glob("*.whl")) == sorted([torch.name, numpy.name])
    assert "/files/%s" % torch.name in hosts.asked
    # One connection: the question. pip was never pointed at it.
    assert len(accepted) == 1
    assert "PyTorch's CPU index does not answer" in said.getvalue()
    assert "comes from this host's pip configuration" in said.getvalue()


def test_an_index_that_answers_is_the_one_pip_uses(tmp_path, isolated_pip):
    # The host's own configuration names an index that refuses: had the first attempt
    # failed, the fetch would fail too, at once, rather than pass from elsewhere.
    isolated_pip.setenv("PIP_INDEX_URL", "http://127.0.0.1:1/simple")
    isolated_pip.setenv("PIP_RETRIES", "0")
    torch, numpy = _wheels(tmp_path / "served")
    said = io.StringIO()
    with serving({"torch": torch, "numpy": numpy}) as index:
        isolated_pip.setattr(wheelhouse, "PYTORCH_CPU_INDEX",
                             "http://127.0.0.1:%d/whl/cpu" % index.port)
        folder = wheelhouse.ensure_wheelhouse("2.13.0", "3.11", said)
    assert (folder / torch.name).read_bytes() == torch.read_bytes()
    assert "/files/%s" % torch.name in index.asked
    assert "does not answer" not in said.getvalue()


def test_the_question_goes_through_pips_proxy_as_the_fetch_does(tmp_path, isolated_pip):
    """pip.conf's (or PIP_PROXY's) proxy: the index answers only through it here (its name
    does not resolve), so asking it directly would wrongly send pip elsewhere."""
    isolated_pip.setenv("PIP_INDEX_URL", "http://127.0.0.1:1/simple")  # fails at once if used
    isolated_pip.setenv("PIP_RETRIES", "0")
    torch, numpy = _wheels(tmp_path / "served")
    isolated_pip.setattr(wheelhouse, "PYTORCH_CPU_INDEX", "http://cpu-index.invalid/whl/cpu")
    isolated_pip.setenv("PIP_TRUSTED_HOST", "cpu-index.invalid")  # plain http, in a test
    said = io.StringIO()
    with serving({"torch": torch, "numpy": numpy}) as proxy:
        isolated_pip.setenv("PIP_PROXY", "http://127.0.0.1:%d" % proxy.port)
        folder = wheelhouse.ensure_wheelhouse("2.13.0", "3.11", said)
    assert (folder / torch.name).read_bytes() == torch.read_bytes()
    assert "http://cpu-index.invalid/whl/cpu/torch/" in proxy.asked  # the question, proxied
    assert "does not answer" not in said.getvalue()
