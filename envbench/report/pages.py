"""Render index.html, summary.md and results.csv from any set of result files."""
from __future__ import annotations

import argparse
import csv
import io
import re
import sys
from pathlib import Path
from typing import Any

import jinja2

from bench import result
from envbench import stats
from envbench.errors import UserError
from envbench.report import charts, grouping, hardware, headtohead, reference, scaling, selection
from envbench.report.grouping import Group, variant_text

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


money = grouping.money


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
                  baseline: str | None, goal: float | None,
                  baseline_env: str | None = None) -> dict[str, Any]:
    groups = grouping.group(records)
    base_env = headtohead.baseline_environment(groups, baseline_env)
    if baseline_env is not None and base_env is None:
        raise UserError("--baseline-env %s: no results for that environment (have: %s)"
                        % (baseline_env, ", ".join(sorted({g.environment for g in groups}))))
    formats = {"s": _na("%.2f s"), "x": _na("%.2f×"),
               "share": lambda v: DASH if v is None else "%.1f%%" % (100 * v),
               "bytes": human_bytes}
    base = grouping.choose_baseline(groups, baseline)
    if baseline is not None and base is None:
        raise UserError("--baseline %s: no results for that target (have: %s)"
                        % (baseline, ", ".join(sorted({g.target for g in groups}))))
    if goal is None:
        goals = [r["cell"].get("target_accuracy") for r in records
                 if r["cell"].get("target_accuracy") is not None]
        goal = goals[0] if goals else None
    speedups = grouping.speedups(groups, base)
    effects = grouping.effects(groups)
    environments = sorted({g.environment for g in groups})
    sizes = grouping.batch_sizes(groups)
    # (environment, target title, the variant's other keys, {batch size: Speedup})
    batch_rows: dict[tuple[str, str, str], dict[int, Any]] = {}
    for g in groups:
        if g.target != base and g.key in speedups and "batch_size" in g.variant:
            rest = variant_text({k: v for k, v in g.variant.items() if k != "batch_size"})
            marks = " ".join(g.marks)
            row = batch_rows.setdefault((g.environment, g.target_label,
                                         rest + (" (%s)" % marks if marks else "")), {})
            row[g.batch_size] = speedups[g.key]
    batch_table = [(env, label, rest, row) for (env, label, rest), row in batch_rows.items()]
    columns, rows, values, differ = grouping.fingerprints(groups)
    failures = [(g, r) for g in groups for r in g.failed]
    scaling_rows = scaling.rows(groups)
    repeats = sorted({len(g.records) for g in groups})
    return {
        "head_to_head": headtohead.tables(groups, base_env), "baseline_env": base_env,
        "cards": headtohead.cards(groups, speedups), "ladder": headtohead.ladder(groups),
        "scaling": scaling_rows, "scaling_reference": scaling.WRITE_UP_TWO_GPUS,
        "models": scaling.model_rows(groups),
        "statistics": headtohead.STATISTICS,
        "groups": groups, "environments": environments, "baseline": base,
        # Named as the hardware is, by a one-device cell where there is one (a ddp cell's
        # title says "2 ranks × 1 thread", which is how that cell ran, not the target).
        "baseline_label": next((g.target_label for g in sorted(
            (g for g in groups if g.target == base),
            key=lambda g: int(scaling.parallel_of(g).get("world_size") or 1) > 1)), base),
        "speedups": speedups, "effects": effects, "batch_sizes": sizes,
        "batch_table": batch_table, "goal": goal, "skipped": skipped,
        "fp_columns": columns, "fp_rows": rows, "fp_values": values, "fp_differ": differ,
        "repro": grouping.reproducibility(groups), "failures": failures,
        "reference": reference.compare(groups, formats),
        "reference_hardware": reference.HARDWARE, "reference_stack": reference.STACK,
        "total": len(records), "ok_count": sum(1 for r in records if r["status"] == "ok"),
        "synthetic_only": all(r["config"]["synthetic"] for r in records),
        "repeats": repeats, "noisy_cv": grouping.NOISY_CV,
        "charts": {
            "epoch_times": charts.epoch_times(groups),
            "phases": charts.phase_breakdown(groups),
            "speedup_batch": charts.speedup_by_batch(list(speedups.values())),
            "curves": charts.curves(groups),
            "effects": charts.effect_bars(effects),
            "scaling": charts.scaling(scaling_rows, scaling.WRITE_UP_TWO_GPUS),
        },
    }


def _cost_per_epoch(r: dict[str, Any]) -> float | None:
    price, epoch = r["cell"].get("price_per_hour"), r["summary"].get("epoch_s_median")
    return None if price is None or epoch is None else round(price * epoch / 3600, 8)


