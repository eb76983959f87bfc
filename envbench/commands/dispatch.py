"""`envbench` command line (the nox sessions call it): expected failures print one message.

Each verb is a module of this package with ``run(opts) -> exit code``; it is imported when
the verb runs, so that `envbench check` does not load matplotlib or SkyPilot.
"""
from __future__ import annotations

import importlib
import sys

from envbench import command_options, stopping
from envbench.user_errors import BadInput, UserError


def main(argv: list[str] | None = None) -> int:
    p = command_options.parser(__doc__.splitlines()[0])
    argv = list(sys.argv[1:] if argv is None else argv)
    verb_name = argv[0] if argv and argv[0] in command_options.COMMANDS else None
    if verb_name is not None:
        argv, ignored = command_options.split_foreign(verb_name, argv)
        for flag in [a.split("=", 1)[0] for a in ignored if a.startswith("--")]:
            print("envbench %s: ignoring %s (an option of %s; chained sessions share their "
                  "options)" % (verb_name, flag, ", ".join(command_options.verbs_taking(flag))),
                  file=sys.stderr)
    args, unknown = p.parse_known_args(argv)
    if unknown:
        command = args.commands[args.command]
        taken = sorted(o for o in command._option_string_actions if o.startswith("--"))
        print("error: envbench %s does not take %s; its options are: %s"
              % (args.command, " ".join(unknown), " ".join(taken)), file=sys.stderr)
        return 2
    verb = importlib.import_module("envbench.commands.%s" % args.command.replace("-", "_"))
    previous = stopping.as_interrupt()
    try:
        # The streams as they are now (a test may have replaced them), not at import time.
        return int(verb.run(command_options.from_namespace(args), sys.stdout))
    except BadInput as exc:  # a bad matrix or selection: nothing ran
        print("error: %s" % exc, file=sys.stderr)
        return 2
    except UserError as exc:
        print("error: %s" % exc, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    finally:
        stopping.restore(previous)


if __name__ == "__main__":
    sys.exit(main())
