"""`envbench cloud` (./noxw -s cloud): one cluster per cloud target, results home, every
cluster down, then one report of what came back (--dry-run: the plan, prices, task YAMLs)."""
from __future__ import annotations

import sys
from typing import TextIO

from envbench.cloud import fanout, plan
from envbench.command_options import Options
from envbench.report import pages
from envbench.results import clusters


def run(opts: Options, out: TextIO = sys.stdout) -> int:
    if opts.dry_run:
        return plan.dry_run(opts, out)
    code, runs = fanout.launch(opts, out)
    reports = opts.reports_dir
    files = [reports / "results" / name for run in runs for name in run.results]
    files = [f for f in files if f.exists()]
    print("", file=out)
    for run in runs:
        cost = ("$%.4f (%s)" % (run.cost, run.cost_source) if run.cost is not None
                else "cost unknown")
        print("; ".join(part for part in ("%s on %s: %s" % (run.target, run.cluster,
                                                            run.state.value),
                                          run.message, cost) if part), file=out)
    if files and code != 130:
        written = pages.render_files(files, reports, cloud_runs=clusters.read(reports))
        print("report of %d results from %d cluster%s: %s"
              % (len(files), len(runs), "" if len(runs) == 1 else "s", written["html"]),
              file=out)
    return code
