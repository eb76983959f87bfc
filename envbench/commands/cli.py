"""`envbench` command line (the nox sessions call it): expected failures print one message."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from envbench.errors import MatrixError, UserError


def _selection(p: argparse.ArgumentParser) -> None:
    p.add_argument("--matrix", type=Path, default=Path("matrix.yaml"), help="matrix file")
    p.add_argument("--env", action="append", default=[], metavar="NAME",
                   help="only this environment (repeatable)")
    p.add_argument("--target", action="append", default=[], metavar="NAME",
                   help="only this target (repeatable)")
    p.add_argument("--kind", choices=("cpu", "cuda"), default=None,
                   help="only cells on cpu or cuda targets")


def _quick(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true", help="1 epoch, 1 repeat, 5000 images")


def _reports(p: argparse.ArgumentParser) -> None:
    p.add_argument("--reports", type=Path, default=Path("reports"), metavar="DIR",
                   help="output folder (results/, logs/)")


def _offline(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--offline", action="store_true", help=what)


def _locks(p: argparse.ArgumentParser, frozen: bool = True) -> None:
    p.add_argument("--locks", type=Path, default=None, metavar="DIR",
                   help="lock files (default: locks/ beside the matrix, or $ENVBENCH_LOCKS)")
    if frozen:
        p.add_argument("--frozen", action="store_true",
                       help="refuse to create a missing lock (CI: every lock is committed)")


def _data(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--synthetic", action="store_true", help=what)
    p.add_argument("--data", type=Path, default=None, metavar="DIR",
                   help="folder holding cifar-10-batches-py/ (default: the cache)")


def parser() -> argparse.ArgumentParser:
    """Each command takes only the options it uses: one it would ignore is refused."""
    p = argparse.ArgumentParser(prog="envbench", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    lock = sub.add_parser("lock", help="resolve each selected pip environment into "
                                       "locks/<env>.pylock.toml")
    _selection(lock)
    _locks(lock, frozen=False)
    build = sub.add_parser("build", help="build the images the selected cells need")
    _selection(build)
    _reports(build)
    _offline(build, "never pull a base image")
    _locks(build)
    bench = sub.add_parser("bench", help="build, then run every selected cell")
    _selection(bench)
    _quick(bench)
    _reports(bench)
    _offline(bench, "never pull a base image")
    _locks(bench)
    _data(bench, "in-memory data, no download")
    check = sub.add_parser("check", help="validate a matrix, list its cells, and run every "
                                         "check that needs no build")
    _selection(check)
    _quick(check)
    _offline(check, "base images must already be in the engine")
    _locks(check)
    _data(check, "the cells will run on synthetic data (no data set needed)")
    data = sub.add_parser("data", help="download CIFAR-10 once into the cache (md5-checked)")
    data.add_argument("--dir", type=Path, default=None, help="cache folder")
    data.add_argument("--url", default=None, help="another source of cifar-10-python.tar.gz")
    sub.add_parser("base-image", help="build the local Debian base image (debootstrap)")
    doc = sub.add_parser("doctor", help="what this host can run: engine, GPUs, driver, disk, "
                                        "data, registry and indexes")
    doc.add_argument("--matrix", type=Path, default=Path("matrix.yaml"), help="matrix file")
    doc.add_argument("--data", type=Path, default=None, metavar="DIR",
                     help="folder holding cifar-10-batches-py/ (default: the cache)")
    demo = sub.add_parser("demo", help="two real stacks on this machine's CPU, then the report")
    demo.add_argument("--reports", type=Path, default=Path("reports") / "demo", metavar="DIR",
                      help="where the demo's matrix, results and report go")
    report = sub.add_parser("report", help="render reports/index.html, summary.md, results.csv")
    report.add_argument("results", nargs="*", type=Path,
                        help="result folders or files (default: the current matrix's cells "
                             "in REPORTS/results)")
    report.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help="where to write (default: REPORTS)")
    # `nox -s bench-cpu report -- OPTIONS` hands both sessions the same options: without
    # result folders the report takes the cells the run took (matrix, --env, --target,
    # --kind, --quick, --synthetic, the data set's digest) from REPORTS/results.
    _selection(report)
    _quick(report)
    _reports(report)
    _data(report, "report the cells run with --synthetic")
    _locks(report, frozen=False)
    report.add_argument("--baseline", default=None, metavar="TARGET",
                        help="target that speedups are measured against (default: a cpu one)")
    report.add_argument("--baseline-env", default=None, metavar="ENV",
                        help="environment the head-to-head compares against (default: the "
                             "write-up's stack where present, else the first)")
    report.add_argument("--target-accuracy", type=float, default=None, metavar="ACC",
                        help="accuracy for 'time to accuracy' (default: the matrix's, as "
                             "recorded in the results)")
    compare = sub.add_parser("compare", help="the same cells in two runs: flag only the changes "
                                             "that clear the noise")
    compare.add_argument("old", type=Path, help="the earlier run's results (folder or file)")
    compare.add_argument("new", type=Path, help="the later run's results")
    compare.add_argument("--threshold", type=float, default=0.05, metavar="FRACTION",
                         help="flag a change only when its interval lies wholly beyond this "
                              "(default 0.05: 5%%)")
    compare.add_argument("--fail-on-regression", action="store_true",
                         help="exit 1 when a cell regressed (for CI)")
    compare.add_argument("--out", type=Path, default=Path("reports") / "compare", metavar="DIR",
                         help="where compare.html and compare.md go")
    cloud = sub.add_parser("cloud", help="cloud targets: one SkyPilot VM per target "
                                         "(--dry-run: the plan, prices and task YAMLs)")
    cloud.add_argument("--matrix", type=Path, default=Path("matrix.yaml"), help="matrix file")
    cloud.add_argument("--target", action="append", default=[], metavar="NAME",
                       help="only this cloud target (repeatable)")
    _reports(cloud)
    _data(cloud, "the cells run on synthetic data (no data set is uploaded)")
    cloud.add_argument("--dry-run", action="store_true",
                       help="print the plan and write the task YAMLs; launch nothing")
    cloud.add_argument("--out", type=Path, default=None, metavar="DIR",
                       help="write each target's SkyPilot task YAML here")
    cloud.add_argument("--launcher", choices=("sky", "local"), default="sky",
                       help="sky: SkyPilot's clusters (default); local: sshd containers on "
                            "this machine, a rehearsal of the fan-out (infra ssh/local, no "
                            "accelerators)")
    p.set_defaults(commands=sub.choices)
    return p


def _options(args: argparse.Namespace):
    from envbench.cells.matrixrun import Options

    return Options(matrix_path=args.matrix, envs=args.env, targets=args.target, kind=args.kind,
                   quick=getattr(args, "quick", False), synthetic=getattr(args, "synthetic", False),
                   data_dir=getattr(args, "data", None),
                   reports_dir=getattr(args, "reports", Path("reports")),
                   allow_pull=not getattr(args, "offline", False),
                   locks=getattr(args, "locks", None), frozen=getattr(args, "frozen", False))


def dispatch(args: argparse.Namespace) -> int:
    if args.command == "build":
        from envbench.cells import matrixrun

        return matrixrun.build(_options(args))
    if args.command == "bench":
        from envbench.cells import matrixrun

        return matrixrun.bench(_options(args))
    if args.command == "lock":
        from envbench.cells import matrixrun

        return matrixrun.lock(_options(args))
    if args.command == "check":
        from envbench.commands import check

        return check.check(_options(args))
    if args.command == "data":
        from envbench.cells import dataset

        kwargs = {"url": args.url} if args.url else {}
        dataset.fetch(args.dir, **kwargs)
        return 0
    if args.command == "cloud":
        from envbench.cloud import plan
        from envbench.matrix import models

        if not args.dry_run:
            from envbench.cloud import fanout

            return fanout.launch(models.load(args.matrix), args.matrix, args.reports,
                                 args.target, args.data, args.synthetic, args.out,
                                 args.launcher)
        return plan.dry_run(models.load(args.matrix), args.matrix, args.reports, args.target,
                            args.data, args.synthetic, args.out)
    if args.command == "compare":
        from envbench.report import compare

        return compare.main(args)
    if args.command == "doctor":
        from envbench.commands import doctor
        from envbench.matrix import models

        return doctor.doctor(models.load(args.matrix), args.matrix.resolve().parent, args.data)
    if args.command == "demo":
        from envbench.commands import demo

        return demo.demo(args.reports)
    if args.command == "base-image":
        from envbench import provision
        from envbench.engine import connection
        from envbench.images import baseimage

        as_root = provision.privileged()
        if as_root is None:
            raise UserError("debootstrap needs root: run `sudo %s -m envbench base-image`"
                            % sys.executable)
        baseimage.ensure(connection.connect(), as_root=as_root)
        return 0
    from envbench.report import pages

    return pages.main(args)


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args, unknown = p.parse_known_args(argv)
    if unknown:
        command = args.commands[args.command]
        taken = sorted(o for o in command._option_string_actions if o.startswith("--"))
        print("error: envbench %s does not take %s; its options are: %s"
              % (args.command, " ".join(unknown), " ".join(taken)), file=sys.stderr)
        return 2
    try:
        return dispatch(args)
    except MatrixError as exc:
        print("error: %s" % exc, file=sys.stderr)
        return 2
    except UserError as exc:
        print("error: %s" % exc, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
