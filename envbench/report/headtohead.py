"""What the report leads with: environment against environment, and the page's answers.

For each variant, a table with environments as rows and targets as columns: each cell's
median epoch and its speed against the baseline environment on the same target, with the
interval of the calibrated test (envbench.inference.verdicts) at the level the page's family
gives it, and a verdict in words only where the interval excludes 1; where it does not, what the
test could have seen.
Two cells are compared only when they differ in nothing but the environment (and its
image): same target and resources, same bench options, data and --quick.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from envbench.cells.sensors import CONTENDED_SHARE
from envbench.inference import looks, verdicts
from envbench.report import grouping, reference
from envbench.report.formats import confidence, money, percent
from envbench.report.grouping import Group, Speedup
from envbench.results.identity import variant_text

# The difference whose cost in repeats a "no difference" states.
WORTH_SEEING = 0.05


def verdict(s: Speedup | None) -> str:
    """'1.52× faster (1.49–1.55)', '1.30× slower (1.25–1.35)' or 'no difference at this
    noise (…): would have seen ≥ 12%'; the interval, not the point, decides."""
    if s is None:
        return "—"
    if min(s.repeats) < verdicts.MIN_REPEATS:
        return "%.2f× (too few repeats for an interval: %d and %d, %d needed a side)" % (
            s.ratio, s.repeats[0], s.repeats[1], verdicts.MIN_REPEATS)
    if isinstance(s.test, verdicts.NoTest) or s.ci is None:
        reason = s.test.reason if isinstance(s.test, verdicts.NoTest) else "no interval"
        return "%.2f× (%s)" % (s.ratio, reason)
    words = in_words(s.ratio, s.ci)
    return words if not words.startswith("no difference") else "%s: %s" % (
        words, could_have_seen(s))


def in_words(ratio: float, interval: tuple[float, float]) -> str:
    """What an interval of a speedup says: faster or slower where it lies wholly on one
    side of 1 (slower stated the other way up), else no difference."""
    low, high = interval
    if low > 1.0:
        return "%.2f× faster (%.2f–%.2f)" % (ratio, low, high)
    if high < 1.0:
        return "%.2f× slower (%.2f–%.2f)" % (1.0 / ratio, 1.0 / high, 1.0 / low)
    return "no difference at this noise (%.2f–%.2f)" % (low, high)


def could_have_seen(s: Speedup) -> str:
    """What a comparison without a verdict could have found: the smallest difference its
    repeats would have seen 80% of the time at the measured noise and its level, and what a
    5% difference would take (a fixed number of repeats, on a page of this family)."""
    assert isinstance(s.test, verdicts.Test)
    seen = s.test.detectable(s.alpha)
    text = "would have seen ≥ %s" % percent(seen)
    if seen > WORTH_SEEING:
        needed = s.test.repeats_for(WORTH_SEEING, s.level)
        text += "; %s would need %s" % (percent(WORTH_SEEING), (
            "more than {:,} repeats a side".format(verdicts.MOST_REPEATS) if needed is None
            else "{:,} repeats a side".format(needed)))
    return text




def baseline_environment(groups: list[Group], wanted: str | None) -> str | None:
    """As asked; else the write-up's stack, by what was measured; else the first one."""
    names = sorted({g.environment for g in groups})
    if wanted is not None:
        return wanted if wanted in names else None
    for g in groups:
        if any(reference.is_seed_stack(r.env) for r in g.ok):
            return g.environment
    return names[0] if names else None


@dataclass
class Entry:
    group: Group
    versus: Speedup | None   # against the baseline environment's cell (None: it is that)
    is_baseline: bool

    @property
    def verdict(self) -> str:
        return "baseline" if self.is_baseline else verdict(self.versus)

    @property
    def basis(self) -> str:
        """What the figure stands on: repeats used, contended ones left out, and the level
        its interval is at."""
        g = self.group
        if g.left_out and not g.clean:
            return "%d repeats, all contended: no verdict (the time is theirs)" % len(g.ok)
        text = "%d repeat%s" % (len(g.clean), "" if len(g.clean) == 1 else "s")
        if g.left_out:
            text += ", %d contended left out" % len(g.left_out)
        elif g.contended:
            text += ", %d of them contended (kept)" % len(g.contended)
        s = self.versus
        if s is not None and s.ci is not None and isinstance(s.test, verdicts.Test):
            text += "; %s interval" % confidence(s.alpha)
            if s.ci[0] > 1.0 or s.ci[1] < 1.0:
                # A verdict says what it found; how small a difference it could have found
                # (what "no difference" states in its own words) is said here.
                text += "; would have seen ≥ %s" % percent(s.test.detectable(s.alpha))
        return text


