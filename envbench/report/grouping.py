"""From result files to the report's numbers: groups of repeats, speedups, effects, checks.

Everything here is plain data (no HTML); pages.py renders it and the tests check it. Records
are read through the typed view (envbench.results.record.Result).
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bench import result
from bench import workloads as catalog
from envbench.inference import looks, stats, verdicts
from envbench.report import hardware, mathlibs
from envbench.results.identity import Identity, variant_text
from envbench.results.record import Epoch, Result

NOISY_CV = 0.05
# Phases are rounded to microseconds and marked apart from the epoch's own clock: a sum up
# to 1% past the epoch is rounding, past it the phases ran at the same time.
PHASE_OVERLAP_TOLERANCE = 0.01
# The value each swept optimisation is measured against ("what you get without it").
EFFECT_BASELINES: dict[str, Any] = {"amp": "off", "pipeline": "classic", "compile": "off",
                                    "channels_last": False, "accumulate": 1, "workers": 2,
                                    "workload": "lenet", "pin_memory": "off",
                                    "non_blocking": "off"}
# The workloads that are an optimisation of LeNet (the catalog's variants of it: the
# write-up's lighter models): another workload is another job, whose epoch against LeNet's
# says nothing about an option.
LIGHTER_LENETS = tuple(info.name for info in catalog.BUILTIN.values()
                       if info.variant_of == EFFECT_BASELINES["workload"])


# The figures a group shows as the median over its measured repeats: what each is of one
# repeat (None where a repeat has none: a loss-scored workload's accuracy). Functions, not
# lambdas, so that the mutation run reaches each.
def _first_epoch_s(r: Result) -> float | None:
    return r.epochs[0].wall_s


def _samples_per_s(r: Result) -> float | None:
    return r.summary.samples_per_s


def _units_per_s(r: Result) -> float | None:
    return r.units_per_s


def _final_loss(r: Result) -> float | None:
    return r.summary.final_test_loss


def _final_acc(r: Result) -> float | None:
    return r.summary.final_test_acc


def _run_s(r: Result) -> float | None:
    """A whole run: every epoch and its evaluation."""
    return sum(e.wall_s + (e.test_s or 0.0) for e in r.epochs)


PER_REPEAT: dict[str, Callable[[Result], float | None]] = {
    "first_epoch_s": _first_epoch_s, "samples_per_s": _samples_per_s,
    "units_per_s": _units_per_s, "final_loss": _final_loss, "final_acc": _final_acc,
    "run_s": _run_s,
}


def reads_a_data_set(record: Result) -> bool:
    """Whether a result's workload trains on CIFAR-10 where the run has it (the LeNets,
    resnet18-cifar, a user's own), rather than on seeded data in every run (resnet50, the
    GPTs): only the first kind is marked when it ran on synthetic data."""
    known = catalog.info(record.workload)
    return known is None or (record.model is not None and record.model.source == "file") \
        or known.data == "cifar10"


def is_effect(option: str, value: Any) -> bool:
    """Whether ``value`` of a swept ``option`` is an optimisation of its baseline value."""
    return option != "workload" or value in LIGHTER_LENETS


FINGERPRINT_KEYS = ("torch", "torchvision", "cuda", "cudnn", "python", "driver", "device_name",
                    "gpu_count", "compute_capability", "cpu_model", "cpu_count", "threads")
# The cell's resources as the host planned them (rows of the fingerprint table).
RESOURCE_ROWS = {"threads from": "threads_from", "CPU quota": "cpus", "cpuset": "cpuset",
                 "memory limit": "memory", "swap limit": "swap", "GPUs asked": "gpus"}


@dataclass
class Group:
    """The repeats of one measurement: results whose identity differs only in the repeat."""

    identity: Identity
    variant: dict[str, Any]
    records: list[Result] = field(default_factory=list)
    # Set by group(): what tells this group apart from others of the same environment,
    # target and variant (a quick run, synthetic data, another image...).
    marks: tuple[str, ...] = ()
    # --keep-contended: figures and verdicts take contended repeats too (the old behaviour).
    keep_contended: bool = False

    @property
    def environment(self) -> str:
        return self.identity.environment

    @property
    def target(self) -> str:
        return self.identity.target

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.environment, self.target, variant_text(self.variant), " ".join(self.marks))

    @property
    def comparable_marks(self) -> tuple[str, ...]:
        """Marks that a comparison across runs or targets must share (quick with quick...)."""
        return tuple(m for m in self.marks if m in KIND_MARKS)

    @property
    def ok(self) -> list[Result]:
        return [r for r in self.records if r.ok]

    @property
    def contended(self) -> list[Result]:
        """Finished repeats that shared their cores or throttled (see cells.sensors)."""
        return [r for r in self.ok if r.contended]

    @property
    def left_out(self) -> list[Result]:
        """The contended repeats that figures and verdicts leave out."""
        return [] if self.keep_contended else self.contended

    @property
    def clean(self) -> list[Result]:
        """The finished repeats figures and verdicts stand on: those that ran alone."""
        return [r for r in self.ok if r not in self.left_out]

    @property
    def measured(self) -> list[Result]:
        """The repeats the figures come from: those that ran alone, where any did."""
        return self.clean or self.ok

    @property
    def repeat_walls(self) -> list[list[float]]:
        """The steady epoch times of each clean repeat: each repeat is one unit of a test."""
        return [[e.wall_s for e in r.steady_epochs] for r in self.clean]

    @property
    def side(self) -> looks.Side:
        """How this group's repeats were decided, as its results record it: with
        `repeats: auto` the most it could take, its look (how many it took), the run that
        took its last, and the point whose rounds it took in step with
        (envbench.inference.looks)."""
        orders = [r.cell.order for r in self.records if r.cell.order is not None]
        designs = [o.max_repeats for o in orders if o.max_repeats is not None]
        last = max(orders, key=lambda o: o.round, default=None)
        return looks.Side(max(designs) if designs else None, len(self.records),
                          last.seed if last is not None else None, "|".join(self.key[1:]))

    @property
    def noise_seen(self) -> str | None:
        """What the sensors saw at worst over this group's repeats, in words; None if nothing
        was sensed."""
        hosts = [r.noise.host for r in self.ok if r.noise and r.noise.host]
        shares = [h["other_cpu_share"] for h in hosts if h.get("other_cpu_share") is not None]
        steals = [h["steal_share"] for h in hosts if h.get("steal_share") is not None]
        reasons = ranges(sorted({reason for r in self.contended if r.noise
                                  for reason in r.noise.reasons}))
        if not reasons and shares:
            reasons = ["other processes used at most %.0f%% of its cores" % (100 * max(shares))]
        if steals and max(steals) >= 0.01:
            reasons.append("steal up to %.0f%%" % (100 * max(steals)))
        return "; ".join(reasons) or None

    @property
    def failed(self) -> list[Result]:
        return [r for r in self.records if r.status != "ok"]

    @property
    def first(self) -> Result:
        """The record that speaks for the group where all repeats say the same: an ok one."""
        return (self.ok or self.records)[0]

    @property
    def label(self) -> str | None:
        """The matrix's alias for the target (not a measurement)."""
        return self.records[0].cell.target_label

    @property
    def measured_names(self) -> list[str]:
        names = []
        for r in self.ok or self.records:
            name = hardware.measured_name(r.env, self.device, r.world_size)
            if name and name not in names:
                names.append(name)
        return names

    @property
    def hardware(self) -> str | None:
        """What bench measured: 'NVIDIA H200', 'AMD EPYC 7B13 · 2 threads'; None if nothing."""
        names = self.measured_names
        return " / ".join(names) if names else None

    @property
    def title(self) -> str:
        """How rows are named: measured hardware first, else the label marked as unmeasured."""
        if self.hardware:
            return self.hardware
        return "%s (label; not measured)" % self.label if self.label else \
            "%s (not measured)" % self.target

    @property
    def warnings(self) -> list[str]:
        """Label contradictions and repeats that ran on different hardware."""
        out = []
        for r in self.ok or self.records:
            problem = hardware.contradiction(self.label, r.env, self.device)
            if problem and problem not in out:
                out.append(problem)
        if len(self.measured_names) > 1:
            out.append("repeats measured different hardware")
        overlap = self.phase_overlap
        if overlap is not None:
            out.append("phases overlap: they add up to %.0f%% of the epoch (host data waits ran "
                       "while the GPU computed); read them as times, not shares" % (100 * overlap))
        return out

    @property
    def resources(self) -> Mapping[str, Any] | None:
        return self.records[0].cell.resources

    @property
    def resources_text(self) -> str | None:
        res = self.resources
        if not res:
            return None
        parts = []
        if res.get("threads") is not None:
            parts.append("%s thread%s (%s)" % (res["threads"], "" if res["threads"] == 1 else "s",
                                              res.get("threads_from") or "?"))
        if res.get("cpus") is not None:
            parts.append("quota %s" % res["cpus"])
        if res.get("cpuset") is not None:
            parts.append("cores %s" % res["cpuset"])
        if res.get("memory") is not None:
            parts.append("memory %s%s" % (res["memory"], " + swap %s" % res["swap"]
                                          if res.get("swap") else ""))
        if res.get("gpus") is not None:
            parts.append("GPUs %s" % res["gpus"])
        slurm = [r.raw["slurm"] for r in self.records if r.raw.get("slurm")]
        if slurm:  # where a cluster ran it: which jobs, on which nodes, in which runtime
            jobs = sorted({str(s.get("job_id")) for s in slurm})
            nodes = sorted({str(s.get("node")) for s in slurm})
            parts.append("Slurm job%s %s on %s (%s)" % (
                "s" if len(jobs) > 1 else "", ", ".join(jobs), ", ".join(nodes),
                "/".join(sorted({str(s.get("runtime")) for s in slurm}))))
        return ", ".join(parts) or None

    @property
    def swap_method(self) -> str | None:
        methods = {r.memory["swap_peak_method"] for r in self.ok} - {None}
        return " / ".join(sorted(methods)) or None

    @property
    def price(self) -> float | None:
        return self.records[0].cell.price_per_hour

    @property
    def config(self) -> Mapping[str, Any]:
        """The bench options, which every repeat shares (they are part of the identity)."""
        return self.records[0].config

    @property
    def device(self) -> str:
        return self.records[0].device

    @property
    def workload(self) -> str:
        return self.records[0].workload

    @property
    def unit(self) -> str:
        """What a sample is counted in (images, tokens, samples), as bench recorded it."""
        return (self.ok or self.records)[0].unit

    @property
    def quality(self) -> str:
        """accuracy or loss: what this workload's quality figure is."""
        model = (self.ok or self.records)[0].model
        return model.quality if model else "accuracy"

    @property
    def batch_size(self) -> int:
        """As bench ran it (the variant's value is the matrix's word for it)."""
        return int(self.config["batch_size"])

    @property
    def repeat_epoch_s(self) -> list[float]:
        return [r.summary.epoch_s_median for r in self.measured if r.summary.epoch_s_median]

    @property
    def steady_epochs(self) -> list[Epoch]:
        """Epochs after the warm-up one, pooled over repeats (the only one if that is all)."""
        return [e for r in self.measured for e in r.steady_epochs]

    @property
    def epoch_s(self) -> float | None:
        return stats.median(self.repeat_epoch_s) if self.measured else None

    @property
    def epoch_walls(self) -> list[float]:
        return [e.wall_s for e in self.steady_epochs]

    @property
    def epoch_ci(self) -> tuple[float, float] | None:
        """95% interval of the typical repeat's epoch (the clean repeats' figures, by the
        t on their logs that verdicts use); None below MIN_REPEATS clean repeats or where
        they do not differ."""
        return verdicts.typical_interval(verdicts.repeat_figures(self.repeat_walls))

    @property
    def spread(self) -> tuple[float, float] | None:
        walls = self.epoch_walls
        return (min(walls), max(walls)) if walls else None

    @property
    def cv(self) -> float | None:
        """Over repeat medians when there are repeats, else over the epochs."""
        if not self.measured:
            return None
        values = self.repeat_epoch_s if len(self.measured) > 1 else self.epoch_walls
        return stats.cv(values)

    @property
    def noisy(self) -> bool:
        return self.cv is not None and self.cv > NOISY_CV

    def over_repeats(self, figure: str) -> float | None:
        """A figure of PER_REPEAT, as the median over the measured repeats that have it."""
        values = [v for v in map(PER_REPEAT[figure], self.measured) if v is not None]
        return stats.median(values) if values else None

    @property
    def first_epoch_s(self) -> float | None:
        return self.over_repeats("first_epoch_s")

    @property
    def samples_per_s(self) -> float | None:
        return self.over_repeats("samples_per_s")

    @property
    def units_per_s(self) -> float | None:
        """Throughput in the workload's unit (tokens/s for a GPT)."""
        return self.over_repeats("units_per_s")

    @property
    def final_loss(self) -> float | None:
        return self.over_repeats("final_loss")

    @property
    def final_acc(self) -> float | None:
        return self.over_repeats("final_acc")

    @property
    def phases(self) -> dict[str, float]:
        """Median seconds per phase per steady epoch."""
        epochs = self.steady_epochs
        if not epochs:
            return {}
        return {p: stats.median([e.phase(p) for e in epochs])
                for p in result.PHASES}

    @property
    def phase_overlap(self) -> float | None:
        """The phases' sum over the epoch (median over steady epochs) where it passes the
        epoch, else None. On CUDA, data is host time and the other phases device time: in a
        GPU-bound loop the host waits for its next batch while the GPU still computes."""
        epochs = [e for e in self.steady_epochs if e.wall_s > 0]
        if not epochs:
            return None
        ratio = stats.median([sum(e.phase(p) for p in result.PHASES) / e.wall_s
                              for e in epochs])
        return ratio if ratio > 1 + PHASE_OVERLAP_TOLERANCE else None

    def share(self, phase: str) -> float | None:
        epochs = self.steady_epochs
        if not epochs:
            return None
        return stats.median([e.phase(phase) / e.wall_s for e in epochs])

    def memory(self, key: str) -> int | None:
        values = [r.memory[key] for r in self.ok if r.memory.get(key) is not None]
        return max(values) if values else None

    @property
    def run_s(self) -> float | None:
        """A whole run: every epoch and its evaluation."""
        return self.over_repeats("run_s")

    @property
    def cost_per_epoch(self) -> float | None:
        if self.price is None or self.epoch_s is None:
            return None
        return self.price * self.epoch_s / 3600.0

    @property
    def cost_per_run(self) -> float | None:
        if self.price is None or self.run_s is None:
            return None
        return self.price * self.run_s / 3600.0

    def cost_to_accuracy(self, goal: float | None) -> float | None:
        """The money the time to accuracy costs at the target's price."""
        seconds = self.time_to_accuracy(goal)
        if seconds is None or self.price is None:
            return None
        return self.price * seconds / 3600.0

    def time_to_accuracy(self, goal: float | None) -> float | None:
        """Median training seconds until test accuracy first reaches ``goal``; None if never,
        and for a workload whose quality is its loss (a GPT: the goal is an image
        classifier's accuracy)."""
        if goal is None or self.quality != "accuracy":
            return None
        times = []
        for r in self.measured:
            elapsed = 0.0
            for e in r.epochs:
                elapsed += e.wall_s
                if e.test_acc is not None and e.test_acc >= goal:
                    times.append(elapsed)
                    break
        return stats.median(times) if times else None

    def curve(self, key: str) -> list[float]:
        """Per-epoch median over repeats of train_loss or test_acc."""
        if not self.measured:
            return []
        length = min(len(r.epochs) for r in self.measured)
        values = [[getattr(r.epochs[i], key) for r in self.measured] for i in range(length)]
        return [stats.median([v for v in at if v is not None] or [float("nan")])
                for at in values]


