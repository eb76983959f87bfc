"""Data parallelism: one device, nn.DataParallel, or DistributedDataParallel.

none  one device (the tutorial).
dp    nn.DataParallel over the first --nproc visible GPUs: one process scatters each batch.
ddp   DistributedDataParallel with one process per device: NCCL on CUDA, gloo on CPU, where
      the "devices" are CPU processes sharing the cores (the threads are split between them).
      Rank 0 runs in this process and writes the one result; ranks 1.. are spawned children.
      The rendezvous is a FileStore in a temporary folder, since containers have no network;
      gloo and NCCL talk over the loopback interface.

--batch-size is per device in every mode, so a step of dp or ddp trains nproc x batch images
(weak scaling, as the write-up measures it) and the epoch has nproc times fewer steps.
"""
from __future__ import annotations

import contextlib
import datetime
import json
import os
import shutil
import sys
import tempfile
import time

import torch

from bench import errors, result
from bench.compat import torch_version
from bench.errors import RankFailed, UnsupportedOption
from bench.messages import first_line

RENDEZVOUS_TIMEOUT_S = 300
# A rank that wrote its done marker and is still alive this long after is ended: its work is
# done and whatever holds it (a teardown deadlock) is not the run's.
DONE_GRACE_S = 10
# After rank 0 fails: how long a killed or failed child gets to show it (_settled_failure).
FAILURE_SETTLE_S = 5
# DDP models of rank 0, never destroyed: see finish().
KEEP_ALIVE = []


class World(object):
    """Who this process is in the run: rank, world size, backend, and its device."""

    def __init__(self, mode, size, rank=0, backend=None, device_index=None, done_marker=None):
        self.mode = mode
        self.size = size
        self.rank = rank
        self.backend = backend
        self.device_index = device_index
        self.done_marker = done_marker  # a spawned rank's "my work is done" file

    @property
    def distributed(self):
        return self.mode == "ddp"

    @property
    def main(self):
        return self.rank == 0

    def record(self, batch_size, threads):
        """The result's ``parallel`` section (per-device and global batch, threads per rank)."""
        return {"mode": self.mode, "world_size": self.size, "backend": self.backend,
                "per_device_batch": batch_size, "global_batch": batch_size * self.size,
                "threads_per_rank": threads}


def plan(config):
    """The world a run asks for, or a clear UnsupportedOption before anything is built."""
    mode, nproc, device = config["parallel"], config["nproc"], config["device"]
    visible = torch.cuda.device_count() if device == "cuda" and torch.cuda.is_available() else 0
    if mode == "none":
        if nproc not in (None, 1):
            raise UnsupportedOption("--nproc %d needs --parallel dp or ddp (none trains on one "
                                    "device)" % nproc)
        return World("none", 1)
    if mode == "dp" and device != "cuda":
        raise UnsupportedOption("--parallel dp needs --device cuda: nn.DataParallel splits "
                                "each batch over GPUs (use --parallel ddp for CPU processes)")
    if mode == "ddp":
        dist = getattr(torch, "distributed", None)
        if dist is None or not dist.is_available():
            raise UnsupportedOption("--parallel ddp needs torch.distributed, which torch %s in "
                                    "this image was built without" % torch_version())
        if device == "cpu" and nproc is None:
            raise UnsupportedOption("--parallel ddp on CPU needs --nproc N (the number of "
                                    "processes to split the cores between)")
    if device == "cuda":
        size = nproc or visible
        if size > visible:
            raise UnsupportedOption("--nproc %d: this container sees %d GPU(s) (attach more "
                                    "with the target's gpus:)" % (size, visible))
        if size < 1:
            raise UnsupportedOption("--parallel %s: this container sees no GPU" % mode)
    else:
        size = nproc
    if mode == "ddp":
        backend = "nccl" if device == "cuda" else "gloo"
        if backend == "nccl" and not torch.distributed.is_nccl_available():
            raise UnsupportedOption("--parallel ddp on CUDA needs NCCL, which torch %s in this "
                                    "image lacks" % torch_version())
        return World("ddp", size, 0, backend, 0 if device == "cuda" else None)
    return World("dp", size)


