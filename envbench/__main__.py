import sys

from envbench.commands.cli import main

sys.exit(main())
