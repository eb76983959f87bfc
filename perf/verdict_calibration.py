"""Benchmark of the verdicts themselves: how often they are wrong, and what they find.

Draws result sets of two stacks from noise models and counts what the kit's test calls them:
A/A sets (both stacks the same distribution: every verdict is false) and A/B sets (one 5%,
10% or 20% slower: a verdict the right way round is a find). Each repeat has its own level
(the process, the allocator, the host's state) and four steady epochs 1% apart around it,
after a warm-up epoch; the noise models are the repeats' levels:

- lognormal, 2%, 5% and 10% apart;
- 5% apart, and one repeat in ten 30% slow (a neighbour the sensors did not see);
- real: the repeat spreads recorded in results folders given on the command line (each
  measurement's log repeat figures about their mean, pooled, drawn with replacement).

For 3 to 8 repeats a side and for `repeats: auto` (the run's own rule, envbench.cells.decide,
looking after every round up to max_repeats, each look at its share of the level,
envbench.inference.looks) it prints the false-verdict rate and the power at 5%, 10% and 20%,
each with its Monte Carlo standard error. --methods sets the test in use (Welch's t on the logs
of the repeat figures) beside the ones it was chosen over; --designs sets the auto design in use
beside others; --pages N runs the real `envbench report` on N written result sets of each
kind and counts the pages that claim a difference. --short is the CI check: the 5% model,
3 to 8 repeats and auto, A/A only; exit 1 where the lower bound of a false-verdict rate's
95% interval is above 5%.

    python perf/verdict_calibration.py [--trials 4000] [--methods] [--designs]
        [--pages 200] [--short] [--seed 0] [FOLDER ...]

Pure computation: it may run beside other work (no timing is taken).
"""
from __future__ import annotations

import argparse
import contextlib
import itertools
import math
import random
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from envbench.cells import decide  # noqa: E402
from envbench.inference import looks, stats, tdist, verdicts  # noqa: E402

STEADY_EPOCHS = 4
EPOCH_JITTER = 0.01
REPEATS = range(3, 9)
EFFECTS = (0.05, 0.10, 0.20)
AUTOS = (6, 10)          # the demo's max_repeats, and the matrix's default
PRECISION = 0.03         # the matrix's default

Repeats = list[list[float]]


@dataclass(frozen=True)
class Noise:
    """A noise model: how a repeat's level scatters (a factor around 1)."""

    name: str
    draw: Callable[[random.Random], float]


def lognormal(spread: float) -> Noise:
    return Noise("%g%%" % (100 * spread), lambda rng: math.exp(rng.gauss(0.0, spread)))


def slow_repeats(spread: float, share: float, slower: float) -> Noise:
    def draw(rng: random.Random) -> float:
        level = math.exp(rng.gauss(0.0, spread))
        return level * slower if rng.random() < share else level
    return Noise("%g%%, 1 in %d %d%% slow" % (100 * spread, round(1 / share),
                                             round(100 * (slower - 1))), draw)


def real(folders: Sequence[str]) -> Noise | None:
    """The repeat spreads recorded in results folders: every measurement's log repeat figures
    about their mean (scaled by sqrt(n / (n - 1)), so that they scatter as the repeats did),
    pooled; a repeat's level is one of them drawn with replacement."""
    from envbench.report import grouping
    from envbench.results import store
    records, _ = store.load_all([Path(f) for f in folders])
    residuals: list[float] = []
    measurements = 0
    for g in grouping.group(records):
        figures = verdicts.repeat_figures(g.repeat_walls)
        if len(figures) < verdicts.MIN_REPEATS:
            continue
        logs = [math.log(f) for f in figures]
        centre, scale = stats.mean(logs), math.sqrt(len(logs) / (len(logs) - 1))
        residuals += [(x - centre) * scale for x in logs]
        measurements += 1
    if not residuals:
        return None
    spread = stats.stdev(residuals)
    print("real spreads: %d repeats of %d measurements in %s (sd of log figures %.1f%%)"
          % (len(residuals), measurements, ", ".join(folders), 100 * spread))
    return Noise("real (%d measurements)" % measurements,
                 lambda rng: math.exp(rng.choice(residuals)))


