import sys

from bench.cli import main

# The guard matters: ddp's spawned ranks import this module again as __mp_main__.
if __name__ == "__main__":
    sys.exit(main())
