"""`envbench report` (./noxw -s report): index.html, summary.md and results.csv.

Without folders, the current matrix's cells from REPORTS/results (with the run's selection
options); with folders or files, what they hold, narrowed by the same options.
"""
from __future__ import annotations

import sys
from typing import TextIO

from envbench.command_options import Options
from envbench.report import pages, selection
from envbench.results import clusters, store
from envbench.terminal import safe


def run(opts: Options, out: TextIO = sys.stdout) -> int:
    if opts.results:
        # Folders named on the command line: report what they hold, nothing else.
        loaded, skipped = store.load_all(list(opts.results))
        loaded = selection.matching(loaded, opts)
        where = ", ".join(map(str, opts.results))
    else:
        loaded, skipped, where = selection.current_results(opts)
    written = pages.render(loaded, skipped, opts.out or opts.reports_dir, opts.baseline,
                           opts.target_accuracy, where, opts.baseline_env,
                           cloud_runs=clusters.read(opts.reports_dir),
                           keep_contended=opts.keep_contended)
    print("reported %d results; left out %d files%s" % (
        len(loaded), len(skipped), " (the page lists them with the reason)" if skipped else ""),
        file=out)
    for path, why in skipped[:5]:
        print("  left out %s: %s" % (safe(str(path)), safe(why)), file=out)
    if len(skipped) > 5:
        print("  … and %d more" % (len(skipped) - 5), file=out)
    for file in written.values():
        print("wrote %s (%.1f kB)" % (file, file.stat().st_size / 1000), file=out)
    return 0
