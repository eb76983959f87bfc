"""The report: numbers equal the JSON, self-contained, escaped, deterministic, and it renders."""
from __future__ import annotations

import csv
import html.parser
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from browser import assert_drawn, screenshot
from report_fixture import HOSTILE, make_record, refoot, write_set

from bench import result
from envbench.report import charts, formats, pages
from envbench.results import contract
from envbench.results.identity import SYNTHETIC as SYNTHETIC_DATA
from envbench.user_errors import UserError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    folder = tmp_path_factory.mktemp("report")
    records = write_set(folder / "results", hostile=True)
    written = pages.render_files([folder / "results"], folder / "out")
    return records, written, written["html"].read_text()


def _row(page: str, key: str, table: str = "headline") -> str:
    """The HTML of the first row with data-key=KEY inside tables of class TABLE."""
    for block in re.findall(r'<table class="%s(?: [^"]*)?".*?</table>' % table, page,
                            flags=re.S):
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
            row = _row(page, "%s|gpu|batch_size=%d|" % (env, batch))
            assert ">%.2f<" % gpu in row and ">%.2f×<" % (cpu / gpu) in row
            cells_row = _row(page, "%s|gpu|batch_size=%d|" % (env, batch), "cells")
            price_epoch = 0.35 * gpu / 3600
            assert ">%s<" % formats.money(price_epoch) in cells_row
    batch = re.search(r'<table class="batch">.*?</table>', page, flags=re.S).group(0)
    for env in ("seed-torch1.12-cu116", "torch2.5-cu124"):
        row = re.search(r"<tr><td>%s</td><td>NVIDIA GeForce RTX 3060 Laptop GPU</td>.*?</tr>"
                        % env, batch, re.S).group(0)
        expected = ["%.2f×" % (median_epoch(env, "cpu", b) / median_epoch(env, "gpu", b))
                    for b in (32, 256)]
        assert re.findall(r'<td class="n">([^<]*)</td>', row) == expected
    seed_row = _row(page, "seed-torch1.12-cu116|gpu|batch_size=256|")
    seed_gpu = [r for r in ok if r["cell"]["environment"] == "seed-torch1.12-cu116"
                and r["cell"]["target"] == "gpu" and r["config"]["batch_size"] == 256]
    shares = [statistics.median(e["phases_s"][phase] / e["wall_s"]
                                for r in seed_gpu for e in r["epochs"][1:])
              for phase in ("data", "backward")]
    assert all(">%.1f%%<" % (100 * share) in seed_row for share in shares)


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
    # Each row's peaks, as the fixture's records hold them (GPU 1.2 GiB allocated, 1.4 GiB
    # reserved, 2 GiB RSS; CPU 3.4 GiB RSS, no GPU figures), written by hand.
    rows = [[re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>",
                                                                    row, flags=re.S)]
            for row in re.findall(r"<tr><td>.*?</tr>", memory, flags=re.S)]
    gpu = [r for r in rows if "RTX 3060" in r[1]]
    cpu = [r for r in rows if "i7-11800H" in r[1]]
    assert gpu and cpu
    assert all(r[3:5] == ["1.20 GiB", "1.40 GiB"] and r[6] == "2.00 GiB" for r in gpu), gpu
    assert all(r[3:5] == ["—", "—"] and r[6] == "3.40 GiB" for r in cpu), cpu


