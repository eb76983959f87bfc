"""`envbench` command line (the nox sessions call it): expected failures print one message."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from envbench.errors import MatrixError, UserError


def _matrix_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--matrix", type=Path, default=Path("matrix.yaml"), help="matrix file")
    p.add_argument("--env", action="append", default=[], metavar="NAME",
                   help="only this environment (repeatable)")
    p.add_argument("--target", action="append", default=[], metavar="NAME",
                   help="only this target (repeatable)")
    p.add_argument("--kind", choices=("cpu", "cuda"), default=None,
                   help="only cells on cpu or cuda targets")
    p.add_argument("--quick", action="store_true", help="1 epoch, 1 repeat, 5000 images")
    p.add_argument("--reports", type=Path, default=Path("reports"), metavar="DIR",
                   help="output folder (results/, logs/)")
    p.add_argument("--offline", action="store_true", help="never pull a base image")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="envbench", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build the images the selected cells need")
    _matrix_options(build)
    bench = sub.add_parser("bench", help="build, then run every selected cell")
    _matrix_options(bench)
    bench.add_argument("--synthetic", action="store_true", help="in-memory data, no download")
    bench.add_argument("--data", type=Path, default=None, metavar="DIR",
                       help="folder holding cifar-10-batches-py/ (default: the cache)")
    check = sub.add_parser("check", help="validate a matrix and list its cells")
    _matrix_options(check)
    data = sub.add_parser("data", help="download CIFAR-10 once into the cache (md5-checked)")
    data.add_argument("--dir", type=Path, default=None, help="cache folder")
    data.add_argument("--url", default=None, help="another source of cifar-10-python.tar.gz")
    sub.add_parser("base-image", help="build the local Debian base image (debootstrap)")
    report = sub.add_parser("report", help="render reports/index.html, summary.md, results.csv")
    report.add_argument("results", nargs="*", type=Path,
                        help="result folders or files (default: REPORTS/results)")
    report.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help="where to write (default: REPORTS)")
    # `nox -s bench-cpu report -- OPTIONS` hands both sessions the same options: without
    # result folders the report takes the cells the run took (matrix, --env, --target,
    # --kind, --quick, --synthetic, the data set's digest) from REPORTS/results.
    _matrix_options(report)
    report.add_argument("--synthetic", action="store_true",
                        help="report the cells run with --synthetic")
    report.add_argument("--data", type=Path, default=None, metavar="DIR",
                        help="the data set the cells ran on (default: the cache)")
    report.add_argument("--baseline", default=None, metavar="TARGET",
                        help="target that speedups are measured against (default: a cpu one)")
    report.add_argument("--target-accuracy", type=float, default=None, metavar="ACC",
                        help="accuracy for 'time to accuracy' (default: the matrix's, as "
                             "recorded in the results)")
    return p


def _options(args: argparse.Namespace):
    from envbench.run import Options

    return Options(matrix_path=args.matrix, envs=args.env, targets=args.target, kind=args.kind,
                   quick=args.quick, synthetic=getattr(args, "synthetic", False),
                   data_dir=getattr(args, "data", None), reports_dir=args.reports,
                   allow_pull=not args.offline)


def dispatch(args: argparse.Namespace) -> int:
    if args.command == "build":
        from envbench import run

        return run.build(_options(args))
    if args.command == "bench":
        from envbench import run

        return run.bench(_options(args))
    if args.command == "check":
        from envbench import run

        m, cells = run.plan_cells(_options(args))
        for cell in cells:
            print(cell.label)
        run.print_resources(m, cells, os.cpu_count() or 1, sys.stdout)
        print("%s: valid, %d cells" % (args.matrix, len(cells)))
        return 0
    if args.command == "data":
        from envbench import dataset

        kwargs = {"url": args.url} if args.url else {}
        dataset.fetch(args.dir, **kwargs)
        return 0
    if args.command == "base-image":
        from envbench import baseimage, engine

        baseimage.ensure(engine.connect())
        return 0
    from envbench import report

    return report.main(args)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
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
