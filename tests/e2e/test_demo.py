"""`./noxw -s demo` as a user runs it: it ends with a report comparing two real stacks, and
the report's figures are the medians of the result files it wrote."""
from __future__ import annotations

import json
import re
import statistics

import pytest
from e2e_support import envbench

pytestmark = pytest.mark.e2e


def test_the_demo_ends_with_a_report_of_its_two_stacks(base_tag, python_base, wheelhouse,
                                                       tmp_path):
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("ENVBENCH_")}
    reports = tmp_path / "demo"
    proc = envbench(env, "demo", "--reports", reports, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "Traceback" not in proc.stdout
    timing = re.search(r"demo: set-up \(engine, base images\) \d+ s; image builds, wheels and "
                       r"data side by side \d+ s; cells \d+ s; report \d+ s; \d+ s in all",
                       proc.stdout)
    assert timing, proc.stdout[-2000:]
    # The two builds print side by side (where the engine did not have them): each line is
    # one build's, whole.
    prefixes = ("  debian-python3-torch | ", "  torch2.13.0-cpu | ")
    build_lines = [line for line in proc.stdout.splitlines() if line.startswith(prefixes)]
    assert all(sum(line.count(p) for p in prefixes) == 1 for line in build_lines)
    assert "demo: open %s" % (reports / "index.html").resolve() in proc.stdout

    records = [json.loads(p.read_text()) for p in (reports / "results").glob("*.json")]
    assert all(r["status"] == "ok" for r in records)
    environments = {r["cell"]["environment"] for r in records}
    # repeats: auto: at least three rounds; more only while the comparison was open, and
    # then the run said so; never past max_repeats (6), re-runs of contended repeats aside.
    used = {name: sum(1 for r in records if r["cell"]["environment"] == name)
            for name in environments}
    contended = sum(1 for r in records if r["noise"]["contended"])
    print("repeats used:", used, "contended:", contended)
    assert all(3 <= n <= 6 + contended for n in used.values())
    # The two stacks took their rounds in step, and every result says the repeats were auto
    # up to 6: the page spends each look's share of the 5% (envbench.looks).
    assert len(set(used.values())) == 1, used
    assert all(r["cell"]["order"]["max_repeats"] == 6 for r in records)
    if max(used.values()) > 3:
        assert "more cell(s) (comparisons still open" in proc.stdout
    assert environments == {"debian-python3-torch", "torch2.13.0-cpu"}
    torches = {r["cell"]["environment"]: r["env"]["torch"] for r in records}
    assert torches["debian-python3-torch"].startswith("1.13")
    assert torches["torch2.13.0-cpu"].startswith("2.13.0")
    page = (reports / "index.html").read_text()
    for name in environments:
        mine = [r for r in records if r["cell"]["environment"] == name]
        clean = [r for r in mine if not r["noise"]["contended"]] or mine
        median = statistics.median(r["summary"]["epoch_s_median"] for r in clean)
        table = re.search(r'<table class="headline" data-environment="%s"[^>]*>(.*?)</table>'
                          % re.escape(name), page, flags=re.S).group(1)
        assert ">%.2f<" % median in table, (name, median)
    # The family line, and a verdict where the difference is real (Debian's torch 1.13 took
    # about twice as long as PyPI's 2.13 on every host this ran on).
    assert ("1 comparison: at most a 5% chance that its verdict is false. Its repeats were "
            "decided by repeats: auto") in page
    cell = re.search(r'<tr data-env="torch2.13.0-cpu">(.*?)</tr>', page, flags=re.S).group(1)
    print("the demo's verdict:", re.sub(r"<[^>]+>", " ", cell))
    assert re.search(r"\d\.\d\d× (faster|slower) \(\d\.\d\d–\d\.\d\d\)", cell), cell
    assert re.search(r"\d+(\.\d+)?% interval; would have seen ≥ \d+(\.\d)?%", cell), cell
    synthetic = all(r["config"]["synthetic"] for r in records)
    assert ("Every result here ran on synthetic data" in page) is synthetic