@dataclass
class Table:
    variant: str
    marks: str
    targets: list[tuple[str, str]]                      # (target, measured title)
    rows: list[tuple[str, dict[str, Entry]]] = field(default_factory=list)


def tables(groups: list[Group], baseline: str | None) -> list[Table]:
    by_key: dict[tuple[str, str], list[Group]] = {}
    for g in groups:
        by_key.setdefault((variant_text(g.variant), " ".join(g.marks)), []).append(g)
    out = []
    for (variant, marks), members in by_key.items():
        targets = list(dict.fromkeys(g.target for g in members))
        titles = {g.target: g.title for g in members}
        bases: dict[str, Group] = {}
        for g in members:
            if g.environment == baseline:
                bases.setdefault(grouping.signature(g, across_environments=True), g)
        table = Table(variant, marks, [(t, titles[t]) for t in targets])
        environments = sorted({g.environment for g in members},
                              key=lambda name: (name != baseline, name))
        for name in environments:
            row: dict[str, Entry] = {}
            for g in members:
                if g.environment != name:
                    continue
                base = bases.get(grouping.signature(g, across_environments=True))
                is_base = base is g
                versus = grouping.speedup(g, base) if base is not None and not is_base \
                    else None
                row.setdefault(g.target, Entry(g, versus, is_base))
            table.rows.append((name, row))
        out.append(table)
    return out


def cards(groups: list[Group], speedups: dict[Any, Speedup]) -> list[tuple[str, str, str]]:
    """The page's answers: (question, answer, where), each only where there is an answer
    (what could not be measured is listed under "Not measured in this run"). Where cells
    train several workloads, the fastest, the cheapest and the GPU/CPU speedup are each
    workload's own: a LeNet epoch and a ResNet-50 epoch are not one race."""
    ok = [g for g in groups if g.epoch_s is not None]
    workloads = sorted({g.workload for g in ok} | {s.group.workload for s in speedups.values()})
    named = len(workloads) > 1 or workloads not in ([], [grouping.EFFECT_BASELINES["workload"]])
    out = []
    for workload in workloads:
        mine = [g for g in ok if g.workload == workload]
        suffix = " · %s" % workload if named else ""
        if mine:
            fastest = min(mine, key=grouping.seconds)
            rate = fastest.units_per_s
            out.append(("Fastest configuration" + suffix, "%.2f s/epoch" % grouping.seconds(
                fastest) + (" · %s %s/s" % (_count(rate), fastest.unit) if named and rate
                            else ""), _where(fastest)))
        priced = [(g.cost_per_run, g) for g in mine if g.cost_per_run is not None]
        if priced:
            cost, cheapest = min(priced, key=lambda pair: pair[0])
            out.append(("Cheapest per run" + suffix, money(cost), _where(cheapest)))
        gpu_over_cpu = [s for s in speedups.values() if s.group.workload == workload
                        and s.group.device == "cuda" and s.baseline.device == "cpu"]
        if gpu_over_cpu:
            best = max(gpu_over_cpu, key=lambda s: s.ratio)
            out.append(("Largest GPU/CPU speedup" + suffix, "%.2f×" % best.ratio,
                        "%s over %s" % (_where(best.group), best.baseline.title)))
    noisy = [(g.cv, g) for g in ok if g.cv is not None]
    if noisy:
        cv, worst = max(noisy, key=lambda pair: pair[0])
        seen = worst.noise_seen
        out.append(("Noisiest cell", "CV %.1f%%" % (100 * cv),
                    _where(worst) + ("; sensors: %s" % seen if seen else "")))
    contended = [r for g in groups for r in g.contended]
    if contended:
        finished = sum(len(g.ok) for g in groups)
        out.append(("Contended repeats", "%d of %d left out" % (len(contended), finished),
                    "; ".join(grouping.ranges(sorted({reason for r in contended if r.noise
                                                      for reason in r.noise.reasons})))[:300]))
    return out


