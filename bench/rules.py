"""The facts bench and the host must agree on, defined once: what a name, a function and a
digest look like, the most epochs a run may have, --quick's sizes, CIFAR-10's folder and the
kinds of failure the kit itself records. Standard library only, importable on
Python 3.8 (inside the images) and by the host's matrix checks; the result schema is held
to them by tests/host/test_contract.py.
"""
import re

# An environment's, a target's or a workload's name: shown on the page, part of file names
# and image tags.
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}\Z")
# The function a user's workload file defines (build by default).
FUNCTION_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}\Z")
SHA256 = re.compile(r"^[0-9a-f]{64}\Z")
# A read-only input of a user's workload: the name build() reads it under (ctx.inputs[NAME]).
INPUT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,62}\Z")
# The matrix's bound (benchmark.epochs), bench's and the schema's.
MAX_EPOCHS = 1000
# --quick's train and test limits (a workload's Info may set smaller ones): one short epoch,
# to check a matrix end to end in minutes.
QUICK_LIMITS = (5000, 1000)
# The folder the CIFAR-10 python archive unpacks to: the host's cache holds it, bench reads it.
CIFAR_FOLDER = "cifar-10-batches-py"


class FailureKind:
    """The error types the kit records for a cell without figures (its result's error.type).
    A failure raised by the training itself is recorded under its exception's class name
    (ValueError, WorkloadError), so the schema keeps error.type open; these are the kinds
    the kit assigns, inside the image and on the host. Plain strings, not an enum.Enum: a
    record's type is read back from JSON and compared and hashed as a string."""

    # Written by bench inside the image.
    INTERRUPTED = "Interrupted"          # Ctrl-C, or SIGTERM from the engine or Slurm
    OUT_OF_MEMORY = "OutOfMemory"        # torch's; or the host saw the memory limit kill it
    # Written by the host for a cell that ran.
    TIMEOUT = "Timeout"                  # past the target's timeout_s
    CONTAINER_EXITED = "ContainerExited"  # bench exited non-zero without a result
    NO_RESULT = "NoResult"               # no valid result came back
    CONTAINER_ERROR = "ContainerError"   # the engine failed to start or follow it
    SLURM_JOB_ENDED = "SlurmJobEnded"    # Slurm ended the job before its step finished
    PROVISION_FAILED = "ProvisionFailed"  # no cloud VM for it
    # Written by the host for a cell that never ran.
    BUILD_FAILED = "BuildFailed"         # its image did not build
    GPU_UNAVAILABLE = "GpuUnavailable"   # a GPU host whose GPU the cell cannot have
    DRIVER_TOO_OLD = "DriverTooOld"      # the host's NVIDIA driver predates the stack's CUDA
    NO_GPU = "NoGpu"                     # refused by design: no NVIDIA GPU on this host
    NO_KERNELS = "NoKernelImage"         # refused by design: the stack has no kernels for it


FAILURE_KINDS = frozenset(value for key, value in vars(FailureKind).items()
                          if key.isupper())


def json_schema_pattern(pattern: "re.Pattern[str]") -> str:
    """The same pattern for a JSON-schema or pydantic check, whose regex engines end a string
    at $ where Python's re needs \\Z not to accept a final newline."""
    assert pattern.pattern.endswith("\\Z")
    return pattern.pattern[:-2] + "$"