@dataclass
class Speedup:
    """A group against another (its baseline): the ratio of their figures (the baseline's
    median epoch over this one's) and the calibrated test of the two sides' repeats, whose
    interval is printed at the level this comparison is tested at. That level is the page's
    (verdicts.ALPHA alone, until the page's family says how much of it each may take:
    report/family.py), times the share its repeats' looks may spend (envbench.inference.looks)."""

    group: Group
    baseline: Group
    ratio: float
    test: verdicts.Test | verdicts.NoTest
    share: float = 1.0
    level: float = verdicts.ALPHA
    ci: tuple[float, float] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.tested_at(self.level)

    def tested_at(self, level: float) -> None:
        """Test at ``level`` (of the page's family): the interval follows."""
        self.level = level
        self.ci = (self.test.interval(self.alpha) if isinstance(self.test, verdicts.Test)
                   else None)

    @property
    def alpha(self) -> float:
        """The level this comparison's interval is at: the family's, times its share."""
        return self.level * self.share

    @property
    def repeats(self) -> tuple[int, int]:
        """Clean repeats used: (this group's, the baseline's)."""
        return len(self.group.clean), len(self.baseline.clean)

    @property
    def left_out(self) -> int:
        """Contended repeats left out of the ratio and its interval, both sides."""
        return len(self.group.left_out) + len(self.baseline.left_out)


