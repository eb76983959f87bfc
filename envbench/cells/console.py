"""What a matrix run prints about its cells: one figure per finished cell, and the table of
medians over repeats at the end (the report has the full picture)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, TextIO

from envbench.cells.expansion import Cell
from envbench.inference import stats
from envbench.results import outcome
from envbench.results.identity import variant_text
from envbench.terminal import safe


def figure(record: dict[str, Any]) -> str:
    """The end of a cell's progress line: its figures, or why it failed."""
    if record.get("status") != "ok":
        error = record.get("error") or {}
        return safe("%s: %s: %s" % (outcome.of(record), error.get("type"), error.get("message")))
    summary = record["summary"]
    unit, per_sample = _unit(record)
    return "%.2f s/epoch, %.0f %s, %s" % (
        summary["epoch_s_median"], (summary["samples_per_s"] or 0) * per_sample, unit,
        _quality(summary))


def _quality(summary: dict[str, Any]) -> str:
    """Accuracy, or the test loss where the workload is not scored by accuracy."""
    if summary.get("final_test_acc") is not None:
        return "acc %.1f%%" % (100 * summary["final_test_acc"])
    loss = summary.get("final_test_loss")
    return "test loss %.4g" % loss if loss is not None else "test loss not finite"


RATES = {"images": "img/s", "tokens": "tok/s", "samples": "samples/s"}


def _unit(record: dict[str, Any]) -> tuple[str, int]:
    """How the cell's workload counts its throughput (bench's progress lines say it alike)."""
    model = record.get("model") or {}
    return RATES.get(model.get("unit") or "images", "samples/s"), model.get("units_per_sample") or 1


def table(records: list[tuple[Cell, dict[str, Any]]], out: TextIO) -> None:
    """Median epoch time over repeats per (environment, target, variant)."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for cell, record in records:
        groups.setdefault((cell.environment, cell.target, variant_text(cell.variant, "-")),
                          []).append(record)
    rows = [("environment", "target", "variant", "ok", "s/epoch (median)", "throughput",
             "acc or loss")]
    for (env, target, variant), recs in groups.items():
        ok = [r for r in recs if r.get("status") == "ok"]
        epoch = stats.median([r["summary"]["epoch_s_median"] for r in ok]) if ok else None
        unit, per_sample = _unit(ok[0]) if ok else ("", 1)
        rate = stats.median([r["summary"]["samples_per_s"] * per_sample for r in ok]) \
            if ok else None
        accs = [r["summary"]["final_test_acc"] for r in ok
                if r["summary"]["final_test_acc"] is not None]
        losses = [r["summary"].get("final_test_loss") for r in ok
                  if r["summary"].get("final_test_loss") is not None]
        acc = stats.median(accs) if accs else None
        loss = stats.median(losses) if losses and not accs else None
        nothing = "refused" if all(outcome.of(r) == "refused" for r in recs) else "failed"
        rows.append((env, target, variant, "%d/%d" % (len(ok), len(recs)),
                     "%.2f" % epoch if epoch is not None else nothing,
                     "%.0f %s" % (rate, unit) if rate is not None else "—",
                     "%.1f%%" % (100 * acc) if acc is not None
                     else "loss %.4g" % loss if loss is not None else "—"))
    shown = [[safe(str(v)) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in shown) for i in range(len(shown[0]))]
    print("", file=out)
    for row in shown:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip(), file=out)
    print("", file=out)


def close_run(done: list[tuple[Cell, dict[str, Any]]], out: TextIO, seconds: float,
              results_dir: Path, log_dir: Path, overheads: list[float],
              overhead_words: str) -> int:
    """The end of a run, local or on a cluster: the table, where things are, the kit's
    overhead per executed cell (``overhead_words`` says what it covers), the tally; the
    run's exit code."""
    table(done, out)
    print("%d cells in %.1f s; results in %s, logs in %s"
          % (len(done), seconds, results_dir, log_dir), file=out)
    if overheads:
        print("kit overhead per %s: median %.2f s, max %.2f s"
              % (overhead_words, stats.median(overheads), max(overheads)), file=out)
    tally = outcome.Tally.of(r for _, r in done)
    print("cells: %s" % tally.sentence(), file=out)
    return tally.exit_code
