import sys

from envbench.cli import main

sys.exit(main())