def _phase_median(phase: str):
    def value(r: dict[str, Any]) -> float | None:
        steady = r["epochs"][1:] or r["epochs"]
        seconds = [e["phases_s"].get(phase) or 0.0 for e in steady]
        return round(stats.median(seconds), 6) if seconds else None
    return value


def _field(section: str, key: str):
    return lambda r: r[section].get(key)


# results.csv: one row per result file (failed ones included), one column per function.
CSV_COLUMNS: list[tuple[str, Any]] = [
    ("environment", _field("cell", "environment")),
    ("target", _field("cell", "target")),
    ("target_label", _field("cell", "target_label")),
    ("variant", lambda r: variant_text(r["cell"].get("variant") or {})),
    ("repeat", _field("cell", "repeat")),
    ("status", lambda r: r["status"]),
    ("error_type", lambda r: (r.get("error") or {}).get("type", "")),
    *[(key, _field("summary", key))
      for key in ("epoch_s_median", "first_epoch_s", "samples_per_s", "final_test_acc")],
    *[("phase_%s_s" % p, _phase_median(p)) for p in result.PHASES],
    ("measured_hardware", lambda r: hardware.measured_name(
        r["env"], r["config"].get("device"), (r.get("parallel") or {}).get("world_size") or 1)),
    ("quick", _field("cell", "quick")),
    ("data", lambda r: (r["cell"].get("data") or {}).get("source")),
    ("threads", _field("config", "threads")),
    ("threads_from", lambda r: (r["cell"].get("resources") or {}).get("threads_from")),
    ("cpu_quota", lambda r: (r["cell"].get("resources") or {}).get("cpus")),
    ("cpuset", lambda r: (r["cell"].get("resources") or {}).get("cpuset")),
    *[(key, _field("memory", key))
      for key in ("gpu_peak_allocated_bytes", "gpu_peak_reserved_bytes", "cgroup_peak_bytes",
                  "process_rss_peak_bytes", "child_rss_peak_bytes", "swap_peak_bytes")],
    ("model", _field("config", "model")),
    ("parameters", lambda r: (r.get("model") or {}).get("parameters")),
    ("flops_per_image", lambda r: (r.get("model") or {}).get("flops_per_image")),
    ("parallel", _field("config", "parallel")),
    ("world_size", lambda r: (r.get("parallel") or {}).get("world_size")),
    ("global_batch", lambda r: (r.get("parallel") or {}).get("global_batch")),
    ("quantized_test_acc", lambda r: (r.get("quantized_eval") or {}).get("test_acc")),
    ("quantized_test_s", lambda r: (r.get("quantized_eval") or {}).get("test_s")),
    ("float_cpu_test_s", lambda r: (r.get("quantized_eval") or {}).get("float_test_s")),
    ("pin_memory", _field("config", "pin_memory")),
    ("non_blocking", _field("config", "non_blocking")),
    ("price_per_hour", _field("cell", "price_per_hour")),
    ("cost_per_epoch", _cost_per_epoch),
    *[(key, _field("env", key)) for key in ("torch", "cuda", "device_name")],
    ("image_id", lambda r: (r["env"].get("image") or {}).get("id")),
    ("lock_sha256", lambda r: (r["env"].get("image") or {}).get("lock_sha256")),
    ("bench_sha256", _field("env", "bench_sha256")),
]