def test_identical_input_gives_byte_identical_output_under_2_mb(rendered, tmp_path):
    records, written, _ = rendered
    again = pages.render_files([written["html"].parent.parent / "results"], tmp_path / "again")
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
    refoot(noisy)
    # Every nullable field null: what bench writes when run on its own, with one epoch.
    minimal = result.new_record(dict(noisy["config"], batch_size=64, epochs=1))
    minimal.update(status="ok")
    minimal["cell"] = dict(result.empty_cell(), environment="bare", target="cpu", repeat=0)
    minimal["env"] = {k: None for k in result.REQUIRED["env"]}
    minimal["epochs"] = [{"epoch": 0, "wall_s": 10.0, "samples": 100, "samples_per_s": 10.0,
                          "phases_s": dict.fromkeys(result.PHASES, 1.0), "train_loss": 2.0,
                          "test_acc": 0.1, "test_s": 1.0}]
    minimal["summary"].update(epoch_s_median=10.0, first_epoch_s=10.0, samples_per_s=10.0,
                              final_test_acc=0.1)
    minimal["config"]["threads"] = None
    minimal["model"] = noisy["model"]
    minimal["parallel"] = dict(noisy["parallel"], threads_per_rank=None)
    gpu = make_record("noisy-env", "gpu", 256, 0, rng)
    # A failure the host recorded (e.g. the image did not build): no epochs, no log tail.
    unbuilt = result.new_record(dict(noisy["config"]))
    unbuilt["cell"] = dict(minimal["cell"], environment="unbuilt")
    unbuilt["env"] = {k: None for k in result.REQUIRED["env"]}
    unbuilt["error"] = {"type": "BuildFailed", "message": "base image x is not in the engine"}
    for i, record in enumerate((noisy, minimal, gpu, unbuilt)):
        assert contract.problems(record) == []
        result.write_atomic(str(folder / ("%d.json" % i)), record)
    (folder / "junk.json").write_text("{not json")
    page = pages.render_files([folder], tmp_path / "out")["html"].read_text()
    # One repeat: its CV is over the epochs after the first, 130, 100, 130, 100 s:
    # sample sd 17.32 / mean 115 = 15.1%, above the 5% line, so the cell says noisy.
    steady = [e["wall_s"] for e in noisy["epochs"][1:]]
    expected = statistics.stdev(steady) / statistics.mean(steady)
    assert round(100 * expected, 1) == 15.1
    assert '<td class="n noisy">%.1f%% noisy</td>' % (100 * expected) \
        in _row(page, "noisy-env|cpu|batch_size=256|", "cells")
    # The GPU cell's epochs vary by under 2% (the fixture's jitter): its CV is not flagged.
    quiet = _row(page, "noisy-env|gpu|batch_size=256|", "cells")
    gpu_steady = [e["wall_s"] for e in gpu["epochs"][1:]]
    gpu_cv = statistics.stdev(gpu_steady) / statistics.mean(gpu_steady)
    assert gpu_cv < 0.05 and '<td class="n">%.1f%%</td>' % (100 * gpu_cv) in quiet
    assert "noisy" not in quiet.replace("noisy-env", "")
    assert "junk.json" in page  # files not used are listed, not silently dropped
    assert "BuildFailed" in page and "base image x is not in the engine" in page
    bare = _row(page, "bare|cpu|—|", "cells")
    assert bare.count("—") >= 3  # no price, no target accuracy...
    by_gpu = pages.render_files([folder], tmp_path / "gpu", baseline="gpu")["html"].read_text()
    assert "×<" in _row(by_gpu, "noisy-env|cpu|batch_size=256|")
    with pytest.raises(UserError, match="--baseline tpu: no results for that target"):
        pages.render_files([folder], tmp_path / "x", baseline="tpu")


def test_the_cli_says_when_there_is_nothing_to_report(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "envbench", "report", str(tmp_path),
                           "--out", str(tmp_path / "o")], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 1 and "no results to report" in proc.stderr
    assert "Traceback" not in proc.stderr


def _pixels_near(image, colour: str, tolerance: int = 6) -> int:
    r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return sum(n for n, (cr, cg, cb) in image.convert("RGB").getcolors(1 << 22)
               if abs(cr - r) <= tolerance and abs(cg - g) <= tolerance
               and abs(cb - b) <= tolerance)


def test_chromium_draws_the_tables_and_the_inline_charts(rendered, tmp_path):
    """Not just a non-blank page: the tables' header shading and the charts' bars (inline
    SVG, GPU bars in the first colour, CPU bars in the second) are on the screen."""
    image = screenshot(rendered[1]["html"], tmp_path, height=8000)
    assert image.size == (1280, 8000)
    assert_drawn(image)
    assert _pixels_near(image, "#f4f6f9") > 50_000  # th background: the tables are styled
    gpu_bars, cpu_bars = _pixels_near(image, charts.COLOURS[0]), _pixels_near(
        image, charts.COLOURS[1])
    assert gpu_bars > 2_000 and cpu_bars > 2_000, (gpu_bars, cpu_bars)