def _count(value: float) -> str:
    """A rate as people read one: 1,234 or 1.23 M."""
    return "%.2f M" % (value / 1e6) if value >= 1e6 else "{:,.0f}".format(value)


def _where(g: Group) -> str:
    variant = variant_text(g.variant)
    # A figure that stands on contended repeats (every repeat shared its cores, or
    # --keep-contended took them in) says so wherever a card quotes it.
    contended = bool(g.contended) and (not g.clean or g.keep_contended)
    return "%s · %s%s%s" % (g.environment, g.title, "" if variant == "—" else " · " + variant,
                            " · ⚠ from contended repeats" if contended else "")


def ladder(groups: list[Group]) -> list[dict[str, Any]]:
    """The write-up's advice, measured: from the cell with every swept optimisation off, add
    them one at a time in the order swept (the fastest value of each), each step against the
    one before and against the start."""
    rows: list[dict[str, Any]] = []
    by_signature: dict[str, list[Group]] = {}
    for option in grouping.EFFECT_BASELINES:
        for g in groups:
            by_signature.setdefault(option + grouping.signature(g, (option,)), []).append(g)
    for start in groups:
        swept = [o for o in start.variant if o in grouping.EFFECT_BASELINES]
        config = start.config
        if not swept or start.epoch_s is None or any(
                config.get(o) != grouping.EFFECT_BASELINES[o] for o in swept):
            continue
        current = start
        steps = []
        for option in swept:
            key = option + grouping.signature(current, (option,))
            candidates = [g for g in by_signature.get(key, []) if g.epoch_s is not None
                          and g.config.get(option) != grouping.EFFECT_BASELINES[option]
                          and grouping.is_effect(option, g.config.get(option))]
            if not candidates:
                continue
            step = min(candidates, key=grouping.seconds)
            steps.append((option, step.config.get(option), current, step))
            current = step
        if steps:
            rows.append({"start": start, "steps": [
                {"option": option, "value": value, "group": step,
                 "step": grouping.seconds(before) / grouping.seconds(step),
                 "total": grouping.seconds(start) / grouping.seconds(step)}
                for option, value, before, step in steps]})
    return rows


STATISTICS = ("Each cell's figure is the median of its steady epochs (every epoch after the first) "
              "within a repeat, then the median over repeats. The repeat is the unit of every "
              "test: a comparison is Welch's t test on the logs of the two sides' repeat "
              "figures, and its interval is exp(difference ± t × standard error) at the level "
              "the comparison is tested at, so that a verdict and its interval cannot "
              "disagree; epochs of one repeat share a process and a host state and are not "
              "independent draws. With fewer than %d clean repeats on a side there is no "
              "interval. A verdict is given in words only when the interval excludes 1. The "
              "page's comparisons are tested together (Holm's step-down), so that the chance "
              "that any verdict on the page is false is at most %g%%; where repeats: auto "
              "decided the repeats, each look it took spent a share of that (%g%% of it at the "
              "first look, %g%% at the last). A comparison without a verdict states the "
              "smallest difference it would have found %g%% of the time at the noise measured. "
              "Repeats that the host sensors saw contended (other processes using more than "
              "%.0f%% of the cell's CPU time on its cores, or a throttling GPU) are left out of "
              "figures and verdicts wherever clean repeats exist, and the page says how many. "
              "Cells run in rounds, one repeat of every cell per round in a shuffled order, so "
              "that drift falls on every environment alike."
              % (verdicts.MIN_REPEATS, 100 * verdicts.ALPHA, 100 * looks.FIRST_SHARE,
                 100 * looks.LAST_SHARE, 100 * verdicts.POWER, 100 * CONTENDED_SHARE))
