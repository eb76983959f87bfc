"""Two runs compared (`./noxw -s compare -- OLD NEW`): the same cells in both, and only the
changes that clear the noise (as asv's and pytest-benchmark's compare do); where both runs
were profiled, the operators that account for a flagged change.

A cell is matched across the runs by what the user would call it: environment, target,
swept options, and --quick / synthetic data; where a run holds the cell in more than one
image, by its image too, so that each is shown (the same image pairs across the runs; one
image on a side pairs with the one on the other, whatever it is). Its time ratio new/old
gets the calibrated test of the two runs' repeats (envbench.inference.verdicts); a regression (or an
improvement) is flagged only when the whole interval is beyond the threshold (default 5%).
The cells are tested together as one family (Holm's step-down on each cell's p-value of a
ratio beyond the threshold), so that the chance that any flag is false is at most 5%; each
interval is printed at the level its cell was tested at.
Beside each changed cell:
what changed in its stack (torch, CUDA, cuDNN, driver, lock, image).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envbench import users
from envbench.inference import looks, verdicts
from envbench.report import grouping, operators, templating
from envbench.report.grouping import Group
from envbench.report.operators import Moved
from envbench.results.identity import variant_text
from envbench.results.record import Result

FINGERPRINT = (("torch", "torch"), ("CUDA", "cuda"), ("cuDNN", "cudnn"), ("driver", "driver"),
               ("lock", "lock_sha256"), ("image", "id"))


# environment, target, variant, marks, and which of a cell's groups ("": the only one)
Key = tuple[str, str, str, str, str]


@dataclass
class Change:
    key: Key
    old: Group | None
    new: Group | None
    ratio: float | None = None                # new / old median epoch: > 1 is slower
    test: verdicts.Test | verdicts.NoTest | None = None   # new's repeats against old's
    share: float = 1.0                        # of the level: the looks the repeats took
    level: float = verdicts.ALPHA             # the family's level for this cell (Holm)
    ci: tuple[float, float] | None = None     # at level × share
    flag: str = "—"                           # "regression", "improvement", "no change", …
    differences: tuple[tuple[str, Any, Any], ...] = ()
    # Where both runs were profiled: the operators whose time per step moved the most in
    # the direction of a regression or an improvement.
    operators: tuple[Moved, ...] = ()

    @property
    def name(self) -> str:
        env, target, variant, marks, which = self.key
        marks = " ".join(m for m in (marks, which) if m)
        return "%s × %s%s%s" % (env, target, "" if variant == "—" else " × " + variant,
                                " (%s)" % marks if marks else "")


def _cell(g: Group) -> tuple[str, str, str, str]:
    return (g.environment, g.target, variant_text(g.variant), " ".join(g.comparable_marks))


def _image(g: Group) -> str:
    """An image as `docker images` shows its id: 12 hex digits ("none": never built)."""
    image = g.identity.image_id
    return image[7:19] if image else "none"


def _label(g: Group, images: dict[tuple[str, str, str, str], set[str]]) -> str:
    found = images.get(_cell(g))
    return "image %s" % _image(g) if found is not None and len(found) > 1 else ""


def _keyed(groups: list[Group], images: dict[tuple[str, str, str, str], set[str]],
           crowded: set[Key]) -> dict[Key, Group]:
    """Each group under its cell. Where either run holds the cell more than once (the cells
    in ``images``, with every image each has across both runs): under its image too where
    those differ, and under its run where a run holds one image twice (``crowded``: other
    data or resources), in both runs alike, so that no row stands for two."""
    keyed: dict[Key, Group] = {}
    for g in groups:
        key: Key = _cell(g) + (_label(g, images),)
        if key in crowded:
            key = _cell(g) + (("%s run %s" % (key[-1], g.identity.group[:8])).strip(),)
        keyed[key] = g
    return keyed


def _fingerprint(g: Group) -> dict[str, Any]:
    record = g.first
    return {label: (record.image.get(key) if key in ("lock_sha256", "id") else record.env[key])
            for label, key in FINGERPRINT}


def compare(old: list[Result], new: list[Result], threshold: float = 0.05,
            keep_contended: bool = False) -> list[Change]:
    old_groups = grouping.group(old, keep_contended)
    new_groups = grouping.group(new, keep_contended)
    per_run: dict[tuple[str, str, str, str], list[int]] = {}
    images: dict[tuple[str, str, str, str], set[str]] = {}
    for side, groups in enumerate((old_groups, new_groups)):
        for g in groups:
            counts = per_run.setdefault(_cell(g), [0, 0])
            counts[side] += 1
            images.setdefault(_cell(g), set()).add(_image(g))
    # One group a side: the cell pairs whatever the images (a new image is what compare is
    # for). More than one on a side: each image is its own row, paired by image.
    images = {cell: found for cell, found in images.items() if max(per_run[cell]) > 1}
    crowded = {key for groups in (old_groups, new_groups) for key, count in Counter(
        _cell(g) + (_label(g, images),) for g in groups if _cell(g) in images).items()
        if count > 1}
    before = _keyed(old_groups, images, crowded)
    after = _keyed(new_groups, images, crowded)
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
            change.test = verdicts.of_repeats(n.repeat_walls, o.repeat_walls)
            change.share = looks.share_of(o.side, n.side)
            a, b = _fingerprint(o), _fingerprint(n)
            change.differences = tuple((label, a[label], b[label]) for label, _ in FINGERPRINT
                                       if a[label] != b[label])
        changes.append(change)
    _test_together(changes, threshold)
    for change in changes:
        if change.test is not None:
            missing = change.test if isinstance(change.test, verdicts.NoTest) else None
            change.flag = _flag(change.ci, threshold,
                                None if missing is None or missing.too_few else missing.reason)
            o, n = change.old, change.new
            if change.flag in ("regression", "improvement") and o and n:
                change.operators = tuple(operators.accounting(o, n, change.flag == "regression"))
    return changes


def _test_together(changes: list[Change], threshold: float) -> None:
    """Holm's step-down over the cells that have a test: each is tested at its level, by
    its p-value of a ratio beyond the threshold (divided by its looks' share)."""
    tested = [(c, c.test) for c in changes if isinstance(c.test, verdicts.Test)]
    levels = verdicts.holm([test.p(threshold) / c.share for c, test in tested])
    for (change, test), level in zip(tested, levels):
        change.level = level
        change.ci = test.interval(level * change.share)


def family_sentence(changes: list[Change]) -> str:
    """What the run of compare says of its flags as a whole."""
    tested = sum(1 for c in changes if isinstance(c.test, verdicts.Test))
    if tested <= 1:
        return ("1 cell tested: at most a %g%% chance that its flag is false."
                % (100 * verdicts.ALPHA)) if tested else ""
    return ("%d cells tested together (Holm's step-down): at most a %g%% chance that any of "
            "these flags is false." % (tested, 100 * verdicts.ALPHA))


def _flag(ci: tuple[float, float] | None, threshold: float, why: str | None = None) -> str:
    if ci is None:
        return "no interval (%s)" % (why or "fewer than %d clean repeats a side"
                                     % verdicts.MIN_REPEATS)
    low, high = ci
    if low > 1.0 + threshold:
        return "regression"
    if high < 1.0 / (1.0 + threshold):
        return "improvement"
    return "no change"


def render(changes: list[Change], old: str, new: str, threshold: float, out: Path,
           skipped: list[tuple[str, str]]) -> dict[str, Path]:
    context = {"changes": changes, "old": old, "new": new, "threshold": threshold,
               "skipped": skipped, "family": family_sentence(changes),
               "regressions": sum(c.flag == "regression" for c in changes),
               "improvements": sum(c.flag == "improvement" for c in changes)}
    written = {"html": out / "compare.html", "md": out / "compare.md"}
    html = templating.html_env().get_template("compare.html.j2").render(**context)
    md = templating.markdown_env().get_template("compare.md.j2").render(**context)
    users.write_together([(written["html"], html), (written["md"], md)], "the comparison")
    return written
