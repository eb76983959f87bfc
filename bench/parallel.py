"""Data parallelism: one device, nn.DataParallel, or DistributedDataParallel.

none  one device (the tutorial).
dp    nn.DataParallel over the first --nproc visible GPUs: one process scatters each batch.
ddp   DistributedDataParallel with one process per device: NCCL on CUDA, gloo on CPU, where
      the "devices" are CPU processes sharing the cores (the threads are split between them).
      Rank 0 runs in this process and writes the one result; ranks 1.. are spawned children.
      The rendezvous is a FileStore in a temporary folder, since containers have no network;
      gloo and NCCL talk over the loopback interface.
      Across --nodes N, one bench per node meets the others at --rendezvous (bench.nodes):
      each runs --nproc ranks, the first node's first rank is rank 0, and the group forms
      through the first node's TCPStore, over the interface that reaches it.

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

from bench import errors, nodes, result
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
# [True] in the bench of a node after the first (bench.nodes): rank 0, on the first node,
# writes the cell's one result; this one says what it did on its output.
SECONDARY_NODE = []


def secondary_node():
    return bool(SECONDARY_NODE and SECONDARY_NODE[0])


class World(object):
    """Who this process is in the run: rank, world size, backend, and its device."""

    def __init__(self, mode, size, rank=0, backend=None, device_index=None, done_marker=None,
                 nodes=1, rendezvous=None):
        self.mode = mode
        self.size = size  # every rank of every node
        self.rank = rank
        self.backend = backend
        self.device_index = device_index
        self.done_marker = done_marker  # a spawned rank's "my work is done" file
        self.nodes = nodes
        self.rendezvous = rendezvous  # (host, port) where the nodes meet; None: one node
        self.meeting = None  # this node's bench.nodes.Meeting, once met (its first rank)
        self.node_rank = 0

    @property
    def per_node(self):
        return self.size // self.nodes

    @property
    def distributed(self):
        return self.mode == "ddp"

    @property
    def main(self):
        return self.rank == 0

    def record(self, batch_size, threads):
        """The result's ``parallel`` section (per-device and global batch, threads per rank)."""
        section = {"mode": self.mode, "world_size": self.size, "backend": self.backend,
                   "per_device_batch": batch_size, "global_batch": batch_size * self.size,
                   "threads_per_rank": threads}
        if self.nodes > 1:
            section.update(nodes=self.nodes, ranks_per_node=self.per_node,
                           rendezvous="%s:%d" % self.rendezvous,
                           interface=self.meeting.interface if self.meeting else None)
        return section


def plan(config, rendezvous=None):
    """The world a run asks for, or a clear UnsupportedOption before anything is built."""
    mode, nproc, device = config["parallel"], config["nproc"], config["device"]
    if config.get("nodes", 1) > 1 and rendezvous is None:
        raise UnsupportedOption("--nodes %d needs --rendezvous HOST:PORT (the first node's "
                                "address and a free port)" % config["nodes"])
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
        count = config.get("nodes", 1)
        return World("ddp", size * count, 0, backend, 0 if device == "cuda" else None,
                     nodes=count, rendezvous=rendezvous)
    return World("dp", size)


def split_threads(total, world):
    """CPU ranks share the cores: each gets its share of the node's threads (at least one)."""
    return max(1, total // world.per_node) if world.distributed else total


def _loopback():
    # Containers run with --network none: only lo exists, and both libraries must use it.
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")


def join_group(world, store_path):
    """Join the process group: through a FileStore within a node, through the first node's
    TCPStore across nodes (each node's first rank holds its meeting's; the node's other
    ranks are clients of the same)."""
    import torch.distributed as dist

    meeting = None
    if world.nodes > 1:
        meeting = world.meeting or nodes.Meeting(
            nodes.client(world.rendezvous, RENDEZVOUS_TIMEOUT_S), world.node_rank,
            world.rendezvous[0], world.rendezvous[1], None)
        store = dist.PrefixStore("envbench/group", meeting.store)
    else:
        _loopback()
        store = dist.FileStore(store_path, world.size)
    if world.backend == "nccl":
        torch.cuda.set_device(world.device_index)
    try:
        dist.init_process_group(world.backend, store=store, rank=world.rank,
                                world_size=world.size,
                                timeout=datetime.timedelta(seconds=RENDEZVOUS_TIMEOUT_S))
    except RuntimeError as exc:
        if meeting is None:
            raise
        # Across nodes, the likely reason is a node that never came: say how many did.
        raise RankFailed("the ranks did not form a group within %d s: %d of %d nodes met at "
                         "%s:%d (%s)" % (RENDEZVOUS_TIMEOUT_S, nodes.met(meeting),
                                         world.nodes, meeting.host, meeting.port,
                                         first_line(exc, 200)))


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


def _child(config, rank, size, store_path, folder, train_fn, place=(1, 0, None)):
    """Entry point of a node's ranks after its first (spawned): train, and leave an error
    file if it fails. ``rank`` is the local one; ``place`` is (nodes, this node's rank,
    where the nodes met)."""
    count, node_rank, rendezvous = place
    world = World("ddp", size, node_rank * (size // count) + rank,
                  "nccl" if config["device"] == "cuda" else "gloo",
                  rank if config["device"] == "cuda" else None,
                  os.path.join(folder, "rank%d.done" % rank), nodes=count,
                  rendezvous=rendezvous)
    world.node_rank = node_rank
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
    if world.nodes > 1:  # before the node's other ranks start: they inherit its interface
        world.meeting = nodes.meet(world.rendezvous, world.nodes, RENDEZVOUS_TIMEOUT_S)
        world.node_rank = world.meeting.node_rank
        world.rank = world.node_rank * world.per_node
        SECONDARY_NODE[:] = [world.node_rank > 0]
    try:
        for rank in range(1, world.per_node):
            child = context.Process(target=_child,
                                    args=(config, rank, world.size, store_path, folder,
                                          train_fn,
                                          (world.nodes, world.node_rank, world.rendezvous)))
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
