"""The mutation score per module, from mutmut's own records (mutants/<path>.meta).

`./noxw -s mutants` runs mutmut over the modules that make the report's figures, then this:
per module, mutants killed, survived, without a covering test, timed out; the survivors
listed by name. Those argued equivalent in tests/equivalent_mutants.txt (name, then why) are
counted apart and left out of the score: (killed + timed out) / (all - equivalent). A mutant
no test reaches counts against the score: it is code no test can catch.
"""
from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EQUIVALENT = ROOT / "tests" / "equivalent_mutants.txt"

# mutmut 3's exit codes of a mutant's test run (mutmut/stats.py's status_by_exit_code).
STATUS = {1: "killed", 3: "killed", -24: "timeout", 24: "timeout", 152: "timeout",
          255: "timeout", 0: "survived", 5: "no tests", 33: "no tests", 37: "killed",
          -9: "segfault", -11: "segfault", None: "not checked"}


def equivalents() -> dict[str, str]:
    """'mutant name  reason' lines; # comments."""
    out = {}
    if EQUIVALENT.exists():
        for line in EQUIVALENT.read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                name, _, reason = line.partition(" ")
                out[name] = reason.strip()
    return out


def main() -> int:
    argued = equivalents()
    rows = []
    survivors = []
    for meta in sorted((ROOT / "mutants").rglob("*.meta")):
        module = str(meta.relative_to(ROOT / "mutants"))[:-len(".meta")]
        codes = json.loads(meta.read_text()).get("exit_code_by_key", {})
        counts: Counter[str] = Counter()
        for name, code in codes.items():
            status = STATUS.get(code, "suspicious")
            if status == "survived" and name in argued:
                status = "equivalent"
            counts[status] += 1
            if status in ("survived", "no tests"):
                survivors.append((name, status))
        if not codes or counts["not checked"] == len(codes):
            rows.append((module, len(codes), counts, None))
            continue
        scored = sum(counts.values()) - counts["equivalent"] - counts["not checked"]
        caught = counts["killed"] + counts["timeout"]
        score = 100.0 * caught / scored if scored else 100.0
        rows.append((module, len(codes), counts, score))
    if not rows:
        print("no mutmut results under mutants/: run `./noxw -s mutants` first", file=sys.stderr)
        return 1
    print("| module | mutants | killed | survived | equivalent | no tests | timeout | score |")
    print("|---|---|---|---|---|---|---|---|")
    for module, total, c, score in rows:
        print("| %s | %d | %d | %d | %d | %d | %d | %s |" % (
            module, total, c["killed"], c["survived"], c["equivalent"], c["no tests"],
            c["timeout"], "not run" if score is None else "%.1f%%" % score))
    if survivors:
        print("\nsurviving (not argued equivalent): %d" % len(survivors))
        for name, status in survivors:
            print("  %s  %s" % (name, status))
    return 0


if __name__ == "__main__":
    sys.exit(main())
