"""The report's charts: matplotlib figures rendered to inline SVG, byte-identical per input.

No pyplot (no global figure state); ids are salted per chart so that several SVGs can share
one HTML page, and no date or version is written into them.
"""
from __future__ import annotations

import functools
import io
import math
import re
from collections.abc import Callable
from typing import Any

import matplotlib
from matplotlib.figure import Figure

from bench.result import PHASES
from envbench.report import grouping
from envbench.report.grouping import Group, Speedup
from envbench.results.identity import variant_text

COLOURS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
           "#ff9da7", "#9c755f", "#bab0ac"]
PHASE_COLOURS = dict(zip(list(PHASES) + ["other"], COLOURS))


def _plain_text(chart: Callable[..., str | None]) -> Callable[..., str | None]:
    """Names in charts are text: `$x$` in an environment's name or a label stays `$x$`
    instead of being parsed (and garbled, or refused) as mathtext."""
    @functools.wraps(chart)
    def plain(*args: Any, **kwargs: Any) -> str | None:
        with matplotlib.rc_context({"text.parse_math": False}):
            return chart(*args, **kwargs)
    return plain


def label(g: Group) -> str:
    variant = variant_text(g.variant)
    return "%s · %s%s" % (g.environment, g.title, "" if variant == "—" else " · " + variant)


def to_svg(fig: Figure, name: str) -> str:
    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": "envbench-" + name, "svg.fonttype": "none",
                                "font.family": "sans-serif"}):
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None},
                    bbox_inches="tight")
    text = buffer.getvalue()
    text = text[text.index("<svg"):]
    text = re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)
    # Scale with the page instead of fixed points (the viewBox keeps the proportions).
    text = re.sub(r'<svg([^>]*?) width="([^"]+)" height="[^"]+"',
                  r'<svg\1 role="img" aria-label="%s" class="chart" style="max-width: \2"' % name,
                  text, count=1)
    return text


def _bar_figure(count: int) -> tuple[Figure, Any]:
    fig = Figure(figsize=(9, 0.9 + 0.32 * max(count, 1)))
    return fig, fig.add_subplot()


