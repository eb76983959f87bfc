"""The report: numbers equal the JSON, self-contained, escaped, deterministic, and it renders."""
from __future__ import annotations

import csv
import html.parser
import os
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from report_fixture import HOSTILE, make_record, write_set

from bench import result
from envbench import report
from envbench.errors import UserError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    folder = tmp_path_factory.mktemp("report")
    records = write_set(folder / "results", hostile=True)
    written = report.render([folder / "results"], folder / "out")
    return records, written, written["html"].read_text()


def _row(page: str, key: str, table: str = "headline") -> str:
    """The HTML of the first row with data-key=KEY inside tables of class TABLE."""
    for block in re.findall(r'<table class="%s".*?</table>' % table, page, flags=re.S):
        match = re.search(r'<tr data-key="%s">(.*?)</tr>' % re.escape(key), block, flags=re.S)
        if match:
            return match.group(1)
    raise AssertionError("no row %s in %s" % (key, table))


def test_headline_numbers_equal_those_computed_from_the_json(rendered):
    records, _, page = rendered
    ok = [r for r in records if r["status"] == "ok"]

    def median_epoch(env, target, batch):
        return statistics.median(r["summary"]["epoch_s_median"] for r in ok
                                 if r["cell"]["environment"] == env and
                                 r["cell"]["target"] == target and
                                 r["config"]["batch_size"] == batch)

    for env in ("seed-torch1.12-cu116", "torch2.5-cu124"):
        for batch in (32, 256):
            gpu, cpu = median_epoch(env, "gpu", batch), median_epoch(env, "cpu", batch)
            row = _row(page, "%s|gpu|batch_size=%d" % (env, batch))
            assert ">%.2f<" % gpu in row and ">%.2f×<" % (cpu / gpu) in row
            cells_row = _row(page, "%s|gpu|batch_size=%d" % (env, batch), "cells")
            price_epoch = 0.35 * gpu / 3600
            assert ">%s<" % report.money(price_epoch) in cells_row
    batch = re.search(r'<table class="batch">.*?</table>', page, flags=re.S).group(0)
    for env in ("seed-torch1.12-cu116", "torch2.5-cu124"):
        row = re.search(r"<tr><td>%s</td><td>RTX 3060</td>.*?</tr>" % env, batch, re.S).group(0)
        expected = ["%.2f×" % (median_epoch(env, "cpu", b) / median_epoch(env, "gpu", b))
                    for b in (32, 256)]
        assert re.findall(r'<td class="n">([^<]*)</td>', row) == expected
    seed_row = _row(page, "seed-torch1.12-cu116|gpu|batch_size=256")
    assert ">12.0%<" in seed_row and ">28.0%<" in seed_row  # data and backward shares
    # The write-up's shape: ~8.1x at batch 256 falling to ~5.3x at 32.
    speedup_256 = median_epoch("seed-torch1.12-cu116", "cpu", 256) / \
        median_epoch("seed-torch1.12-cu116", "gpu", 256)
    assert 7.9 < speedup_256 < 8.4


def test_the_page_parses_and_loads_nothing_from_outside(rendered):
    _, _, page = rendered

    class Balance(html.parser.HTMLParser):
        VOID = {"meta", "br", "img", "input", "link", "hr", "path", "use", "rect", "circle",
                "line", "polyline", "stop", "ellipse", "polygon"}

        def __init__(self):
            super().__init__()
            self.stack: list[str] = []

        def handle_starttag(self, tag, attrs):
            if tag not in self.VOID:
                self.stack.append(tag)

        def handle_startendtag(self, tag, attrs):
            pass

        def handle_endtag(self, tag):
            if tag in self.VOID:
                return
            assert self.stack and self.stack[-1] == tag, (tag, self.stack[-5:])
            self.stack.pop()

    parser = Balance()
    parser.feed(page)
    parser.close()
    assert parser.stack == []
    assert not re.search(r'(src|href)\s*=\s*["\']?(https?:)?//', page, flags=re.I)
    # url(#id) is an in-page reference (SVG clip paths); anything else would be a fetch.
    assert not re.search(r"url\((?!#)|@import|<link|<script|<iframe", page, flags=re.I)


def test_hostile_names_and_messages_render_as_text(rendered):
    _, written, page = rendered
    assert HOSTILE not in page and "<b>bold</b>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "CUDA out of memory &lt;b&gt;bold&lt;/b&gt;" in page
    summary = written["md"].read_text()
    assert HOSTILE not in summary and "&lt;script&gt;" in summary


def test_failures_and_optional_fields(rendered):
    _, _, page = rendered
    failures = re.search(r'<table class="failures">.*?</table>', page, flags=re.S).group(0)
    assert "OutOfMemory" in failures and "RuntimeError: CUDA out of memory" in failures
    memory = re.search(r'<table class="memory">.*?</table>', page, flags=re.S).group(0)
    assert "—" in memory  # the CPU rows have no GPU memory


