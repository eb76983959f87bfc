"""The page as a newcomer reads it: each navigation link once, no empty chart, and a quick
run that says why it has no verdict."""
from __future__ import annotations

import json
import random
import re
from pathlib import Path

from report_fixture import make_record, write_set

from envbench.report import pages


def _render(records: list[dict], tmp_path: Path) -> tuple[str, str]:
    folder = tmp_path / "results"
    folder.mkdir(parents=True)
    for i, r in enumerate(records):
        (folder / ("r%d.json" % i)).write_text(json.dumps(r))
    written = pages.render_files([folder], tmp_path / "page")
    return written["html"].read_text(), written["md"].read_text()


def _nav(html: str) -> list[tuple[str, str]]:
    nav = html[html.index("<nav>"):html.index("</nav>")]
    return re.findall(r'<a href="([^"]+)">([^<]+)</a>', nav)


def test_no_navigation_link_appears_twice_and_each_leads_somewhere(tmp_path):
    folder = tmp_path / "set"
    write_set(folder)
    html = pages.render_files([folder], tmp_path / "page")["html"].read_text()
    links = _nav(html)
    assert len({href for href, _ in links}) == len(links)
    assert len({text for _, text in links}) == len(links), links
    for href, _ in links:
        assert 'id="%s"' % href[1:] in html, href


def test_a_chart_with_nothing_to_draw_folds_into_not_measured(tmp_path):
    """One batch size and no swept optimisation: no batch chart, no effect chart, and the
    list of what was not measured says what would fill them."""
    rng = random.Random(2)
    records = [make_record("env", target, 256, repeat, rng) for target in ("gpu", "cpu")
               for repeat in range(3)]
    for r in records:
        r["cell"]["variant"] = {}  # nothing swept
    html, _ = _render(records, tmp_path)
    assert "Not enough results" not in html
    charts = html[html.index('id="charts"'):]
    assert "Speedup vs batch size" not in charts and "Effect of each swept" not in charts
    assert "Epoch time with spread" in charts
    folded = html[html.index('id="not-measured"'):]
    assert "speedup at each batch size" in folded and "what each option buys" in folded


def test_a_quick_page_says_why_it_has_no_verdict(tmp_path):
    rng = random.Random(3)
    records = [make_record("env", target, 256, 0, rng, quick=True) for target in ("gpu", "cpu")]
    html, md = _render(records, tmp_path)
    assert "A <code>--quick</code> run" in html and "nothing here is a verdict" in html
    assert "A --quick run (one short epoch, one repeat per cell): no verdict" in md
    full, _ = _render([make_record("env", "cpu", 256, r, rng) for r in range(3)],
                      tmp_path / "full")
    assert "--quick</code> run" not in full


def test_a_card_quoting_contended_repeats_says_so(tmp_path):
    """Every repeat of the fastest cell shared its cores: its figure stands on contended
    repeats only, and the card that quotes it marks it."""
    rng = random.Random(6)
    records = [make_record("env", "gpu", 256, r, rng) for r in range(3)]
    for r in records:
        r["noise"] = {"host": None, "gpu": None, "unavailable": None, "contended": True,
                      "reasons": ["another process took 40% of the cell's cores"]}
    html, md = _render(records, tmp_path)
    cards = html[html.index('<div class="cards">'):html.index("<nav>")]
    assert "Fastest configuration" in cards and "⚠ from contended repeats" in cards
    clean, _ = _render([make_record("env", "gpu", 256, r, rng) for r in range(3)],
                       tmp_path / "clean")
    assert "from contended repeats" not in clean