def side(rng: random.Random, noise: Noise, level: float, repeats: int) -> Repeats:
    """Each repeat's steady epochs: its level from the noise model, epochs 1% apart."""
    out = []
    for _ in range(repeats):
        at = level * noise.draw(rng)
        out.append([at * (1.0 + rng.gauss(0.0, EPOCH_JITTER)) for _ in range(STEADY_EPOCHS)])
    return out


# --- the tests: +1 where a is called slower than b, -1 faster, 0 no verdict -------------

def welch(a: Repeats, b: Repeats, alpha: float) -> int:
    """The kit's test, as the page draws it: the interval at alpha excludes 1."""
    test = verdicts.of_repeats(a, b)
    if isinstance(test, verdicts.NoTest):
        return 0
    low, high = test.interval(alpha)
    return 1 if low > 1.0 else (-1 if high < 1.0 else 0)


def student(a: Repeats, b: Repeats, alpha: float) -> int:
    """Student's pooled t on the same logs: exact only where both sides scatter alike."""
    la = [math.log(f) for f in verdicts.repeat_figures(a)]
    lb = [math.log(f) for f in verdicts.repeat_figures(b)]
    df = len(la) + len(lb) - 2
    pooled = ((len(la) - 1) * stats.stdev(la) ** 2 + (len(lb) - 1) * stats.stdev(lb) ** 2) / df
    se = math.sqrt(pooled * (1 / len(la) + 1 / len(lb)))
    d = stats.mean(la) - stats.mean(lb)
    return int(math.copysign(1, d)) if se and abs(d) / se > tdist.critical(alpha, df) else 0


def bootstrap(a: Repeats, b: Repeats, alpha: float) -> int:
    """The two-stage percentile bootstrap the verdicts used before (envbench.inference.stats)."""
    low, high = stats.hierarchical_ratio_ci(a, b, confidence=1 - alpha)
    return 1 if low > 1.0 else (-1 if high < 1.0 else 0)


def permutation(a: Repeats, b: Repeats, alpha: float) -> int:
    """The exact permutation test of the mean log figure: every split of the 2n figures.
    Its smallest two-sided p is 2 / C(2n, n): 0.1 at 3 a side, so it can never decide
    there."""
    la = [math.log(f) for f in verdicts.repeat_figures(a)]
    lb = [math.log(f) for f in verdicts.repeat_figures(b)]
    pooled, n = la + lb, len(la)
    observed = abs(stats.mean(la) - stats.mean(lb))
    total = math.fsum(pooled)
    extreme = count = 0
    for chosen in itertools.combinations(range(len(pooled)), n):
        top = math.fsum(pooled[i] for i in chosen)
        count += 1
        extreme += abs(top / n - (total - top) / (len(pooled) - n)) >= observed - 1e-12
    if extreme / count >= alpha:
        return 0
    return 1 if stats.mean(la) > stats.mean(lb) else -1


METHODS: dict[str, Callable[[Repeats, Repeats, float], int]] = {
    "Welch's t on log repeat figures (in use)": welch,
    "Student's pooled t on the same": student,
    "two-stage percentile bootstrap (before)": bootstrap,
    "exact permutation of the same": permutation,
}


# --- trials ---------------------------------------------------------------------------

def fixed_trial(rng: random.Random, noise: Noise, repeats: int, effect: float,
                method: Callable[[Repeats, Repeats, float], int] = welch,
                other: Noise | None = None) -> int:
    """One set of ``repeats`` a side, a slower by ``effect``; b's repeats scatter as
    ``other`` says where given (two stacks, or a GPU and a CPU, that are not alike)."""
    a = side(rng, noise, 1.0 + effect, repeats)
    return method(a, side(rng, other or noise, 1.0, repeats), verdicts.ALPHA)


def _record(epochs: list[float]) -> dict[str, object]:
    return {"status": "ok", "epochs": [{"wall_s": 1.25 * epochs[0]}]
            + [{"wall_s": w} for w in epochs], "noise": {"contended": False}}