def csv_safe(value: Any) -> Any:
    """A text cell that a spreadsheet would run as a formula is prefixed with ' (OWASP's rule
    for CSV injection: cells starting with = + - @ tab or carriage return)."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def results_csv(groups: list[Group]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([name for name, _ in CSV_COLUMNS])
    for g in groups:
        for r in g.records:
            writer.writerow([csv_safe(value(r)) for _, value in CSV_COLUMNS])
    return buffer.getvalue()


# Markdown that a name or message could carry: emphasis, code, links and images ([ ] !),
# tables (|), strikethrough (~), math ($, which GitHub renders), headings and lists only at
# a line start (newlines folded).
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]|~#!$])")


def markdown_safe(value: Any) -> Any:
    """Text from result files as plain text in summary.md: one line, no Markdown, no HTML,
    no autolink (GitHub turns bare http:// and www. into links)."""
    if not isinstance(value, str):
        return value
    text = " ".join(value.split())
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _MARKDOWN_SPECIAL.sub(r"\\\1", text)
    return re.sub(r"(?i)(://|www\.)", lambda m: m.group(1)[0] + "&#8203;" + m.group(1)[1:],
                  text)


def render(paths: list[Path], out: Path, baseline: str | None = None,
           goal: float | None = None, baseline_env: str | None = None,
           cloud_runs: list[dict[str, Any]] | None = None) -> dict[str, Path]:
    """Report every valid result in ``paths`` (files or folders), naming the files left out."""
    loaded, skipped = grouping.load(paths)
    return render_loaded(loaded, skipped, out, baseline, goal, where=", ".join(map(str, paths)),
                         baseline_env=baseline_env, cloud_runs=cloud_runs)


def render_loaded(loaded: list[grouping.Loaded], skipped: list[tuple[str, str]], out: Path,
                  baseline: str | None = None, goal: float | None = None,
                  where: str = "the results", baseline_env: str | None = None,
                  cloud_runs: list[dict[str, Any]] | None = None) -> dict[str, Path]:
    records = [item.record for item in loaded]
    if not records:
        raise UserError("no results to report in %s (run `nox -s bench-cpu` first)%s"
                        % (where, "; left out: %s" % "; ".join("%s: %s" % s for s in skipped[:3])
                           if skipped else ""))
    context = build_context(records, skipped, baseline, goal, baseline_env)
    # The cloud clusters these results came from (REPORTS/cloud/runs.json of `nox -s cloud`):
    # what each cost, by the provider's accounting where it gives one.
    targets = {r["cell"].get("target") for r in records}
    context["cloud_runs"] = [run for run in cloud_runs or [] if run.get("target") in targets]
    env = jinja_env()
    out.mkdir(parents=True, exist_ok=True)
    written = {"html": out / "index.html", "md": out / "summary.md", "csv": out / "results.csv"}
    result.write_text_atomic(written["html"], env.get_template("report.html.j2").render(**context))
    md_env = jinja_env()
    md_env.autoescape = False
    md_env.finalize = markdown_safe
    result.write_text_atomic(written["md"], md_env.get_template("summary.md.j2").render(**context))
    result.write_text_atomic(written["csv"], results_csv(context["groups"]))
    return written


def _filter(loaded: list[grouping.Loaded],
            args: argparse.Namespace) -> list[grouping.Loaded]:
    """--env, --target and --kind for result folders given by path."""
    def keep(record: dict[str, Any]) -> bool:
        cell = record["cell"]
        device = record["config"]["device"]
        return ((not args.env or cell.get("environment") in args.env)
                and (not args.target or cell.get("target") in args.target)
                and (args.kind is None or device == args.kind)
                and (not args.quick or bool(cell.get("quick")))
                and (not args.synthetic or bool(record["config"]["synthetic"])))
    return [item for item in loaded if keep(item.record)]


def current_results(matrix_path: Path, reports: Path, envs: list[str] | None = None,
                    targets: list[str] | None = None, kind: str | None = None,
                    quick: bool = False, synthetic: bool = False, data: Path | None = None,
                    locks: Path | None = None
                    ) -> tuple[list[grouping.Loaded], list[tuple[str, str]], str]:
    """The results of the current matrix's cells in REPORTS/results, the files left out with
    their reasons, and a phrase saying where they came from."""
    from envbench.cells import expansion
    from envbench.images import lock as lockmod
    from envbench.matrix import models

    m = models.load(matrix_path)
    chosen = expansion.expand(m, envs, targets, kind, quick)
    folder = reports / "results"
    loaded, skipped = grouping.load([folder])
    synthetic = synthetic or m.benchmark.data == "synthetic"
    loaded, left_out = selection.current(loaded, m, chosen, synthetic, data,
                                         matrix_path.resolve().parent, quick,
                                         locks or lockmod.default_dir(matrix_path))
    return loaded, sorted(skipped + left_out), "%s for the cells of %s" % (folder, matrix_path)


def render_current(matrix_path: Path, reports: Path, **selection_options: Any
                   ) -> dict[str, Path]:
    """Report the current matrix's cells into REPORTS (what `nox -s report` does)."""
    loaded, skipped, where = current_results(matrix_path, reports, **selection_options)
    return render_loaded(loaded, skipped, reports, where=where)


def main(args: argparse.Namespace) -> int:
    out = args.out or args.reports
    if args.results:
        # Folders named on the command line: report what they hold, nothing else.
        loaded, skipped = grouping.load(args.results)
        loaded = _filter(loaded, args)
        where = ", ".join(map(str, args.results))
    else:
        loaded, skipped, where = current_results(
            args.matrix, args.reports, args.env, args.target, args.kind, args.quick,
            args.synthetic, args.data, args.locks)
    from envbench.cloud.fanout import runs_of

    written = render_loaded(loaded, skipped, out, args.baseline, args.target_accuracy, where,
                            args.baseline_env, cloud_runs=runs_of(args.reports))
    print("reported %d results; left out %d files%s" % (
        len(loaded), len(skipped), " (the page lists them with the reason)" if skipped else ""))
    for path, why in skipped[:5]:
        print("  left out %s: %s" % (path, why))
    if len(skipped) > 5:
        print("  … and %d more" % (len(skipped) - 5))
    for path in written.values():
        print("wrote %s (%.1f kB)" % (path, path.stat().st_size / 1000), file=sys.stdout)
    return 0