_PERCENT = re.compile(r"(\d+(?:\.\d+)?)%")


def ranges(reasons: list[str]) -> list[str]:
    """Reasons that differ only in their one percentage, said once with the range: ten
    contended repeats read 'other processes used 51–53% of …', not ten sentences."""
    # Keyed by the text around the percentage; a reason with none or several is its own key,
    # (reason, None), which no text around a percentage can equal. No placeholder that a
    # reason read from a result file could itself contain.
    values: dict[tuple[str, str | None], list[tuple[float, str]]] = {}
    for reason in reasons:
        found = list(_PERCENT.finditer(reason))
        if len(found) != 1:
            values.setdefault((reason, None), [])
            continue
        match = found[0]
        around = (reason[:match.start()], reason[match.end():])
        values.setdefault(around, []).append((float(match.group(1)), match.group(1)))
    out = []
    for (before, after), seen in values.items():
        if after is None:
            out.append(before)
            continue
        # The numbers as the reasons wrote them (no float formatting: 1e+06 for 1000000).
        low, high = min(seen), max(seen)
        span = low[1] if low[0] == high[0] else "%s–%s" % (low[1], high[1])
        out.append(before + span + "%" + after)
    return out


def group(records: list[Result], keep_contended: bool = False) -> list[Group]:
    """Repeats of one measurement together (see envbench.results.identity), in a stable
    order."""
    groups: dict[str, Group] = {}
    for record in records:
        ident = record.identity
        g = groups.setdefault(ident.group, Group(ident, dict(record.cell.variant),
                                                 keep_contended=keep_contended))
        g.records.append(record)
    for g in groups.values():
        g.records.sort(key=lambda r: r.cell.repeat)
    _mark(list(groups.values()))
    return sorted(groups.values(), key=_order)


