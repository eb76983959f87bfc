"""`envbench compare OLD NEW` (./noxw -s compare): two runs' results, cell by cell; only the
changes that clear the noise are flagged.

Under --fail-on-regression the exit code is 1 when a cell regressed beyond the threshold, and
also when a cell the old run measured failed in the new run or is missing from it: a gate that
a broken benchmark passes is no gate. A cell new in the new run, or one that failed only in the
old run, does not fail it; nor does a cell without an interval (fewer than 3 clean repeats a
side), which is listed as such.
"""
from __future__ import annotations

import math
import sys
from typing import TextIO

from envbench.command_options import Options
from envbench.report import compare, grouping
from envbench.report.formats import step_time
from envbench.results import store
from envbench.terminal import safe
from envbench.user_errors import BadInput


def run(opts: Options, out: TextIO = sys.stdout) -> int:
    assert opts.old is not None and opts.new is not None and opts.out is not None
    # Both inputs before either is walked: a wrong OLD is said at once, not after NEW.
    for what, path in (("OLD", opts.old), ("NEW", opts.new)):
        if not path.exists():
            raise BadInput("%s (%s) does not exist" % (what, path))
    if not (math.isfinite(opts.threshold) and 0 <= opts.threshold < 1):
        raise BadInput("--threshold %s: expected a fraction from 0 to below 1 (0.05 is 5%%)"
                        % opts.threshold)
    old, skipped_old = store.load_all([opts.old])
    new, skipped_new = store.load_all([opts.new])
    for what, path, loaded, skipped in (("OLD", opts.old, old, skipped_old),
                                        ("NEW", opts.new, new, skipped_new)):
        if not loaded:
            raise BadInput("%s (%s) holds no valid results%s" % (
                what, path, "; left out: %s" % "; ".join("%s: %s" % s for s in skipped[:3])
                if skipped else ""))
    for file, why in skipped_old + skipped_new:
        print("left out %s: %s" % (safe(str(file)), safe(why)), file=out)
    changes = compare.compare(old, new, opts.threshold, opts.keep_contended)
    written = compare.render(changes, str(opts.old), str(opts.new), opts.threshold, opts.out,
                             skipped_old + skipped_new)
    width = max(len(safe(c.name)) for c in changes)
    for c in changes:
        figures = ("%.3f s → %.3f s, ×%.3f" % (grouping.seconds(c.old), grouping.seconds(c.new),
                                                  c.ratio)
                   if c.ratio is not None and c.old and c.new else "")
        interval = " (%.3f–%.3f)" % c.ci if c.ci else ""
        print("%-*s  %-12s %s%s" % (width, safe(c.name), c.flag, figures, interval), file=out)
        for label, before, after in c.differences:
            print("%-*s    %s: %s → %s" % (width, "", safe(label), safe(str(before)),
                                          safe(str(after))), file=out)
        for m in c.operators:
            # Operator names come from the traced program: a name may carry escapes.
            print("%-*s    operator %s: %s → %s per step" % (width, "", safe(m.name),
                                                        step_time(m.old_s), step_time(m.new_s)),
                  file=out)
    regressions = sum(c.flag == "regression" for c in changes)
    lost = [c for c in changes if c.flag in LOST]
    family = compare.family_sentence(changes)
    if family:
        print(family, file=out)
    print("%d cells; %d regression(s), %d improvement(s) beyond %s%%%s; wrote %s and %s"
          % (len(changes), regressions, sum(c.flag == "improvement" for c in changes),
             "%g" % (100 * opts.threshold), "; %d cell(s) failed or missing in NEW" % len(lost)
             if lost else "", written["html"], written["md"]), file=out)
    return 1 if (regressions or lost) and opts.fail_on_regression else 0


# What the old run measured and the new one did not: a gate counts these as failures.
LOST = ("failed in the new run", "only in the old run")