def test_rows_are_named_by_the_measured_hardware_and_a_lying_label_is_flagged(tmp_path):
    import random

    rng = random.Random(5)
    folder = tmp_path / "results"
    lying = make_record("torch2.5-cu124", "gpu", 256, 0, rng, label="RTX 3060",
                        device_name="NVIDIA H200")
    honest = make_record("torch2.5-cu124", "cpu", 256, 0, rng, label="i7-11800H")
    for i, record in enumerate((lying, honest)):
        result.write_atomic(str(folder / ("%d.json" % i)), record)
    written = pages.render_files([folder], tmp_path / "out")
    page = written["html"].read_text()
    row = _row(page, "torch2.5-cu124|gpu|batch_size=256|")
    assert row.index("NVIDIA H200") < row.index("label “RTX 3060”")
    assert "⚠ label says RTX 3060, measured NVIDIA H200" in row
    cpu_row = _row(page, "torch2.5-cu124|cpu|batch_size=256|")
    assert "i7-11800H @ 2.30GHz · 8 threads" in cpu_row and "⚠" not in cpu_row
    summary = written["md"].read_text()
    assert "NVIDIA H200 ⚠ label says RTX 3060, measured NVIDIA H200" in summary


def test_the_write_up_is_a_reference_beside_the_measured_seed_stack(rendered):
    records, _, page = rendered
    table = re.search(r'<table class="reference">.*?</table>', page, flags=re.S).group(0)
    rows = re.findall(r"<tr><td>(.*?)</td><td>(.*?)</td><td class=\"n\">(\d+)</td>\s*"
                      r"<td class=\"n ref\">(.*?)</td><td class=\"n\">(.*?)</td>", table, re.S)
    by_what = {(what, device, int(batch)): (ref, measured)
               for what, device, batch, ref, measured in rows}
    assert by_what[("GPU speedup over CPU", "GPU / CPU", 256)][0] == "8.1×"
    assert by_what[("epoch time", "NVIDIA GeForce RTX 3060 (laptop)", 256)][0] == "23.4 s"
    seed = [r for r in records if r["status"] == "ok"
            and r["cell"]["environment"] == "seed-torch1.12-cu116"]

    def median(target, batch):
        return statistics.median(r["summary"]["epoch_s_median"] for r in seed
                                 if r["cell"]["target"] == target
                                 and r["config"]["batch_size"] == batch)

    measured = by_what[("GPU speedup over CPU", "GPU / CPU", 32)][1]
    assert measured == "%.2f×" % (median("cpu", 32) / median("gpu", 32))
    assert by_what[("epoch time", "Intel Core i7-11800H", 256)][1] == "%.2f s" % median("cpu", 256)
    assert "reference, not measured here" in page


def _selection_run(tmp_path):
    """Results as the runner stores them for a small matrix, plus files that do not belong."""
    from test_lock import make_wheel

    from envbench.cells import expansion, records
    from envbench.images import dockerfile, lock
    from envbench.matrix import models

    make_wheel(tmp_path / "wheels", "torch", "2.13.0")
    make_wheel(tmp_path / "wheels", "numpy", "2.3.0")
    text = ("environments:\n  a: {python: \"3.11\", torch: \"2.13.0\", wheelhouse: wheels}\n"
            "targets:\n  cpu: {device: cpu, cpus: 2}\n"
            "benchmark: {epochs: 2, repeats: 1, data: synthetic, sweep: {batch_size: [32, 64]}}\n")
    (tmp_path / "matrix.yaml").write_text(text)
    m = models.load(tmp_path / "matrix.yaml")
    made = lock.write("a", m.environments["a"], tmp_path, tmp_path / "locks")  # the default
    tag = dockerfile.plan("a", m.environments["a"], tmp_path, made).tag
    folder = tmp_path / "reports" / "results"
    data = SYNTHETIC_DATA
    written = {}

    def store(cell, image_id, image_tag, seconds, when):
        p = expansion.prepare(cell, m.targets["cpu"], 2, data, image_id)
        import random

        record = make_record("a", "cpu", 32, 0, random.Random(1))
        record.update(config=p.config, written_at=when)
        for epoch in record["epochs"]:
            epoch["wall_s"] = seconds
        refoot(record)
        records.annotate(record, p, m.targets["cpu"], {"tag": image_tag, "id": image_id}, None)
        return records.save(folder, p, record)

    full = expansion.expand(m)
    for cell in full:
        written[("current", cell.settings["batch_size"])] = store(cell, "sha256:new", tag, 10.0,
                                                                   "2026-12-02T10:00:00+00:00")
    written["old image"] = store(full[0], "sha256:old", "envbench/a:0000", 99.0,
                                 "2026-11-01T10:00:00+00:00")
    written["rebuilt"] = store(full[1], "sha256:rebuilt", tag, 12.0, "2026-12-02T11:00:00+00:00")
    written["quick"] = store(expansion.expand(m, quick=True)[0], "sha256:new", tag, 1.0,
                             "2026-12-02T12:00:00+00:00")
    import random

    stranger = make_record("gone", "cpu", 32, 0, random.Random(2))
    result.write_atomic(str(folder / "gone.json"), stranger)
    written["other env"] = folder / "gone.json"
    return written