KIND_MARKS = ("quick", "synthetic data")


def _mark(groups: list[Group]) -> None:
    """Give each group the marks that set it apart: always quick and synthetic data, and
    whatever else differs from groups with the same environment, target and variant."""
    for g in groups:
        marks = []
        if g.identity.quick:
            marks.append("quick")
        if g.identity.data.synthetic and reads_a_data_set(g.first):
            marks.append("synthetic data")
        g.marks = tuple(marks)
    clashes: dict[tuple[str, ...], list[Group]] = {}
    for g in groups:
        clashes.setdefault(g.key, []).append(g)
    for same in clashes.values():
        if len(same) < 2:
            continue
        for g in same:
            others = [o.identity for o in same if o is not g]
            extra = []
            if any(o.image_id != g.identity.image_id for o in others):
                # An id is "sha256:<hex>": its first 12 hex digits, as `docker images` shows.
                image = g.identity.image_id
                extra.append("image %s" % (image[7:19] if image else "none"))
            if any(o.data.sha256 != g.identity.data.sha256 for o in others):
                extra.append("data %s" % (g.identity.data.sha256 or "?")[:8])
            if any(o.resources != g.identity.resources or o.options != g.identity.options
                   for o in others):
                extra.append("run %s" % g.identity.group[:8])
            g.marks = g.marks + tuple(extra)


