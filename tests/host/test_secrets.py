"""An index password never leaves the kit: an index_url holding user:token@ (given through
${VAR}) whose wheel fetch fails is said without the token, and a record quoting such a URL is
written, paged, summarised and tabulated without it. Real pip against a closed local port;
real result files and pages."""
from __future__ import annotations

import io
import random
from pathlib import Path

import pytest
from report_fixture import make_record

from envbench import redact, terminal
from envbench.images import wheelcache
from envbench.images.lock import Lock, Wheel
from envbench.matrix import grammars
from envbench.report import pages
from envbench.results import store
from envbench.user_errors import UserError

TOKEN = "s3cr3t-t0ken"
URL = "https://alice:%s@127.0.0.1:9/simple" % TOKEN  # port 9: nothing answers


def test_a_failed_wheel_fetch_through_an_index_with_credentials_says_no_token(tmp_path):
    lock = Lock("mirrored", tmp_path / "mirrored.pylock.toml", "0" * 64, "1" * 64, "0.9",
                (Wheel("einops", "0.8.2", "einops-0.8.2-py3-none-any.whl", "2" * 64, None,
                       None),), python="3.11", platform="x86_64-manylinux_2_28")
    out = io.StringIO()
    with pytest.raises(UserError) as caught:
        wheelcache.fetch_through_index(list(lock.wheels), lock, URL, tmp_path, out)
    said = str(caught.value)
    assert "pip could not fetch the locked wheels through https://***@127.0.0.1:9/simple" \
        in said, said
    assert TOKEN not in said and TOKEN not in out.getvalue()


def test_a_record_quoting_a_url_with_credentials_is_stored_and_reported_without_them(
        tmp_path):
    record = make_record("mirrored", "cpu", 256, 0, random.Random(3))
    record["status"] = "failed"
    record["error"] = {"type": "BuildFailed",
                       "message": "pip said: 403 from %s/torch/ (bad token)" % URL}
    results = tmp_path / "results"
    results.mkdir()
    store.write(results / "r0.json", record)
    assert TOKEN not in (results / "r0.json").read_text()
    written = pages.render_files([results], tmp_path / "page")
    for path in written.values():
        text = Path(path).read_text()
        assert TOKEN not in text, path
    assert "https://***@127.0.0.1:9/simple/torch/" in (tmp_path / "page" / "index.html") \
        .read_text()


@pytest.mark.parametrize("text", [
    "https://alice:%s@mirror.example/simple" % TOKEN,
    "uv said: Failed to fetch https://%s@mirror.example/simple/torch/" % TOKEN,
    "two: http://a:%s@x/ and https://b:%s@y/" % (TOKEN, TOKEN),
])
def test_every_way_out_masks_the_same_way(text):
    # One function behind the grammar's check, errors, the terminal and stored records.
    for shown in (redact.credentials(text), grammars.masked(text), str(UserError(text)),
                  terminal.safe(text), redact.in_record({"m": [text]})["m"][0]):
        assert TOKEN not in shown and "***@" in shown, shown
