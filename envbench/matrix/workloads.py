"""A matrix's workloads as this machine sees them: each resolved once into a ``WorkloadPlan``.

A built-in workload is a name from bench's catalog. A user's own is a file or folder beside
the matrix: it must lie inside the matrix's folder (as a dockerfile must), exist, and be
plain files (no links); its sha256 (bench.workloads.digest: names and bytes, the same
function bench checks the mounted copy with) is taken here, once, and goes into every cell's
identity, so changed code is a new measurement. The host never imports it. Its inputs
(envbench.matrix.inputs: weights, a data set of one's own) are resolved with it.
"""
from __future__ import annotations

import stat
from dataclasses import dataclass
from pathlib import Path

from bench import workloads as catalog
from bench.boundedread import kind_of
from bench.errors import WorkloadError
from bench.rules import QUICK_LIMITS
from envbench.matrix import inputs as inputmod
from envbench.matrix.inputs import InputPlan
from envbench.matrix.models import Matrix, WorkloadChoice
from envbench.user_errors import BadInput

# Where a user's workload appears in a cell's container (read-only).
MOUNT_ROOT = "/workload"
# The data a user's workload may read: CIFAR-10 through ctx.cifar10(), as the LeNets do.
USER_DATA = catalog.USER_DATA


@dataclass(frozen=True)
class WorkloadPlan:
    """What a cell trains, resolved: its name, where its data comes from, and for a user's
    workload the host path, the function and the digest."""

    name: str
    data: str                      # "cifar10" (the run's data set) or "synthetic" (always)
    batch_size: int | None         # the matrix's for this workload
    limit: int | None              # the matrix's for this workload
    limit_test: int | None
    default_batch_size: int | None = None  # the catalog's (None: a user's workload)
    quick: tuple[int, int] = QUICK_LIMITS  # --quick's train and test limits
    path: Path | None = None       # a user's workload: its file or folder on this host
    function: str | None = None
    sha256: str | None = None
    # Its __pycache__ folders (relative): each hidden behind an empty tmpfs in the cell.
    bytecode_caches: tuple[str, ...] = ()
    # Its read-only inputs, in name order (a built-in workload has none).
    inputs: tuple[InputPlan, ...] = ()

    @property
    def builtin(self) -> bool:
        return self.path is None

    @property
    def mount_point(self) -> str | None:
        """Where the cell's container sees a user's workload (None for a built-in one)."""
        return None if self.path is None else "%s/%s" % (MOUNT_ROOT, self.path.name)

    def bench_args(self) -> list[str]:
        args = ["--workload", self.name]
        if self.path is not None:
            args += ["--workload-file", str(self.mount_point), "--workload-function",
                     str(self.function), "--workload-sha256", str(self.sha256)]
        for given in self.inputs:
            args += given.bench_args()
        return args


def resolve(entry: WorkloadChoice, matrix_dir: Path, where: str,
            digests: inputmod.DigestCache | None = None) -> WorkloadPlan:
    """One workload entry of the matrix, checked and hashed, its inputs too; ``where``
    names its key."""
    if entry.builtin:
        info = catalog.info(entry.label)
        assert info is not None  # the matrix refused unknown names
        return WorkloadPlan(entry.label, info.data, entry.batch_size, entry.limit,
                            entry.limit_test, info.batch_size, tuple(info.quick))
    assert entry.file is not None
    root = matrix_dir.resolve()
    given = matrix_dir / entry.file
    if given.is_symlink():
        raise BadInput("%s.file: %s is a symbolic link: name the file or folder itself"
                        % (where, entry.file))
    path = given.resolve()
    if not path.is_relative_to(root) or path == root:
        raise BadInput("%s.file: %s lies outside the matrix's folder %s: refused (the kit "
                        "mounts only what lies beside the matrix)" % (where, entry.file, root))
    if not path.exists():
        raise BadInput("%s.file: %s does not exist (in %s)" % (where, entry.file, root))
    mode = path.stat().st_mode
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise BadInput("%s.file: %s is %s, not a .py file or a folder"
                        % (where, entry.file, kind_of(mode)))
    if path.is_file() and path.suffix != ".py":
        raise BadInput("%s.file: %s is not a .py file or a folder" % (where, entry.file))
    if path.is_dir() and not (path / "__init__.py").is_file():
        raise BadInput("%s.file: %s is a folder without __init__.py (a folder workload is a "
                        "package whose __init__.py defines the function)" % (where, entry.file))
    try:
        digest = catalog.digest(str(path))
    except WorkloadError as exc:
        raise BadInput("%s.file: %s" % (where, exc))
    except OSError as exc:
        raise BadInput("%s.file: %s cannot be read (%s)" % (where, entry.file,
                                                             exc.strerror or exc))
    return WorkloadPlan(entry.label, USER_DATA, entry.batch_size, entry.limit, entry.limit_test,
                        path=path, function=entry.function or "build", sha256=digest,
                        bytecode_caches=tuple(catalog.bytecode_caches(str(path))),
                        inputs=inputmod.resolve_all(entry.inputs, matrix_dir, where, digests))


def resolve_all(matrix: Matrix, matrix_dir: Path) -> dict[str, WorkloadPlan]:
    """Every workload of the matrix by its name, resolved (files checked and hashed)."""
    bench = matrix.benchmark
    swept = "workload" in bench.sweep
    plans = {}
    digests = inputmod.DigestCache()  # one read of the cache for every entry's inputs
    for index, entry in enumerate(bench.workloads):
        where = "benchmark.sweep.workload[%d]" % index if swept else "benchmark.workload"
        plans[entry.label] = resolve(entry, matrix_dir, where, digests)
    return plans


# The default workload, the write-up's (what a cell made without a matrix trains).
LENET = WorkloadPlan(catalog.DEFAULT, "cifar10", None, None, None,
                     catalog.BUILTIN[catalog.DEFAULT].batch_size)