def _order(g: Group) -> tuple[Any, ...]:
    """Environment, target, then variant values with numbers in numeric order (32 < 256)."""
    values = tuple((k, (0, v, "") if isinstance(v, (int, float)) and not isinstance(v, bool)
                    else (1, 0, str(v)))
                   for k, v in sorted(g.variant.items()))
    return (g.environment, g.target, values, g.marks)


def choose_baseline(groups: list[Group], wanted: str | None) -> str | None:
    """The target speedups are measured against: as asked, else the first CPU target."""
    targets = sorted({g.target for g in groups})
    if wanted is not None:
        return wanted if wanted in targets else None
    cpu = sorted({g.target for g in groups if g.device == "cpu"})
    first = cpu or targets
    return first[0] if first else None


def seconds(g: Group) -> float:
    """The median epoch of a group already known to have one (a sort key, a ratio)."""
    assert g.epoch_s is not None, "%s has no finished repeat" % (g.key,)
    return g.epoch_s


def speedup(g: Group, base: Group) -> Speedup | None:
    """base's median epoch over g's, with the calibrated test of base's clean repeats
    against g's (envbench.inference.verdicts), at the share of the level their looks may spend."""
    if not g.epoch_s or not base.epoch_s:
        return None
    return Speedup(g, base, base.epoch_s / g.epoch_s,
                   verdicts.of_repeats(base.repeat_walls, g.repeat_walls),
                   looks.share_of(base.side, g.side))


