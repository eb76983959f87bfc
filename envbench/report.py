"""Render index.html, summary.md and results.csv from any set of result files."""
from __future__ import annotations

import argparse
import csv
import io
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import jinja2

from envbench import charts, reportdata
from envbench.errors import UserError
from envbench.reportdata import Group, variant_text

TEMPLATES = Path(__file__).resolve().parent / "templates"
DASH = "—"


def _na(fmt: str):
    def render(value: Any) -> str:
        return DASH if value is None else fmt % value
    return render


def human_bytes(value: int | None) -> str:
    if value is None:
        return DASH
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= size:
            return "%.2f %s" % (value / size, unit)
    return "%d B" % value


def money(value: float | None) -> str:
    if value is None:
        return DASH
    # Cloud prices make single epochs cost fractions of a cent: keep three significant digits.
    return "$%.2f" % value if value >= 1 else "$%.3g" % value


def jinja_env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)),
                             autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters.update(secs=_na("%.2f"), pct=lambda v: DASH if v is None else "%.1f%%" % (100 * v),
                       times=_na("%.2f×"), nbytes=human_bytes, money=money,
                       num=_na("%.0f"), dash=lambda v: DASH if v in (None, "") else v,
                       variant=variant_text)
    return env


def build_context(records: list[dict[str, Any]], skipped: list[tuple[str, str]],
                  baseline: str | None, goal: float | None) -> dict[str, Any]:
    groups = reportdata.group(records)
    base = reportdata.choose_baseline(groups, baseline)
    if baseline is not None and base is None:
        raise UserError("--baseline %s: no results for that target (have: %s)"
                        % (baseline, ", ".join(sorted({g.target for g in groups}))))
    if goal is None:
        goals = [r["cell"].get("target_accuracy") for r in records
                 if r["cell"].get("target_accuracy") is not None]
        goal = goals[0] if goals else None
    speedups = reportdata.speedups(groups, base)
    effects = reportdata.effects(groups)
    environments = sorted({g.environment for g in groups})
    sizes = reportdata.batch_sizes(groups)
    # (environment, target label, the variant's other keys, {batch size: Speedup})
    batch_rows: dict[tuple[str, str, str], dict[int, Any]] = {}
    for g in groups:
        if g.target != base and g.key in speedups and "batch_size" in g.variant:
            rest = variant_text({k: v for k, v in g.variant.items() if k != "batch_size"})
            row = batch_rows.setdefault((g.environment, g.target_label, rest), {})
            row[int(g.variant["batch_size"])] = speedups[g.key]
    batch_table = [(env, label, rest, row) for (env, label, rest), row in batch_rows.items()]
    columns, rows, values, differ = reportdata.fingerprints(groups)
    failures = [(g, r) for g in groups for r in g.failed]
    repeats = sorted({len(g.records) for g in groups})
    return {
        "groups": groups, "environments": environments, "baseline": base,
        "baseline_label": next((g.target_label for g in groups if g.target == base), base),
        "speedups": speedups, "effects": effects, "batch_sizes": sizes,
        "batch_table": batch_table, "goal": goal, "skipped": skipped,
        "fp_columns": columns, "fp_rows": rows, "fp_values": values, "fp_differ": differ,
        "repro": reportdata.reproducibility(groups), "failures": failures,
        "total": len(records), "ok_count": sum(1 for r in records if r["status"] == "ok"),
        "repeats": repeats, "noisy_cv": reportdata.NOISY_CV,
        "charts": {
            "epoch_times": charts.epoch_times(groups),
            "phases": charts.phase_breakdown(groups),
            "speedup_batch": charts.speedup_by_batch(list(speedups.values())),
            "curves": charts.curves(groups),
            "effects": charts.effect_bars(effects),
        },
    }


def results_csv(groups: list[Group]) -> str:
    """One row per result file (repeat), failed ones included."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    phases = ["data", "h2d", "forward", "backward", "optimizer"]
    writer.writerow(["environment", "target", "target_label", "variant", "repeat", "status",
                     "error_type", "epoch_s_median", "first_epoch_s", "samples_per_s",
                     "final_test_acc"] + ["phase_%s_s" % p for p in phases]
                    + ["gpu_peak_allocated_bytes", "gpu_peak_reserved_bytes",
                       "host_peak_rss_bytes", "price_per_hour", "cost_per_epoch", "torch",
                       "cuda", "device_name", "image_id", "bench_sha256"])
    for g in groups:
        for r in g.records:
            s, env, mem = r["summary"], r["env"], r["memory"]
            steady = r["epochs"][1:] or r["epochs"]
            phase_medians = [_median([e["phases_s"].get(p) or 0.0 for e in steady])
                             for p in phases]
            price = r["cell"].get("price_per_hour")
            cost = price * s["epoch_s_median"] / 3600 if price is not None and \
                s.get("epoch_s_median") is not None else None
            writer.writerow([g.environment, g.target, g.target_label, variant_text(g.variant),
                             r["cell"].get("repeat"), r["status"],
                             (r.get("error") or {}).get("type", ""), s.get("epoch_s_median"),
                             s.get("first_epoch_s"), s.get("samples_per_s"),
                             s.get("final_test_acc")] + phase_medians
                            + [mem.get("gpu_peak_allocated_bytes"),
                               mem.get("gpu_peak_reserved_bytes"),
                               mem.get("host_peak_rss_bytes"), price,
                               None if cost is None else round(cost, 8), env.get("torch"),
                               env.get("cuda"), env.get("device_name"),
                               (env.get("image") or {}).get("id"), env.get("bench_sha256")])
    return buffer.getvalue()


def _median(values: list[float]) -> float | None:
    from envbench.stats import median

    return round(median(values), 6) if values else None


def _markdown_safe(value: Any) -> Any:
    """Names and messages must not break a table row or become HTML where Markdown is shown."""
    if isinstance(value, str):
        return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") \
            .replace("|", "\\|")
    return value


def _write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def render(paths: list[Path], out: Path, baseline: str | None = None,
           goal: float | None = None) -> dict[str, Path]:
    records, skipped = reportdata.load(paths)
    if not records:
        raise UserError("no valid result files in %s (run `nox -s bench-cpu` first)%s"
                        % (", ".join(map(str, paths)),
                           "; skipped: %s" % "; ".join("%s: %s" % s for s in skipped[:3])
                           if skipped else ""))
    context = build_context(records, skipped, baseline, goal)
    env = jinja_env()
    out.mkdir(parents=True, exist_ok=True)
    written = {"html": out / "index.html", "md": out / "summary.md", "csv": out / "results.csv"}
    _write(written["html"], env.get_template("report.html.j2").render(**context))
    md_env = jinja_env()
    md_env.autoescape = False
    md_env.finalize = _markdown_safe
    _write(written["md"], md_env.get_template("summary.md.j2").render(**context))
    _write(written["csv"], results_csv(context["groups"]))
    return written


def main(args: argparse.Namespace) -> int:
    paths = args.results or [args.reports / "results"]
    written = render(paths, args.out or args.reports, args.baseline, args.target_accuracy)
    for path in written.values():
        print("wrote %s (%.1f kB)" % (path, path.stat().st_size / 1000), file=sys.stdout)
    return 0