def auto_trial(rng: random.Random, noise: Noise, effect: float,
               max_repeats: int) -> tuple[int, int]:
    """One run of `repeats: auto` as the kit runs it (decide.wanted after each round, the
    environments in step), then the verdict the page draws: the interval at the share of
    5% that the run's last look may spend. (verdict, repeats a side)."""
    drawn = {"a": side(rng, noise, 1.0 + effect, max_repeats),
             "b": side(rng, noise, 1.0, max_repeats)}
    keys = {name: (name, "cpu", "—", False) for name in drawn}
    done = {keys[n]: [_record(r) for r in drawn[n][:verdicts.MIN_REPEATS]] for n in drawn}
    policy = decide.Policy(None, max_repeats, PRECISION)
    while True:
        wanted = decide.wanted(policy, done)
        more = [k for k in done if wanted[k] > len(done[k])]
        if not more:
            break
        for key in more:
            done[key].append(_record(drawn[key[0]][len(done[key])]))
    look = len(done[keys["a"]])
    a, b = drawn["a"][:look], drawn["b"][:len(done[keys["b"]])]
    # The page's share: one run, one point, in step (else both sides', the product).
    share = looks.share_of(looks.Side(max_repeats, look, 0, "cpu"),
                           looks.Side(max_repeats, len(b), 0, "cpu"))
    return welch(a, b, verdicts.ALPHA * share), look


@dataclass(frozen=True)
class Rate:
    hits: int
    trials: int

    @property
    def value(self) -> float:
        return self.hits / self.trials

    @property
    def error(self) -> float:
        """The Monte Carlo standard error of the rate."""
        return math.sqrt(self.value * (1 - self.value) / self.trials)

    def wilson(self, z: float = 1.959964) -> tuple[float, float]:
        """The Wilson 95% interval of the rate."""
        n, p = self.trials, self.value
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        return centre - half, centre + half

    def __str__(self) -> str:
        return "%.1f%% ± %.1f" % (100 * self.value, 100 * self.error)


def fixed_rate(rng: random.Random, noise: Noise, repeats: int, effect: float, trials: int,
               method: Callable[[Repeats, Repeats, float], int] = welch,
               other: Noise | None = None) -> Rate:
    # A/A: any verdict is false. A/B: a verdict that a is slower is a find.
    wanted = (lambda v: v != 0) if effect == 0 else (lambda v: v == 1)
    return Rate(sum(wanted(fixed_trial(rng, noise, repeats, effect, method, other))
                    for _ in range(trials)), trials)


def auto_rate(rng: random.Random, noise: Noise, effect: float, max_repeats: int,
              trials: int) -> tuple[Rate, float]:
    hits, used = 0, 0
    for _ in range(trials):
        verdict, repeats = auto_trial(rng, noise, effect, max_repeats)
        hits += verdict != 0 if effect == 0 else verdict == 1
        used += repeats
    return Rate(hits, trials), used / trials


# --- tables -----------------------------------------------------------------------------

def rows() -> list[tuple[str, int | None, int | None]]:
    """(label, fixed repeats, auto's max_repeats)."""
    return ([("%d repeats" % n, n, None) for n in REPEATS]
            + [("auto, up to %d" % m, None, m) for m in AUTOS])


def measure(rng: random.Random, noise: Noise, effect: float, trials: int,
            fixed: int | None, most: int | None) -> tuple[Rate, float]:
    if fixed is not None:
        return fixed_rate(rng, noise, fixed, effect, trials), float(fixed)
    assert most is not None
    return auto_rate(rng, noise, effect, most, trials)


def false_verdicts(rng: random.Random, models: list[Noise], trials: int) -> list[list[Rate]]:
    print("\nFalse verdicts between identical stacks (A/A), %d sets a cell; ± is the Monte "
          "Carlo standard error:\n" % trials)
    print("| repeats a side | " + " | ".join(m.name for m in models) + " |")
    print("|---|" + "---:|" * len(models))
    table = []
    for label, fixed, most in rows():
        line = [measure(rng, m, 0.0, trials, fixed, most)[0] for m in models]
        table.append(line)
        print("| %s | %s |" % (label, " | ".join(map(str, line))), flush=True)
    return table


def power(rng: random.Random, noise: Noise, trials: int) -> None:
    print("\nPower at the %s noise model: sets found slower, of %d a cell (and the repeats a "
          "side auto took, on average):\n" % (noise.name, trials))
    print("| repeats a side | " + " | ".join("%g%% slower" % (100 * e) for e in EFFECTS) + " |")
    print("|---|" + "---:|" * len(EFFECTS))
    for label, fixed, most in rows():
        cells = []
        for effect in EFFECTS:
            rate, used = measure(rng, noise, effect, trials, fixed, most)
            cells.append(str(rate) + ("" if fixed else " (%.1f)" % used))
        print("| %s | %s |" % (label, " | ".join(cells)), flush=True)


