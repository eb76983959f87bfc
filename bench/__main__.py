import os
import sys

from bench.cli import main

# The guard matters: ddp's spawned ranks import this module again as __mp_main__.
if __name__ == "__main__":
    code = main()
    # The result is written and closed (atomically): end here, without the interpreter's
    # teardown. With torch loaded that teardown costs 0.2 s (torch 1.13) to 0.4 s (torch
    # 2.13) per cell (measured in the demo's images), the largest part of the kit's overhead
    # per cell; and after ddp, rank 0 keeps its model alive (bench.parallel.finish), whose
    # reducer must not be destroyed by the interpreter.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
