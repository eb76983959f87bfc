"""The report's pages: index.html, summary.md and results.csv from any set of results."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from envbench import users
from envbench.command_options import Options
from envbench.inference import verdicts
from envbench.report import (
    charts,
    csvfile,
    efficiency,
    family,
    formats,
    grouping,
    headtohead,
    nodescaling,
    operators,
    reference,
    scaling,
    selection,
    templating,
    unmeasured,
)
from envbench.results import outcome, store
from envbench.results.clusters import ClusterRun
from envbench.results.identity import variant_text
from envbench.results.record import Result
from envbench.user_errors import UserError


def _synthetic_by_choice(records: list[Result]) -> bool:
    """Whether every result that could have run on CIFAR-10 ran on synthetic data (and there
    is one): resnet50 and the GPTs are synthetic in every run and say nothing about it."""
    could = [r for r in records if grouping.reads_a_data_set(r)]
    return bool(could) and all(r.config["synthetic"] for r in could)


def clock_bound(records: list[Result]) -> dict[str, Any] | None:
    """The most the phase clock can have added to an epoch, as a share of that cell's median
    epoch: the largest among the results that measured it (bench since the clock section),
    with that cell's marks and cost per mark. None where none did."""
    rows = [(r.clock.epoch_s_at_most / r.summary.epoch_s_median, r) for r in records
            if r.ok and r.clock and r.summary.epoch_s_median]
    if not rows:
        return None
    share, r = max(rows, key=lambda row: row[0])
    assert r.clock is not None  # only results with a clock are rows
    return {"share": share, "environment": r.cell.environment, "target": r.cell.target_label,
            "marks": r.clock.marks_per_epoch, "mark_us": r.clock.mark_s * 1e6,
            "epoch_ms": r.clock.epoch_s_at_most * 1e3, "cells": len(rows)}


def build_context(records: list[Result], skipped: list[tuple[str, str]],
                  baseline: str | None, goal: float | None,
                  baseline_env: str | None = None,
                  keep_contended: bool = False, out: Path | None = None) -> dict[str, Any]:
    """Everything the page shows; ``out`` is where it goes (links to traces are relative).
    One builder per section of the page; the comparisons are tested together first, so
    every section shows the verdicts the family decided."""
    groups = grouping.group(records, keep_contended)
    base_env, base = _baselines(groups, baseline, baseline_env)
    speedups = grouping.speedups(groups, base)
    scaling_rows = scaling.rows(groups)
    head_to_head = headtohead.tables(groups, base_env)
    # Every interval the page prints is one comparison of one family (report/family.py).
    verdict_family = family.test_together(
        [*speedups.values(), *(row.speedup for row in scaling_rows),
         *(e.versus for table in head_to_head for _, row in table.rows for e in row.values()
           if e.versus is not None)])
    effects = grouping.effects(groups)
    return {
        "head_to_head": head_to_head, "baseline_env": base_env, "family": verdict_family,
        "cards": headtohead.cards(groups, speedups), "ladder": headtohead.ladder(groups),
        "statistics": headtohead.STATISTICS, "skipped": skipped,
        "goal": goal if goal is not None else _goal(records),
        **_speedup_section(groups, base, speedups, effects),
        **_scaling_section(groups, scaling_rows),
        **_fingerprint_section(groups),
        **_reference_section(groups),
        **_efficiency_section(groups, base_env, out),
        **_run_section(records, groups),
        "charts": _charts(groups, speedups, effects, scaling_rows),
    }


def _baselines(groups: list[grouping.Group], baseline: str | None, baseline_env: str | None
               ) -> tuple[str | None, str | None]:
    """(the baseline environment, the baseline target), each as asked or chosen."""
    base_env = headtohead.baseline_environment(groups, baseline_env)
    if baseline_env is not None and base_env is None:
        raise UserError("--baseline-env %s: no results for that environment (have: %s)"
                        % (baseline_env, ", ".join(sorted({g.environment for g in groups}))))
    base = grouping.choose_baseline(groups, baseline)
    if baseline is not None and base is None:
        raise UserError("--baseline %s: no results for that target (have: %s)"
                        % (baseline, ", ".join(sorted({g.target for g in groups}))))
    return base_env, base


def _goal(records: list[Result]) -> float | None:
    """The matrix's target accuracy, as the cells recorded it."""
    goals = [r.cell.target_accuracy for r in records if r.cell.target_accuracy is not None]
    return goals[0] if goals else None


def _speedup_section(groups: list[grouping.Group], base: str | None,
                     speedups: dict[Any, Any], effects: Any) -> dict[str, Any]:
    # (environment, target title, the variant's other keys, {batch size: Speedup})
    batch_rows: dict[tuple[str, str, str], dict[int, Any]] = {}
    for g in groups:
        if g.target != base and g.key in speedups and "batch_size" in g.variant:
            rest = variant_text({k: v for k, v in g.variant.items() if k != "batch_size"})
            marks = " ".join(g.marks)
            row = batch_rows.setdefault((g.environment, g.title,
                                         rest + (" (%s)" % marks if marks else "")), {})
            row[g.batch_size] = speedups[g.key]
    return {
        "groups": groups, "environments": sorted({g.environment for g in groups}),
        "baseline": base,
        # Named as the hardware is, by a one-device cell where there is one (a ddp cell's
        # title says "2 ranks × 1 thread", which is how that cell ran, not the target).
        "baseline_label": next((g.title for g in sorted(
            (g for g in groups if g.target == base),
            key=lambda g: scaling.parallel_of(g).world_size > 1)), base),
        "speedups": speedups, "effects": effects, "batch_sizes": grouping.batch_sizes(groups),
        "batch_table": [(env, label, rest, row)
                        for (env, label, rest), row in batch_rows.items()]}