@_plain_text
def epoch_times(groups: list[Group]) -> str | None:
    rows = [g for g in groups if g.epoch_s is not None]
    if not rows:
        return None
    fig, ax = _bar_figure(len(rows))
    values = [grouping.seconds(g) for g in rows]
    spreads = [g.spread or (v, v) for g, v in zip(rows, values)]
    # A hand-edited or partial result can put the median outside its epochs' range.
    low = [max(0.0, v - spread[0]) for v, spread in zip(values, spreads)]
    high = [max(0.0, spread[1] - v) for v, spread in zip(values, spreads)]
    colours = [COLOURS[0] if g.device == "cuda" else COLOURS[1] for g in rows]
    ax.barh(range(len(rows)), values, xerr=[low, high], color=colours, capsize=3)
    ax.set_yticks(range(len(rows)), [label(g) for g in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("seconds per epoch (median; whiskers: min–max over repeats and epochs)")
    ax.grid(axis="x", alpha=0.3)
    return to_svg(fig, "epoch-times")


@_plain_text
def phase_breakdown(groups: list[Group]) -> str | None:
    rows = [g for g in groups if g.phases]
    if not rows:
        return None
    fig, ax = _bar_figure(len(rows))
    left = [0.0] * len(rows)
    for phase in list(PHASES) + ["other"]:
        if phase == "other":
            widths = [max(0.0, grouping.seconds(g) - sum(g.phases.values())) for g in rows]
        else:
            widths = [g.phases[phase] for g in rows]
        ax.barh(range(len(rows)), widths, left=left, color=PHASE_COLOURS[phase], label=phase)
        left = [a + b for a, b in zip(left, widths)]
    # The epoch itself, as a tick: where phases overlap (a GPU-bound CUDA cell) their bar
    # runs past it, and the row says so instead of showing an "other" of zero.
    ax.plot([grouping.seconds(g) for g in rows], range(len(rows)), linestyle="none",
            marker="|", markersize=16, markeredgewidth=2, color="black", label="epoch")
    ax.set_yticks(range(len(rows)), [label(g) + (" · phases overlap (%.0f%%)"
                                                 % (100 * g.phase_overlap)
                                                 if g.phase_overlap is not None else "")
                                     for g in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("seconds per epoch by phase (median over steady epochs)")
    ax.legend(ncol=7, fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    return to_svg(fig, "phases")


@_plain_text
def speedup_by_batch(speedups: list[Speedup]) -> str | None:
    lines: dict[str, list[tuple[int, float]]] = {}
    for s in speedups:
        g = s.group
        if g.target == s.baseline.target or "batch_size" not in g.variant:
            continue
        rest = {k: v for k, v in g.variant.items() if k != "batch_size"}
        name = "%s · %s%s" % (g.environment, g.title,
                              "" if not rest else " · " + variant_text(rest))
        lines.setdefault(name, []).append((g.batch_size, s.ratio))
    lines = {k: sorted(v) for k, v in lines.items() if len(v) > 1}
    if not lines:
        return None
    fig = Figure(figsize=(7, 3.6))
    ax = fig.add_subplot()
    for i, (name, points) in enumerate(sorted(lines.items())):
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=name,
                color=COLOURS[i % len(COLOURS)])
    ax.set_xscale("log", base=2)
    sizes = sorted({p[0] for pts in lines.values() for p in pts})
    ax.set_xticks(sizes, [str(s) for s in sizes])
    ax.set_xlabel("batch size")
    ax.set_ylabel("speedup over baseline (×)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return to_svg(fig, "speedup-batch")


@_plain_text
def curves(groups: list[Group]) -> str | None:
    rows = [g for g in groups if g.ok and len(g.curve("train_loss")) > 1]
    if not rows:
        return None
    fig = Figure(figsize=(10, 3.8))
    loss_ax, acc_ax = fig.subplots(1, 2)
    for i, g in enumerate(rows):
        colour = COLOURS[i % len(COLOURS)]
        style = "-" if i < len(COLOURS) else "--"
        for ax, key in ((loss_ax, "train_loss"), (acc_ax, "test_acc")):
            values = g.curve(key)
            xs = [x + 1 for x, v in enumerate(values) if not math.isnan(v)]
            ax.plot(xs, [v for v in values if not math.isnan(v)], style, color=colour,
                    label=label(g), marker=".")
    loss_ax.set_title("training loss", fontsize=10)
    acc_ax.set_title("test accuracy", fontsize=10)
    for ax in (loss_ax, acc_ax):
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3)
    acc_ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5), frameon=False)
    return to_svg(fig, "curves")


@_plain_text
def effect_bars(effects: list[tuple[str, Any, Group, Group, float]]) -> str | None:
    if not effects:
        return None
    fig, ax = _bar_figure(len(effects))
    names = ["%s=%s · %s · %s" % (opt, val, g.environment, g.title)
             for opt, val, g, _, _ in effects]
    ratios = [e[4] for e in effects]
    ax.barh(range(len(effects)), ratios,
            color=[COLOURS[4] if r >= 1 else COLOURS[2] for r in ratios])
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(effects)), names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("speedup over the same cell without the option (×; >1 is faster)")
    ax.grid(axis="x", alpha=0.3)
    return to_svg(fig, "effects")


@_plain_text
def scaling(rows: list[Any], reference: tuple[float, float]) -> str | None:
    """Speedup against world size per environment, target and mode, with the ideal line and
    the write-up's two-GPU band (``rows`` are envbench.scaling.ScalingRow)."""
    lines: dict[str, list[tuple[int, float]]] = {}
    for row in rows:
        g = row.group
        name = "%s · %s · %s%s" % (g.environment, g.title, row.mode,
                                   "" if row.rest == "—" else " · " + row.rest)
        lines.setdefault(name, [(1, 1.0)]).append((row.world_size, row.speedup.ratio))
    if not lines:
        return None
    fig = Figure(figsize=(7, 3.6))
    ax = fig.add_subplot()
    sizes = sorted({p[0] for pts in lines.values() for p in pts})
    ax.plot(sizes, sizes, linestyle="--", color="#999999", label="ideal (speedup = devices)")
    ax.fill_between([1.9, 2.1], [reference[0]] * 2, [reference[1]] * 2, color="#f28e2b",
                    alpha=0.25, label="write-up: %.1f–%.1f× on two GPUs (reference)" % reference)
    for i, (name, points) in enumerate(sorted(lines.items())):
        points = sorted(points)
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=name,
                color=COLOURS[i % len(COLOURS)])
    ax.set_xticks(sizes, [str(s) for s in sizes])
    ax.set_xlabel("devices (GPUs, or CPU ranks sharing the cores)")
    ax.set_ylabel("speedup over one device (×)")
    ax.grid(alpha=0.3)
    # Beside the axes: the lines meet at one device, where a legend inside would cover them.
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    return to_svg(fig, "scaling")
