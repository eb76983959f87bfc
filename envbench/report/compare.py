"""`nox -s compare -- OLD NEW`: the same cells in two runs, and only the changes that clear
the noise (as asv's and pytest-benchmark's compare do).

A cell is matched across the runs by what the user would call it: environment, target,
swept options, and --quick / synthetic data. Its time ratio new/old gets a bootstrap
interval from both runs' steady epochs; a regression (or an improvement) is flagged only
when the whole interval is beyond the threshold (default 5%). Beside each changed cell:
what changed in its stack (torch, CUDA, cuDNN, driver, lock, image).
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import result
from envbench import stats
from envbench.errors import UserError
from envbench.report import grouping, pages
from envbench.report.grouping import Group, variant_text

FINGERPRINT = (("torch", "torch"), ("CUDA", "cuda"), ("cuDNN", "cudnn"), ("driver", "driver"),
               ("lock", "lock_sha256"), ("image", "id"))


@dataclass
class Change:
    key: tuple[str, str, str, str]
    old: Group | None
    new: Group | None
    ratio: float | None = None                # new / old median epoch: > 1 is slower
    ci: tuple[float, float] | None = None
    flag: str = "—"                           # "regression", "improvement", "no change", …
    differences: tuple[tuple[str, Any, Any], ...] = ()

    @property
    def name(self) -> str:
        env, target, variant, marks = self.key
        return "%s × %s%s%s" % (env, target, "" if variant == "—" else " × " + variant,
                                " (%s)" % marks if marks else "")


def _key(g: Group) -> tuple[str, str, str, str]:
    return (g.environment, g.target, variant_text(g.variant), " ".join(g.kind))


def _fingerprint(g: Group) -> dict[str, Any]:
    record = (g.ok or g.records)[0]
    env, image = record["env"], record["env"].get("image") or {}
    return {label: (image.get(key) if key in ("lock_sha256", "id") else env.get(key))
            for label, key in FINGERPRINT}


def compare(old: list[dict[str, Any]], new: list[dict[str, Any]],
            threshold: float = 0.05) -> list[Change]:
    before = {_key(g): g for g in grouping.group(old)}
    after = {_key(g): g for g in grouping.group(new)}
    changes = []
    for key in sorted(set(before) | set(after)):
        o, n = before.get(key), after.get(key)
        change = Change(key, o, n)
        if o is None or n is None:
            change.flag = "only in the new run" if o is None else "only in the old run"
        elif not o.epoch_s or not n.epoch_s:
            change.flag = "failed in the %s run" % ("old" if not o.epoch_s else "new")
        else:
            change.ratio = n.epoch_s / o.epoch_s
            if len(o.epoch_walls) > 1 and len(n.epoch_walls) > 1:
                change.ci = stats.bootstrap_ratio_ci(n.epoch_walls, o.epoch_walls)
            change.flag = _flag(change.ci, threshold)
            a, b = _fingerprint(o), _fingerprint(n)
            change.differences = tuple((label, a[label], b[label]) for label, _ in FINGERPRINT
                                       if a[label] != b[label])
        changes.append(change)
    return changes


def _flag(ci: tuple[float, float] | None, threshold: float) -> str:
    if ci is None:
        return "no interval (one epoch a side)"
    low, high = ci
    if low > 1.0 + threshold:
        return "regression"
    if high < 1.0 / (1.0 + threshold):
        return "improvement"
    return "no change"


def render(changes: list[Change], old: str, new: str, threshold: float, out: Path,
           skipped: list[tuple[str, str]]) -> dict[str, Path]:
    context = {"changes": changes, "old": old, "new": new, "threshold": threshold,
               "skipped": skipped,
               "regressions": sum(c.flag == "regression" for c in changes),
               "improvements": sum(c.flag == "improvement" for c in changes)}
    out.mkdir(parents=True, exist_ok=True)
    written = {"html": out / "compare.html", "md": out / "compare.md"}
    env = pages.jinja_env()
    result.write_text_atomic(written["html"], env.get_template("compare.html.j2").render(**context))
    md_env = pages.jinja_env()
    md_env.autoescape = False
    md_env.finalize = pages.markdown_safe
    result.write_text_atomic(written["md"], md_env.get_template("compare.md.j2").render(**context))
    return written


def main(args: argparse.Namespace) -> int:
    old, skipped_old = grouping.load([args.old])
    new, skipped_new = grouping.load([args.new])
    for what, path, loaded, skipped in (("OLD", args.old, old, skipped_old),
                                        ("NEW", args.new, new, skipped_new)):
        if not loaded:
            raise UserError("%s (%s) holds no valid results%s" % (
                what, path, "; left out: %s" % "; ".join("%s: %s" % s for s in skipped[:3])
                if skipped else ""))
    changes = compare([x.record for x in old], [x.record for x in new], args.threshold)
    written = render(changes, str(args.old), str(args.new), args.threshold, args.out,
                     skipped_old + skipped_new)
    width = max(len(c.name) for c in changes)
    for c in changes:
        figures = ("%.3f s → %.3f s, ×%.3f" % (c.old.epoch_s, c.new.epoch_s, c.ratio)
                   if c.ratio is not None else "")
        interval = " (%.3f–%.3f)" % c.ci if c.ci else ""
        print("%-*s  %-12s %s%s" % (width, c.name, c.flag, figures, interval))
        for label, before, after in c.differences:
            print("%-*s    %s: %s → %s" % (width, "", label, before, after))
    regressions = sum(c.flag == "regression" for c in changes)
    print("%d cells; %d regression(s), %d improvement(s) beyond %.0f%%; wrote %s and %s"
          % (len(changes), regressions, sum(c.flag == "improvement" for c in changes),
             100 * args.threshold, written["html"], written["md"]), file=sys.stdout)
    return 1 if regressions and args.fail_on_regression else 0