def _scaling_section(groups: list[grouping.Group], scaling_rows: list[Any]) -> dict[str, Any]:
    return {"scaling": scaling_rows, "scaling_reference": scaling.WRITE_UP_TWO_GPUS,
            "node_scaling": nodescaling.rows(groups),
            "models": scaling.model_rows(groups),
            # (name, unit) of every workload, in the order the page groups them
            "workloads": sorted({(g.workload, g.unit) for g in groups})}


def _fingerprint_section(groups: list[grouping.Group]) -> dict[str, Any]:
    columns, rows, values, differ = grouping.fingerprints(groups)
    return {"fp_columns": columns, "fp_rows": rows, "fp_values": values, "fp_differ": differ,
            "repro": grouping.reproducibility(groups),
            "failures": [(g, r) for g in groups for r in g.failed]}


def _reference_section(groups: list[grouping.Group]) -> dict[str, Any]:
    fmt = {"s": formats.na("%.2f s"), "x": formats.na("%.2f×"), "share": formats.share,
           "bytes": formats.human_bytes}
    return {
        "reference": reference.compare(groups, fmt),
        "reference_hardware": reference.HARDWARE, "reference_stack": reference.STACK,
        # Lambda's ResNet-50 figures, where this report has resnet50 cells to set beside them.
        "resnet50_reference": reference.resnet50_rows(groups)
        if any(g.workload == "resnet50" for g in groups) else [],
        "lambda_source": reference.LAMBDA_SOURCE, "lambda_url": reference.LAMBDA_URL}


def _efficiency_section(groups: list[grouping.Group], base_env: str | None,
                        out: Path | None) -> dict[str, Any]:
    efficiency_rows = efficiency.rows(groups)
    return {
        "efficiency": efficiency_rows, "probe_gaps": efficiency.probe_gaps(efficiency_rows),
        "peak_sources": list({e.peak.name: e.peak for e in efficiency_rows if e.peak}.values()),
        "profiles": operators.cells(groups, out), "moved": operators.moved(groups, base_env)}


def _run_section(records: list[Result], groups: list[grouping.Group]) -> dict[str, Any]:
    """What the run was: how many cells, how many repeats, quick or not, the clock's cost."""
    return {
        "total": len(records), "ok_count": sum(1 for r in records if r.status == "ok"),
        "refused_count": sum(1 for r in records if outcome.of(r) == "refused"),
        # Synthetic by choice: workloads with no data set to have (resnet50, the GPTs) are
        # synthetic in every run and say nothing about whether CIFAR-10 was there.
        "synthetic_only": _synthetic_by_choice(records),
        "repeats": sorted({len(g.records) for g in groups}), "noisy_cv": grouping.NOISY_CV,
        "clock": clock_bound(records), "quick_run": any(g.identity.quick for g in groups),
        "min_repeats": verdicts.MIN_REPEATS}


def _charts(groups: list[grouping.Group], speedups: dict[Any, Any], effects: Any,
            scaling_rows: list[Any]) -> dict[str, str | None]:
    return {
        "epoch_times": charts.epoch_times(groups),
        "phases": charts.phase_breakdown(groups),
        "speedup_batch": charts.speedup_by_batch(list(speedups.values())),
        "curves": charts.curves(groups),
        "effects": charts.effect_bars(effects),
        "scaling": charts.scaling(scaling_rows, scaling.WRITE_UP_TWO_GPUS),
    }


def render(records: list[Result], skipped: list[tuple[str, str]], out: Path,
           baseline: str | None = None, goal: float | None = None,
           where: str = "the results", baseline_env: str | None = None,
           cloud_runs: list[ClusterRun] | None = None,
           keep_contended: bool = False) -> dict[str, Path]:
    """Write the three files into ``out``; ``skipped`` (file, why) are listed on the page."""
    if not records:
        raise UserError("no results to report in %s (run `./noxw -s bench-cpu` first)%s"
                        % (where, "; left out: %s" % "; ".join("%s: %s" % s for s in skipped[:3])
                           if skipped else ""))
    context = build_context(records, skipped, baseline, goal, baseline_env, keep_contended, out)
    context["keep_contended"] = keep_contended
    # The cloud clusters these results came from (REPORTS/cloud/runs.json of `./noxw -s cloud`):
    # what each cost, by the provider's accounting where it gives one.
    targets = {r.cell.target for r in records}
    context["cloud_runs"] = [run for run in cloud_runs or [] if run.target in targets]
    context["not_measured"] = unmeasured.sections(context)
    context["folded"] = {m.section for m in context["not_measured"]}
    written = {"html": out / "index.html", "md": out / "summary.md", "csv": out / "results.csv"}
    html = templating.html_env().get_template("report.html.j2").render(**context)
    md = templating.markdown_env().get_template("summary.md.j2").render(**context)
    # All three or none: a full disk leaves the earlier report whole. Under sudo the
    # caller's, like the results.
    users.write_together([(written["html"], html), (written["md"], md),
                          (written["csv"], csvfile.text(context["groups"]))], "the report")
    return written


def render_files(paths: list[Path], out: Path, baseline: str | None = None,
                 goal: float | None = None, baseline_env: str | None = None,
                 cloud_runs: list[ClusterRun] | None = None) -> dict[str, Path]:
    """Report every valid result in ``paths`` (files or folders), naming the files left out."""
    records, skipped = store.load_all(paths)
    return render(records, skipped, out, baseline, goal, ", ".join(map(str, paths)),
                  baseline_env, cloud_runs)


def render_current(opts: Options) -> dict[str, Path]:
    """Report the current matrix's cells into REPORTS (what `./noxw -s report` does)."""
    records, skipped, where = selection.current_results(opts)
    return render(records, skipped, opts.reports_dir, where=where)