def test_the_report_of_the_current_matrix_names_each_file_it_leaves_out(tmp_path):
    files = _selection_run(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "envbench", "report", "--matrix",
                           str(tmp_path / "matrix.yaml"), "--reports", str(tmp_path / "reports")],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "reported 2 results; left out 4 files" in proc.stdout
    page = (tmp_path / "reports" / "index.html").read_text()
    reasons = dict(re.findall(r"<li><code>([^<]*)</code>: (.*?)</li>", page))
    assert reasons[str(files["quick"])] == "a --quick run (report it with --quick)"
    assert reasons[str(files["other env"])].startswith("environment gone is not among")
    assert reasons[str(files["old image"])].startswith("another image of a (envbench/a:0000")
    # The same cell run again in a rebuilt image: the later result is the one reported.
    assert reasons[str(files[("current", 64)])] == \
        "superseded by %s, a later result of the same cell" % files["rebuilt"].name
    assert ">10.00<" in page and ">12.00<" in page and ">99.00<" not in page


def test_a_cell_refused_on_this_host_never_replaces_one_measured_elsewhere(tmp_path):
    """Results brought home from a machine that ran the cell, then the same cell refused here
    (no GPU): the measured one is reported; a refusal (no image) is shown where nothing was
    measured; a fault without an image (no runtime) is not this matrix's image."""
    from bench.rules import FailureKind
    from envbench.cells import expansion, records
    from envbench.engine.host import Host
    from envbench.matrix import models

    files = _selection_run(tmp_path)
    m = models.load(tmp_path / "matrix.yaml")
    cells = expansion.expand(m)
    folder = tmp_path / "reports" / "results"
    refused = []
    for cell, kind in ((cells[0], FailureKind.NO_GPU),
                       (cells[1], FailureKind.GPU_UNAVAILABLE)):
        p = expansion.prepare(cell, m.targets["cpu"], Host(2, None), SYNTHETIC_DATA, None)
        records.failed(folder, p, m.targets["cpu"], kind, "said", None)
        refused.append(p)
    proc = subprocess.run([sys.executable, "-m", "envbench", "report", "--matrix",
                           str(tmp_path / "matrix.yaml"), "--reports", str(tmp_path / "reports")],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    page = (tmp_path / "reports" / "index.html").read_text()
    reasons = dict(re.findall(r"<li><code>([^<]*)</code>: (.*?)</li>", page))
    by_kind = {}
    for path in folder.glob("*.json"):
        record = result.json.loads(path.read_text())
        if record["status"] == "failed":
            by_kind[record["error"]["type"]] = str(path)
    assert reasons[by_kind[FailureKind.NO_GPU]] == ("refused where it ran; %s is a result of the "
                                                "same cell from where it could run"
                                                % files[("current", 32)].name)
    assert reasons[by_kind[FailureKind.GPU_UNAVAILABLE]].startswith("another image of a (not built")
    assert ">10.00<" in page and ">12.00<" in page


HOSTILE_NAMES = {
    "html": "<img src=x onerror=alert(1)>",
    "markdown link": "[click](http://evil.example/x)",
    "markdown image": "![x](http://evil.example/p.png)",
    "table cell": "a|b|c",
    "newline and heading": "one\n# heading",
    "emphasis and code": "**bold** `code` ~~gone~~",
    "autolink": "see www.evil.example",
    "formula": '=HYPERLINK("http://evil.example","x")',
    "mathtext": "$\\frac{1}{0}$",
    "mention": "thanks @octocat",
}


def test_one_hostile_name_per_construct_stays_text_in_every_output(tmp_path):
    import random

    folder = tmp_path / "results"
    rng = random.Random(11)
    for i, name in enumerate(HOSTILE_NAMES.values()):
        for target in ("cpu", "gpu"):
            record = make_record(name, target, 256, 0, rng, label=name)
            record["cell"]["variant"] = {"amp": name}
            result.write_atomic(str(folder / ("%d-%s.json" % (i, target))), record)
        failed = make_record("failing-%d" % i, "cpu", 256, 0, rng)
        failed.update(status="failed", error={"type": "Boom", "message": name})
        result.write_atomic(str(folder / ("%d-failed.json" % i)), failed)
    written = pages.render_files([folder], tmp_path / "out")
    page = written["html"].read_text()
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'' in page
    # Charts: names are plain text, never parsed as mathtext.
    charts = "".join(re.findall(r"<svg.*?</svg>", page, flags=re.S))
    assert "$\\frac{1}{0}$" in charts

    summary = written["md"].read_text()
    lines = summary.splitlines()
    columns = None
    for line in lines:
        assert not line.startswith("#") or line == "# envbench summary", line
        if not line.startswith("|"):
            columns = None  # between tables
        elif columns is None:
            columns = len(re.findall(r"(?<!\\)\|", line))  # a table's header
        else:
            assert len(re.findall(r"(?<!\\)\|", line)) == columns, line  # no cell breaks out
    # Rows and failure lines carry the names; the template's own ** and | are not checked.
    body = "\n".join(line for line in lines if line.startswith(("| ", "- ")))
    for special in ("[", "]", "*", "`", "~", "!", "$"):  # links, images, emphasis, code,
        # strikethrough, math
        assert not re.search(r"(?<!\\)" + re.escape(special), body), special
    for construct in ("<img", "www.evil", "http://"):  # no HTML, no autolink
        assert construct not in summary, construct
    assert "\\[click\\]" in summary and "one \\# heading" in summary  # escaped and folded
    assert "@octocat" not in summary and "thanks @&#8203;octocat" in summary  # no mention

    rows = list(csv.reader(written["csv"].open()))
    formula_cells = [cell for row in rows for cell in row if "HYPERLINK" in cell]
    assert any(cell.startswith("'=") for cell in formula_cells)
    assert not any(cell[:1] in "=+-@\t\r" for row in rows for cell in row if cell)


def test_money_is_written_out_not_in_scientific_notation():
    assert [formats.money(v) for v in (None, 0, 4.87e-06, 8.62e-05, 0.0148, 0.5, 1.234)] == [
        "—", "$0.00", "$0.00000487", "$0.0000862", "$0.0148", "$0.500", "$1.23"]
    assert formats.money(1e-13) == "<$0.000000001"


def test_a_gpu_bound_cells_overlapping_phases_are_said_to_overlap(tmp_path):
    """On CUDA, data is host time and the rest device time: a GPU-bound loop's phases add up
    to more than its epoch. The cell says by how much; a cell within rounding says nothing."""
    import random
    rng = random.Random(3)
    bound = make_record("bound-env", "gpu", 256, 0, rng)
    for epoch in bound["epochs"]:
        wall = epoch["wall_s"]
        epoch["phases_s"] = {"data": 0.30 * wall, "h2d": 0.02 * wall, "forward": 0.35 * wall,
                             "backward": 0.40 * wall, "optimizer": 0.08 * wall}
    bound["epochs"][2]["phases_s"]["data"] = 0.60 * bound["epochs"][2]["wall_s"]
    rounding = make_record("rounding-env", "gpu", 256, 0, rng)
    for epoch in rounding["epochs"]:
        epoch["phases_s"] = {p: (1.009 / 5) * epoch["wall_s"] for p in result.PHASES}
    folder = tmp_path / "results"
    for i, record in enumerate((bound, rounding)):
        result.write_atomic(str(folder / ("%d.json" % i)), record)
    page = pages.render_files([folder], tmp_path / "out")["html"].read_text()
    # Steady epochs (after the first) add up to 115%, 145%, 115%, 115%: the median is 115%.
    sums = sorted(sum(e["phases_s"].values()) / e["wall_s"] for e in bound["epochs"][1:])
    expected = (sums[1] + sums[2]) / 2
    assert round(100 * expected) == 115
    warning = ("⚠ phases overlap: they add up to %.0f%% of the epoch (host data waits ran "
               "while the GPU computed); read them as times, not shares" % (100 * expected))
    assert warning in _row(page, "bound-env|gpu|batch_size=256|")
    title = "NVIDIA GeForce RTX 3060 Laptop GPU · batch_size=256"
    # The chart's row labels: the overlapping row says by how much, the other says nothing.
    assert "bound-env · %s · phases overlap (%.0f%%)" % (title, 100 * expected) in page
    assert "rounding-env · %s<" % title in page.replace("</text>", "<")
    assert "phases overlap" not in _row(page, "rounding-env|gpu|batch_size=256|")
    assert "rounding-env · %s · phases overlap" % title not in page
