import os
import sys

from bench.cli import main

# The guard matters: ddp's spawned ranks import this module again as __mp_main__.
if __name__ == "__main__":
    code = main()
    parallel = sys.modules.get("bench.parallel")
    if parallel is not None and parallel.ended_without_finalisation():
        # ddp's rank 0 kept its model alive (bench.parallel.finish): the result is written,
        # so end here rather than let the interpreter destroy DDP's reducer.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