def methods(rng: random.Random, trials: int) -> None:
    """Each test on identical stacks that scatter alike (5%), on identical stacks that do
    not (2% against 10%: the same median, other noise), and on a 20% difference at 5%."""
    alike, quiet, loud = lognormal(0.05), lognormal(0.02), lognormal(0.10)
    print("\nThe tests compared, %d sets a cell (a quarter of that for the bootstrap, whose "
          "2,000 resamples a set are slow; the permutation test up to 6 repeats a side, 924 "
          "splits): false verdicts at 5%% alike / false verdicts at 2%% against 10%% / found "
          "at 20%% with 5%%:\n" % trials)
    names = list(METHODS)
    print("| repeats a side | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for n in REPEATS:
        cells = []
        for name in names:
            method = METHODS[name]
            if method is permutation and n > 6:
                cells.append("—")
                continue
            count = trials // 4 if method is bootstrap else trials
            rates = (fixed_rate(rng, alike, n, 0.0, count, method),
                     fixed_rate(rng, quiet, n, 0.0, count, method, loud),
                     fixed_rate(rng, alike, n, 0.20, count, method))
            cells.append(" / ".join(map(str, rates)))
        print("| %d | %s |" % (n, " | ".join(cells)), flush=True)


@contextlib.contextmanager
def design(first: float | None, last: float | None) -> Iterator[None]:
    """The looks' shares as a candidate design gives them; None, None: every look at the full
    level (the rule before, whose looks add up)."""
    saved = looks.FIRST_SHARE, looks.LAST_SHARE, looks.share
    if first is None or last is None:
        looks.share = lambda look, max_repeats: 1.0  # type: ignore[assignment]
    else:
        looks.FIRST_SHARE, looks.LAST_SHARE = first, last
    try:
        yield
    finally:
        looks.FIRST_SHARE, looks.LAST_SHARE, looks.share = saved  # type: ignore[misc]


def designs(rng: random.Random, noise: Noise, trials: int) -> None:
    print("\n`repeats: auto` designs at the %s model, up to %d repeats, %d sets a cell: "
          "false verdicts, found at 5%% / 10%% / 20%%, (repeats a side on average):\n"
          % (noise.name, AUTOS[-1], trials))
    most = AUTOS[-1]
    looks_taken = most - verdicts.MIN_REPEATS + 1
    candidates: list[tuple[str, float | None, float | None]] = [
        ("a quarter first, half last (in use)", 0.25, 0.5),
        ("equal shares (Bonferroni over the looks)", 1 / looks_taken, 1 / looks_taken),
        ("a tenth first, 70% last", 0.1, 0.7),
        ("every look at the full 5% (the rule before)", None, None)]
    print("| design | A/A | 5% | 10% | 20% |")
    print("|---|---:|---:|---:|---:|")
    for name, first, last in candidates:
        with design(first, last):
            cells = []
            for effect in (0.0,) + EFFECTS:
                rate, used = auto_rate(rng, noise, effect, most, trials)
                cells.append("%s (%.1f)" % (rate, used))
        print("| %s | %s |" % (name, " | ".join(cells)), flush=True)


# --- pages: the real report on written result sets --------------------------------------

def write_set(folder: Path, rng: random.Random, noise: Noise, repeats: int,
              effect: float) -> None:
    """Two stacks' results as the host stores them (tests/host/report_fixture's record),
    each repeat's epochs drawn from the noise model."""
    sys.path.insert(0, str(ROOT / "tests" / "host"))
    from report_fixture import make_record

    from bench import result
    folder.mkdir(parents=True)
    for env, level in (("a-stack", 1.0 + effect), ("b-stack", 1.0)):
        epochs = side(rng, noise, level, repeats)
        for repeat in range(repeats):
            record = make_record(env, "cpu", 256, repeat, rng)
            walls = [1.25 * epochs[repeat][0]] + epochs[repeat]
            for epoch, wall in zip(record["epochs"], walls):
                wall = round(189.7 * wall, 6)
                epoch["phases_s"] = {k: v * wall / epoch["wall_s"]
                                     for k, v in epoch["phases_s"].items()}
                epoch["wall_s"] = wall
                epoch["samples_per_s"] = round(epoch["samples"] / wall, 3)
            steady = sorted(e["wall_s"] for e in record["epochs"][1:])
            record["summary"].update(
                epoch_s_median=stats.median(steady), first_epoch_s=record["epochs"][0]["wall_s"],
                samples_per_s=stats.median([e["samples_per_s"] for e in record["epochs"][1:]]))
            result.write_atomic(str(folder / ("%s-%d.json" % (env, repeat))), record)


def page_verdict(folder: Path, out: Path) -> str:
    """`envbench report FOLDER --out OUT` as a user runs it, and the verdict its page gives
    b-stack's row (b against a-stack, the baseline by name)."""
    import io
    import re
    from contextlib import redirect_stdout

    from envbench.commands import dispatch
    with redirect_stdout(io.StringIO()):
        code = dispatch.main(["report", str(folder), "--out", str(out),
                              "--baseline-env", "a-stack"])
    assert code == 0, code
    page = (out / "index.html").read_text(encoding="utf-8")
    row = re.search(r'<tr data-env="b-stack">(.*?)</tr>', page, flags=re.S)
    assert row is not None
    found = re.search(r"(faster|slower|no difference)", row.group(1))
    return found.group(1) if found else "none"


def pages(rng: random.Random, noise: Noise, count: int) -> dict[str, Rate]:
    """Pages of identical stacks at 3 and 6 repeats a side (any verdict is false), and of a
    stack 20% slower at 6 (found where the page calls b faster than the slower a)."""
    kinds = {"A/A, 3 repeats": (3, 0.0), "A/A, 6 repeats": (6, 0.0),
             "20% slower, 6 repeats": (6, 0.20)}
    out: dict[str, Rate] = {}
    with tempfile.TemporaryDirectory(prefix="envbench-calibration-") as scratch:
        for name, (repeats, effect) in kinds.items():
            hits = 0
            for i in range(count):
                folder = Path(scratch) / ("%s-%d" % (name.replace(" ", "").replace(",", "")
                                                      .replace("/", ""), i))
                write_set(folder / "results", rng, noise, repeats, effect)
                verdict = page_verdict(folder / "results", folder / "page")
                hits += verdict != "no difference" if effect == 0 else verdict == "faster"
            out[name] = Rate(hits, count)
    print("\nThrough `envbench report` at the %s model, %d pages each: pages that claim a "
          "difference (A/A: all false) or find the 20%% one:\n" % (noise.name, count))
    print("| pages | claim or find |")
    print("|---|---:|")
    for name, rate in out.items():
        print("| %s | %s |" % (name, rate))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folders", nargs="*", help="results folders whose repeat spreads to draw")
    p.add_argument("--trials", type=int, default=4000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--methods", action="store_true", help="the test beside others")
    p.add_argument("--designs", action="store_true", help="auto's design beside others")
    p.add_argument("--pages", type=int, default=0, help="pages through `envbench report`")
    p.add_argument("--short", action="store_true",
                   help="the CI check: the 5%% model, A/A; exit 1 on a rate above 5%%")
    args = p.parse_args(argv)
    rng = random.Random(args.seed)
    started = time.perf_counter()
    five = lognormal(0.05)
    if args.short:
        table = false_verdicts(rng, [five], args.trials)
        worst = max((rate.wilson()[0], label) for (label, _, _), (rate,) in zip(rows(), table))
        print("\nhighest lower bound of a false-verdict rate: %.2f%% (%s), in %.0f s"
              % (100 * worst[0], worst[1], time.perf_counter() - started))
        return 1 if worst[0] > verdicts.ALPHA else 0
    models = [lognormal(0.02), five, lognormal(0.10), slow_repeats(0.05, 0.1, 1.3)]
    found = real(args.folders) if args.folders else None
    if found is not None:
        models.append(found)
    print("seed %d; %d steady epochs a repeat, %g%% apart; auto at precision %g"
          % (args.seed, STEADY_EPOCHS, 100 * EPOCH_JITTER, PRECISION))
    false_verdicts(rng, models, args.trials)
    for model in models:
        power(rng, model, args.trials // 2)
    if args.methods:
        methods(rng, args.trials // 4)
    if args.designs:
        designs(rng, five, args.trials // 2)
    if args.pages:
        pages(rng, five, args.pages)
    print("\n%.0f s" % (time.perf_counter() - started))
    return 0


if __name__ == "__main__":
    sys.exit(main())