def signature(g: Group, drop: tuple[str, ...] = (), across_targets: bool = False,
              across_environments: bool = False) -> str:
    """The group's identity with some bench options left out: two groups with one signature
    differ only in those options (across targets: also in the target and its resources;
    across environments: also in the environment and its image)."""
    ident = g.identity
    fields = ident.fields(repeat=False)
    # The options hold every swept key's value (a variant is made of the cell's options, and
    # a sweep holds no null), so the variant's text would add nothing that tells groups apart.
    fields["options"] = {k: v for k, v in fields["options"].items() if k not in drop}
    if across_targets:
        del fields["target"], fields["resources"]
    if across_environments:
        del fields["environment"], fields["image_id"]
    return json.dumps(fields, sort_keys=True)


# Across targets these options differ by design: the device, the threads it was given, and
# the copy options whose defaults follow the device (on for cuda, off for cpu).
CROSS_TARGET_OPTIONS = ("device", "threads", "pin_memory", "non_blocking")


def speedups(groups: list[Group], baseline: str | None) -> dict[tuple[str, ...], Speedup]:
    """Each group over its counterpart on the baseline target: the same environment, image,
    data, --quick and options, so that the target is the only difference."""
    bases: dict[str, Group] = {}
    for g in groups:
        if g.target == baseline:
            bases.setdefault(signature(g, CROSS_TARGET_OPTIONS, across_targets=True), g)
    out: dict[tuple[str, ...], Speedup] = {}
    for g in groups:
        base = bases.get(signature(g, CROSS_TARGET_OPTIONS, across_targets=True))
        if base is not None:
            s = speedup(g, base)
            if s is not None:
                out[g.key] = s
    return out


