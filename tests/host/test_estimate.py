"""What a run says it will take before anything is fetched."""
from __future__ import annotations

import json
import random
import statistics

from report_fixture import make_record

from envbench.cells import estimate, expansion
from envbench.matrix import models

MATRIX = """
environments:
  env: {python: "3.11", torch: "2.13.0"}
  new: {python: "3.11", torch: "2.13.0", cuda: "12.8"}
targets:
  cpu: {device: cpu}
benchmark: {epochs: 4, repeats: 2}
"""


def test_the_estimate_counts_builds_disk_and_the_cells_earlier_runs_measured(tmp_path):
    rng = random.Random(4)
    records = [make_record("env", "cpu", 256, r, rng) for r in range(3)]
    folder = tmp_path / "reports" / "results"
    folder.mkdir(parents=True)
    for i, r in enumerate(records):
        (folder / ("r%d.json" % i)).write_text(json.dumps(r))
    m = models.parse(MATRIX)
    cells = expansion.expand(m)
    first = statistics.median(r["summary"]["first_epoch_s"] for r in records)
    steady = statistics.median(r["summary"]["epoch_s_median"] for r in records)
    # By hand: env's two cells at the earlier speed, 4 epochs each, plus the overhead.
    seconds = 2 * (first + 3 * steady + estimate.CELL_OVERHEAD_S)
    line = estimate.describe(m, cells, ["new"], tmp_path / "locks", tmp_path / "reports")
    assert line.startswith("estimate: 4 cell(s); 1 image(s) to build, about 6 min and ")
    assert "%d min for the 2 cell(s) earlier runs measured" % round(seconds / 60) in line
    assert "2 cell(s) never measured here" in line
    assert "of 1 stack(s) sized from their lock" in line
    nothing = estimate.describe(m, cells, [], tmp_path / "locks", tmp_path / "none")
    assert "every image is built" in nothing and "4 cell(s) never measured here" in nothing


def test_builds_that_cannot_fit_are_refused_with_the_figures_before_anything_is_fetched(tmp_path):
    from envbench.images import footprint

    huge = footprint.Need("torch2.14-cu130", 3 * 10**15, 6 * 10**15, 9 * 10**15, "lock")
    sentence = footprint.refusal(tmp_path, tmp_path / "cache", [huge])
    assert sentence is not None
    assert sentence.startswith("not enough disk to build 1 image(s): ")
    assert "GB free, and they need 15000000.0 GB in the engine" in sentence
    assert "3000000.0 GB of wheels for the cache" in sentence
    assert "Nothing was fetched or built" in sentence and "--env" in sentence
    # A typical stack's size is a guess: it warns, and the build itself is the judge.
    guessed = footprint.Need("debian", 0, 2 * 10**15, 0, "typical")
    assert footprint.refusal(tmp_path, tmp_path / "cache", [guessed]) is None
    assert footprint.warning(tmp_path, tmp_path / "cache", [guessed]).startswith(
        "warning: the images to build may not fit: ")
    small = footprint.Need("cpu", 1000, 2000, 3000, "lock")
    assert footprint.refusal(tmp_path, tmp_path / "cache", [small]) is None
    assert footprint.refusal(tmp_path, tmp_path / "cache", []) is None