def test_identical_input_gives_byte_identical_output_under_2_mb(rendered, tmp_path):
    records, written, _ = rendered
    again = report.render([written["html"].parent.parent / "results"], tmp_path / "again")
    for kind in ("html", "md", "csv"):
        assert written[kind].read_bytes() == again[kind].read_bytes(), kind
    assert len([r for r in records if r["cell"]["environment"] != HOSTILE]) >= 24
    assert written["html"].stat().st_size < 2 * 2**20


def test_csv_has_one_row_per_result(rendered):
    records, written, _ = rendered
    rows = list(csv.DictReader(written["csv"].open()))
    assert len(rows) == len(records)
    first = next(r for r in rows if r["environment"] == "seed-torch1.12-cu116" and
                 r["target"] == "gpu" and r["repeat"] == "0" and r["variant"] == "batch_size=32")
    source = next(r for r in records if r["cell"]["environment"] == "seed-torch1.12-cu116" and
                  r["cell"]["target"] == "gpu" and r["cell"]["repeat"] == 0 and
                  r["config"]["batch_size"] == 32)
    assert float(first["epoch_s_median"]) == source["summary"]["epoch_s_median"]


def test_required_keys_only_noisy_cells_and_the_baseline_option(tmp_path):
    folder = tmp_path / "results"
    import random
    rng = random.Random(1)
    noisy = make_record("noisy-env", "cpu", 256, 0, rng)
    for i, epoch in enumerate(noisy["epochs"]):
        epoch["wall_s"] = 100.0 * (1 + 0.3 * (i % 2))
    minimal = result.new_record({k: None for k in result.REQUIRED["config"]})
    minimal.update(status="ok")
    minimal["cell"] = {"environment": "bare", "target": "cpu", "target_label": None,
                       "price_per_hour": None, "repeat": 0, "variant": {}}
    minimal["env"] = {k: None for k in result.REQUIRED["env"]}
    minimal["epochs"] = [{"epoch": 0, "wall_s": 10.0, "samples": 100, "samples_per_s": 10.0,
                          "phases_s": dict.fromkeys(result.PHASES, 1.0), "train_loss": 2.0,
                          "test_acc": 0.1, "test_s": 1.0}]
    minimal["summary"].update(epoch_s_median=10.0, first_epoch_s=10.0, samples_per_s=10.0,
                              final_test_acc=0.1)
    gpu = make_record("noisy-env", "gpu", 256, 0, rng)
    # A failure the host recorded (e.g. the image did not build): no epochs, no log tail.
    unbuilt = result.new_record({k: None for k in result.REQUIRED["config"]})
    unbuilt["cell"] = dict(minimal["cell"], environment="unbuilt")
    unbuilt["env"] = {k: None for k in result.REQUIRED["env"]}
    unbuilt["error"] = {"type": "BuildFailed", "message": "base image x is not in the engine"}
    for i, record in enumerate((noisy, minimal, gpu, unbuilt)):
        assert result.validate(record) == []
        result.write_atomic(str(folder / ("%d.json" % i)), record)
    (folder / "junk.json").write_text("{not json")
    page = report.render([folder], tmp_path / "out")["html"].read_text()
    assert "noisy" in _row(page, "noisy-env|cpu|batch_size=256", "cells")
    assert "junk.json" in page  # files not used are listed, not silently dropped
    assert "BuildFailed" in page and "base image x is not in the engine" in page
    bare = _row(page, "bare|cpu|—", "cells")
    assert bare.count("—") >= 3  # no price, no target accuracy...
    by_gpu = report.render([folder], tmp_path / "gpu", baseline="gpu")["html"].read_text()
    assert "×<" in _row(by_gpu, "noisy-env|cpu|batch_size=256")
    with pytest.raises(UserError, match="--baseline tpu: no results for that target"):
        report.render([folder], tmp_path / "x", baseline="tpu")


def test_the_cli_says_when_there_is_nothing_to_report(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "envbench", "report", str(tmp_path),
                           "--out", str(tmp_path / "o")], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 1 and "no valid result files" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_chromium_renders_a_non_blank_page(rendered, tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing; .ci/run installs Debian's chromium")
        pytest.skip("Debian's chromium is not installed")
    shot = tmp_path / "shot.png"
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--user-data-dir=%s" % (tmp_path / "profile"), "--window-size=1280,2400",
                    "--screenshot=%s" % shot, rendered[1]["html"].as_uri()],
                   capture_output=True, timeout=120, check=True)
    from PIL import Image

    image = Image.open(shot).convert("L")
    assert image.size == (1280, 2400)
    histogram = image.histogram()
    dark = sum(histogram[:128]) / sum(histogram)
    assert 0.01 < dark < 0.6, dark  # text, tables and charts, not a blank or black page
    colours = Image.open(shot).convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is None or len(colours) > 50  # anti-aliased text and coloured charts