def effects(groups: list[Group]) -> list[tuple[str, Any, Group, Group, float]]:
    """(option, value, group, its baseline, speedup) for each swept optimisation: the group
    against the one that differs only in that option, set to its 'without' value."""
    out = []
    for option, base_value in EFFECT_BASELINES.items():
        without: dict[str, Group] = {}
        for g in groups:
            if g.config.get(option) == base_value:
                without.setdefault(signature(g, (option,)), g)
        for g in groups:
            value = g.config.get(option)
            if option not in g.variant or value == base_value or not is_effect(option, value):
                continue
            base = without.get(signature(g, (option,)))
            if base is not None and base.epoch_s and g.epoch_s:
                out.append((option, value, g, base, base.epoch_s / g.epoch_s))
    return out


def batch_sizes(groups: list[Group]) -> list[int]:
    return sorted({g.batch_size for g in groups})


def fingerprints(groups: list[Group]) -> tuple[list[tuple[str, str]], list[str],
                                                 dict[str, list[Any]], set[str]]:
    """Columns (environment, target), row names, values per row, and rows that differ."""
    values: dict[str, list[Any]] = {}
    seen: dict[tuple[str, str], Result] = {}
    for g in groups:
        seen.setdefault((g.environment, g.target), g.first)
    columns = sorted(seen)
    rows = list(FINGERPRINT_KEYS) + ["math libraries"] + list(RESOURCE_ROWS) + [
        "image", "base digest", "lock", "bench_sha256"]
    for row in rows:
        cells = []
        for column in columns:
            env, image = seen[column].env, seen[column].image
            if row == "image":
                cells.append(image.get("id"))
            elif row == "base digest":
                cells.append(image.get("base_digest"))
            elif row == "lock":
                cells.append(image.get("lock_sha256"))
            elif row == "math libraries":
                cells.append(mathlibs.describe(env.get("math")))
            elif row in RESOURCE_ROWS:
                cells.append((seen[column].cell.resources or {}).get(RESOURCE_ROWS[row]))
            else:
                cells.append(env.get(row))
        values[row] = cells
    # The image's installed packages (bench records them): the ones whose versions differ.
    packages = sorted({name for column in columns
                       for name in seen[column].env.get("packages") or {}}, key=str.lower)
    for name in packages:
        versions = [(seen[column].env.get("packages") or {}).get(name) for column in columns]
        if len(set(versions)) > 1:
            rows.append("package %s" % name)
            values["package %s" % name] = versions
    differ = {row for row, cells in values.items() if len({json.dumps(c) for c in cells}) > 1}
    return columns, rows, values, differ


def reproducibility(groups: list[Group]) -> dict[str, Any]:
    records = [r for g in groups for r in g.records]
    hashes = sorted({r.env["bench_sha256"] for r in records if r.env["bench_sha256"]})
    spread = []
    by_point: dict[tuple[str, str], list[Group]] = {}
    for g in groups:
        if g.final_acc is not None:
            by_point.setdefault((g.target, variant_text(g.variant)), []).append(g)
    for (target, variant), members in sorted(by_point.items()):
        if len(members) > 1:
            accs = [m.final_acc for m in members if m.final_acc is not None]
            spread.append((target, variant, min(accs), max(accs), max(accs) - min(accs)))
    weights = []
    for g in groups:
        if len(g.ok) > 1 and all(r.config["deterministic"] for r in g.ok):
            digests = {r.summary.weights_sha256 for r in g.ok}
            weights.append((g, len(digests) == 1))
    return {"bench_hashes": hashes, "accuracy_spread": spread, "weights": weights}
