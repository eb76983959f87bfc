import sys

from envbench.commands.dispatch import main

sys.exit(main())