def split_threads(total, world):
    """CPU ranks share the cores: each gets its share of the cell's threads (at least one)."""
    return max(1, total // world.size) if world.distributed else total


def _loopback():
    # Containers run with --network none: only lo exists, and both libraries must use it.
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")


def join_group(world, store_path):
    """Join the process group through the FileStore rendezvous."""
    import torch.distributed as dist

    _loopback()
    if world.backend == "nccl":
        torch.cuda.set_device(world.device_index)
    store = dist.FileStore(store_path, world.size)
    dist.init_process_group(world.backend, store=store, rank=world.rank,
                            world_size=world.size,
                            timeout=datetime.timedelta(seconds=RENDEZVOUS_TIMEOUT_S))


def finish(world, *alive):
    """End a rank's training without destroying DDP's reducer.

    Destroying it (~Reducer -> ~ProcessGroupGloo) joins a gloo worker thread that may itself
    wait for the GIL to free a tensor: under torch 1.13 rank 1 deadlocked there, and the run
    waited 300 s for it (read with py-spy). So a spawned rank says it is done and ends at
    once, skipping every destructor; rank 0 keeps its DDP model alive to the end of the
    process, which bench's __main__ ends without finalisation after the result is written.
    """
    if not world.distributed:
        return
    if world.rank != 0 and world.done_marker:
        open(world.done_marker, "w").close()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    KEEP_ALIVE.extend(alive)


class AutocastInside(torch.nn.Module):
    """Each call runs inside the run's autocast. DataParallel's replica threads re-enter
    autocast with the caller's enabled flag but not its dtype, and a new thread's default is
    float16: under --amp bf16 the replicas would compute in fp16 without loss scaling. So
    the replicas enter the run's own autocast (dtype included) themselves."""

    def __init__(self, module, autocast):
        super().__init__()
        self.module = module
        self.autocast = autocast

    def forward(self, *args, **kwargs):
        with self.autocast():
            return self.module(*args, **kwargs)


def wrap(net, world, autocast=None):
    """The model the train step calls: the network itself, or its parallel wrapper."""
    if world.mode == "dp":
        inner = AutocastInside(net, autocast) if autocast is not None else net
        return torch.nn.DataParallel(inner, device_ids=list(range(world.size)))
    if world.mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        if world.backend == "nccl":
            return DistributedDataParallel(net, device_ids=[world.device_index])
        return DistributedDataParallel(net)
    return net


def syncs_gradients(step, accumulate, common_steps):
    """Whether micro-step ``step`` (1-based) all-reduces its gradients under ddp.

    Only the step that ends an accumulation group needs to: the others run under no_sync and
    their gradients add up locally until that step reduces the sum. Every rank must decide
    alike, so past the steps every rank has (``common_steps``: shards may differ by one
    batch) each step syncs, and a rank's last step never leaves gradients unreduced."""
    return step % accumulate == 0 or step >= common_steps


def gradient_sync(wrapped, world, sync):
    """The context of one micro-step's forward and backward: DDP's no_sync where it keeps
    its gradients local, else nothing."""
    if world.mode == "ddp" and not sync:
        return wrapped.no_sync()
    return contextlib.nullcontext()


def gather(world, numbers):
    """Every rank's list of ``numbers``, in rank order, on every rank.

    Tensors rather than all_gather_object, which needs numpy (not every image has it)."""
    if not world.distributed:
        return [list(numbers)]
    import torch.distributed as dist

    device = torch.device("cuda", world.device_index) if world.backend == "nccl" else "cpu"
    mine = torch.tensor(numbers, dtype=torch.float64, device=device)
    everyone = [torch.empty_like(mine) for _ in range(world.size)]
    dist.all_gather(everyone, mine)
    return [t.tolist() for t in everyone]


def barrier(world):
    if world.distributed:
        import torch.distributed as dist

        dist.barrier()


def _child(config, rank, size, store_path, folder, train_fn):
    """Entry point of rank 1.. (spawned): train, and leave an error file if it fails."""
    world = World("ddp", size, rank, "nccl" if config["device"] == "cuda" else "gloo",
                  rank if config["device"] == "cuda" else None,
                  os.path.join(folder, "rank%d.done" % rank))
    try:
        train_fn(config, result.new_record(config), world, store_path)
    except BaseException as exc:  # noqa: B036 - the parent must learn why this rank ended
        error = errors.describe(exc)
        with open(os.path.join(folder, "rank%d.error.json" % rank), "w") as f:
            json.dump(error, f)
        raise SystemExit(1)
    # train() ends a finished rank itself (finish()); should it return, the same: say so,
    # then end without the interpreter's finalisation, where gloo's threads can abort the
    # process ("terminate called without an active exception", SIGABRT, seen once in CI).
    open(os.path.join(folder, "rank%d.done" % rank), "w").close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def run_ddp(config, record, world, train_fn):
    """Start ranks 1.. as spawned processes, train as rank 0 here, and end them all."""
    folder = tempfile.mkdtemp(prefix="envbench-ddp-")
    store_path = os.path.join(folder, "store")
    context = torch.multiprocessing.get_context("spawn")
    children = []
    try:
        for rank in range(1, world.size):
            child = context.Process(target=_child,
                                    args=(config, rank, world.size, store_path, folder,
                                          train_fn))
            child.start()
            children.append(child)
        try:
            train_fn(config, record, world, store_path)
        except Exception as exc:
            failure = _settled_failure(folder, children)
            if failure is not None:
                raise RankFailed("%s (rank 0 then failed with %s: %s)"
                                 % (failure, type(exc).__name__, first_line(exc, 200)))
            raise
        _await(children, folder)
        failure = _child_failure(folder, children)
        if failure is not None:
            raise RankFailed(failure)
        for rank, child in enumerate(children, start=1):
            if child.exitcode not in (None, 0):  # after its work was done: say it, go on
                print("warning: rank %d ended with %s after finishing its work; its figures "
                      "are complete" % (rank, _exit_text(child.exitcode)), file=sys.stderr,
                      flush=True)
    finally:
        for child in children:
            if child.is_alive():
                child.terminate()
            child.join(10)
        shutil.rmtree(folder, ignore_errors=True)


def _await(children, folder):
    """Wait for the ranks to end: a failure ends the wait at once; a rank that wrote its done
    marker gets DONE_GRACE_S to exit and is then ended (its figures are complete)."""
    deadline = time.monotonic() + RENDEZVOUS_TIMEOUT_S
    done_since = {}
    while any(child.is_alive() for child in children) and time.monotonic() < deadline:
        if _child_failure(folder, children) is not None:
            return
        for rank, child in enumerate(children, start=1):
            if child.is_alive() and os.path.exists(os.path.join(folder, "rank%d.done" % rank)):
                since = done_since.setdefault(rank, time.monotonic())
                if time.monotonic() - since > DONE_GRACE_S:
                    print("warning: rank %d finished its work but did not exit within %d s; "
                          "ended" % (rank, DONE_GRACE_S), file=sys.stderr, flush=True)
                    child.terminate()
        time.sleep(0.1)


def _settled_failure(folder, children):
    """A child's failure once the children have settled, after rank 0 failed.

    A killed rank's sockets close while the kernel tears it down, before its exit status can
    be read: rank 0's collective can fail first, and a look at that moment finds every child
    alive, so rank 0's own error (gloo's closed connection) would be reported in place of
    "rank 1 was killed by signal 9". The window widens on a busy machine (the killed-rank test
    failed once with both cores taken). Wait up to FAILURE_SETTLE_S for a failed child to say
    so, or for all to end: a rank 0 that failed on its own waits that long, once."""
    deadline = time.monotonic() + FAILURE_SETTLE_S
    while True:
        failure = _child_failure(folder, children)
        if failure is not None or time.monotonic() >= deadline \
                or not any(child.is_alive() for child in children):
            return failure
        time.sleep(0.05)


def _exit_text(code):
    return "signal %d" % -code if code < 0 else "exit code %d" % code


def _child_failure(folder, children):
    """The first failed child's error in words, or None when every child is fine so far.

    A child that wrote its ``done`` marker finished training and left the group: how its
    process ended after that does not make the run's figures wrong."""
    for rank, child in enumerate(children, start=1):
        if os.path.exists(os.path.join(folder, "rank%d.done" % rank)):
            continue
        path = os.path.join(folder, "rank%d.error.json" % rank)
        if os.path.exists(path):
            try:
                with open(path) as f:
                    error = json.load(f)
                return "rank %d failed: %s: %s" % (rank, error["type"], error["message"])
            except (OSError, ValueError, KeyError):
                return "rank %d failed (its error file is unreadable)" % rank
        if child.exitcode is not None and child.exitcode < 0:
            return "rank %d was killed by signal %d" % (rank, -child.exitcode)
        if child.exitcode not in (None, 0):
            return "rank %d ended with exit code %s" % (rank, child.exitcode)
    return None
