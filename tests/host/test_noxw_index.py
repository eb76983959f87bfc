"""./noxw and a package index that needs credentials (https://user:token@host/simple): urllib
sends no userinfo and reads "token@host" as a port, so noxw sends them as a Basic header, to
the index's own host only, and never prints them. Real HTTP on 127.0.0.1."""
from __future__ import annotations

import base64
import importlib.util
import ssl
from pathlib import Path

import pytest
from simple_index import serving

ROOT = Path(__file__).resolve().parents[2]
SPEC = importlib.util.spec_from_file_location("noxw", ROOT / "bootstrap" / "noxw.py")
noxw = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(noxw)

WHEEL = b"not really a wheel, but bytes with a pinned size" * 100
NAME = "uv-0.13.9-py3-none-any.whl"
SECRET = "s3cr3t-t0ken"


@pytest.fixture
def index(tmp_path):
    wheel = tmp_path / "served" / NAME
    wheel.parent.mkdir()
    wheel.write_bytes(WHEEL)
    token = "Basic " + base64.b64encode(("envbench:%s" % SECRET).encode()).decode()
    with serving({"uv": wheel}, authorization=token) as server:
        yield server


def test_credentials_in_the_index_url_are_sent_as_a_header_and_the_file_comes(index, tmp_path):
    port = index.port
    url = "http://envbench:%s@127.0.0.1:%d/simple" % (SECRET, port)
    found = noxw.file_url(url, NAME, ssl.create_default_context())
    assert found.split("#")[0] == "http://127.0.0.1:%d/files/%s" % (port, NAME)
    _, header = noxw.credentials(url)
    dest = tmp_path / NAME
    noxw.download(found, dest, len(WHEEL), ssl.create_default_context(), header)
    assert dest.read_bytes() == WHEEL
    assert all(given is not None for given in index.headers_seen)


def test_a_wrong_token_is_reported_without_the_token(index, tmp_path, monkeypatch):
    port = index.port
    wrong = "http://envbench:not-the-%s@127.0.0.1:%d/simple" % (SECRET, port)
    monkeypatch.setenv("ENVBENCH_INDEX_URL", wrong)
    monkeypatch.setenv("ENVBENCH_CACHE", str(tmp_path))
    monkeypatch.setattr(noxw, "wheel_for_platform", lambda: (NAME, "0" * 64, len(WHEEL)))
    with pytest.raises(noxw.NoxwError) as raised:
        noxw.ensure_uv({})
    message = str(raised.value)
    assert "Unauthorized" in message and "127.0.0.1:%d" % port in message
    assert SECRET not in message and "not-the" not in message


def test_a_token_that_reads_as_a_port_is_no_traceback_and_no_secret(tmp_path, monkeypatch):
    # "user:tok@host" without a port: urllib alone raises InvalidURL, quoting the token.
    monkeypatch.setenv("ENVBENCH_INDEX_URL", "http://user:%s@127.0.0.1:1/simple" % SECRET)
    monkeypatch.setenv("ENVBENCH_CACHE", str(tmp_path))
    monkeypatch.setattr(noxw, "wheel_for_platform", lambda: (NAME, "0" * 64, len(WHEEL)))
    with pytest.raises(noxw.NoxwError) as raised:
        noxw.ensure_uv({})
    assert SECRET not in str(raised.value)


def test_printed_index_urls_keep_only_the_host():
    assert noxw.shown("https://u:%s@idx.example/%s/simple" % (SECRET, SECRET)) == \
        "https://idx.example/…"


@pytest.mark.parametrize("url", ["https://exa mple/simple", "https://x.example/simple\nEVIL",
                                 "https://u:%s@[::1/simple" % SECRET,
                                 "http://127.0.0.1:99999/simple",
                                 "ftp://u:%s@mirror/simple" % SECRET])
def test_an_index_url_urllib_cannot_ask_is_one_sentence_without_its_secret(url, tmp_path,
                                                                           monkeypatch):
    monkeypatch.setenv("ENVBENCH_INDEX_URL", url)
    monkeypatch.setenv("ENVBENCH_CACHE", str(tmp_path))
    monkeypatch.setattr(noxw, "wheel_for_platform", lambda: (NAME, "0" * 64, len(WHEEL)))
    with pytest.raises(noxw.NoxwError) as raised:
        noxw.ensure_uv({})
    assert "is not an http(s) URL" in str(raised.value)
    assert SECRET not in str(raised.value)
