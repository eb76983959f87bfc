"""The benchmark itself, top to bottom: set up, train N epochs timing every phase, evaluate.

What is trained (data, model, loss, optimizer) is the run's workload (bench.workloads); the
loop, its clock and everything around it are the same for every workload."""
from __future__ import annotations

import contextlib
import hashlib
import os
import random
import tempfile
from time import perf_counter

import torch

from bench import (
    batches,
    compat,
    fingerprint,
    interrupts,
    memory,
    nodes,
    parallel,
    probe,
    profiling,
    quantize,
    result,
    timing,
    tracefile,
    workloads,
)
from bench.errors import DeviceUnavailable, UnsupportedOption, WorkloadError
from bench.pipelines import PIPELINES
from bench.summary import summarise
from bench.timing import NoClock, PhaseClock

# How a progress line names a unit per second.
RATE = {"images": "img/s", "tokens": "tok/s", "samples": "samples/s"}


def select_device(name):
    if name == "cuda":
        if not torch.cuda.is_available():
            why = ("this torch is a CPU-only build" if torch.version.cuda is None
                   else "torch %s was built for CUDA %s but sees no GPU (no --gpus, or no driver)"
                   % (torch.__version__, torch.version.cuda))
            raise DeviceUnavailable("--device cuda: %s" % why)
        check_kernels(0)
        return torch.device("cuda", 0)
    return torch.device("cpu")


def _arch(flag):
    """'sm_86' -> (8, 6); 'sm_100a' -> (10, 0); 'compute_90' -> (9, 0)."""
    digits = "".join(c for c in flag.split("_", 1)[1] if c.isdigit())
    return int(digits[:-1]), int(digits[-1])


def check_kernels(index):
    """The first kernel would fail with 'no kernel image is available' on a GPU this torch
    was not compiled for: say so in one sentence before anything runs. A cubin for sm_XY
    runs on XY..X9; PTX for XY is compiled by the driver for XY and newer."""
    flags = torch.cuda.get_arch_list() if hasattr(torch.cuda, "get_arch_list") else []
    if not flags:
        return  # a build that does not say: let the first kernel speak
    capability = tuple(torch.cuda.get_device_capability(index))
    cubins = [_arch(f) for f in flags if f.startswith("sm_")]
    ptx = [_arch(f) for f in flags if f.startswith("compute_")]
    if any(m == capability[0] and n <= capability[1] for m, n in cubins) or any(
            p <= capability for p in ptx):
        return
    raise DeviceUnavailable("torch %s has kernels for %s; this %s is sm_%d%d"
                            % (torch.__version__, " ".join(flags),
                               torch.cuda.get_device_name(index), capability[0],
                               capability[1]))


def weights_sha256(model):
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        raw = tensor.detach().cpu().contiguous().flatten().view(torch.uint8)
        digest.update(name.encode() + b"\0" + bytes(raw.tolist()))
    return digest.hexdigest()


def evaluate(model, pipeline, device, autocast, channels_last, workload, non_blocking=True):
    """(test accuracy, mean test loss): the workload's own scoring (bench.workloads.interface:
    the argmax over the outputs' last dimension against the targets; None where the
    workload computes no accuracy) and its loss; both stay on the device until the one
    .item() each at the end. The loss is null where it was not finite."""
    model.eval()
    correct = torch.zeros((), dtype=torch.int64, device=device)
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    total = scored = 0
    judged = True
    with torch.no_grad():
        for inputs, targets in pipeline.test_batches():
            interrupts.check()
            inputs = batches.move(inputs, device, non_blocking)
            targets = batches.move(targets, device, non_blocking)
            if channels_last:
                inputs = batches.channels_last(inputs)
            with autocast():
                outputs = batches.call(model, inputs)
            hits = workload.hits(outputs, inputs, targets)
            if hits is None:
                judged = False
            else:
                correct += hits[0]
                scored += hits[1]
            count = targets.numel() if targets is not None else batches.rows(inputs)
            loss = workload.loss(batches.as_float(outputs), targets)
            loss_sum += loss.detach().double() * count
            total += count
    model.train()
    accuracy = correct.item() / max(scored, 1) if judged else None
    return accuracy, result.finite_or_none(loss_sum.item() / max(total, 1))


def check_copy_options(config):
    """Pinned memory and asynchronous copies exist for host-to-GPU copies; asking for them on
    a CPU run would measure nothing, so it is a clear error rather than a silent no-op."""
    if config["device"] == "cuda":
        return
    for key, flag in (("pin_memory", "--pin-memory"), ("non_blocking", "--non-blocking")):
        if config[key] == "on":
            raise UnsupportedOption("%s on needs --device cuda (it speeds host-to-GPU "
                                           "copies; a CPU run makes none)" % flag)


def run(config, record, rendezvous=None):
    """Train and fill ``record`` in place (so a failure keeps the epochs that finished).
    ``rendezvous``: (host, port) where the benches of a --nodes run meet."""
    check_copy_options(config)
    world = parallel.plan(config, rendezvous)
    if world.distributed:
        parallel.run_ddp(config, record, world, train)
    else:
        train(config, record, world)
    return record


def train(config, record, world, store_path=None):
    """One rank's run (the only one outside ddp), in its stages. Rank 0 fills ``record``;
    under ddp the others train their shard and send rank 0 their epoch figures."""
    run = setup(config, record, world, store_path)
    build(run, record)
    run.micro_step = train_step(run)
    for epoch in range(config["epochs"]):
        interrupts.check()
        train_epoch(run, record, epoch)
    for measure in AFTER_RUN:
        interrupts.check()
        measure(run, record)
    parallel.barrier(world)  # the others wait for rank 0's test pass before leaving
    parallel.finish(world, run.model, run.wrapped)
    return record


class Run(object):
    """What one rank's run holds between its stages: set by setup() and build(), read by the
    train step, the epoch loop and the after-run measurements."""

    def __init__(self, config, world, device, workload):
        self.config = config
        self.world = world
        self.device = device
        self.workload = workload
        self.quantize_eval = config["quantize_eval"] != "off"
        self.accumulate = config["accumulate"]
        self.non_blocking = config["non_blocking"] == "on"
        # build():
        self.pipeline = self.net = self.wrapped = self.model = self.test_model = None
        self.optimizer = self.autocast = self.scaler = self.clock = None
        self.common_steps = 0
        # train_step(), the epochs and the after-run measurements:
        self.micro_step = None
        self.forward_dtype = None  # what autocast did, not what was asked
        self.device_peaks = None


def setup(config, record, world, store_path):
    """The device, determinism, the workload (built after seeding), threads, seeds, the peak
    memory counters, the stack's fingerprint and, under ddp, the rendezvous."""
    if world.distributed and world.device_index is not None:
        device = torch.device("cuda", world.device_index)
        select_device("cuda")
    else:
        device = select_device(config["device"])
    if config["deterministic"]:
        compat.make_deterministic()
    torch.backends.cudnn.benchmark = bool(config["cudnn_benchmark"]) and not config["deterministic"]
    workload = workloads.load(config)
    threads = parallel.split_threads(config["threads"] or torch.get_num_threads(), world)
    torch.set_num_threads(threads)
    random.seed(config["seed"])
    torch.manual_seed(config["seed"])
    if device.type == "cuda":
        torch.cuda.set_device(device)
        for index in _trained_devices(device, world):
            torch.cuda.reset_peak_memory_stats(index)
    record["env"] = fingerprint.collect(device)
    record["parallel"] = world.record(config["batch_size"], threads)
    run = Run(config, world, device, workload)
    if run.quantize_eval:
        quantize.quantize_dynamic_fn()  # a clear error now, not after the training
    if world.distributed:
        joined = perf_counter()
        parallel.join_group(world, store_path)
        record["parallel"]["rendezvous_s"] = round(perf_counter() - joined, 6)
        if world.nodes > 1:
            _across_nodes(world, device, record)
    return run


def _across_nodes(world, device, record):
    """What rank 0 records of a run across nodes: each node's host name, and the bus
    bandwidth a short all-reduce measures between them before the first epoch."""
    bandwidth = nodes.bus_bandwidth(world, device)  # every rank takes part
    if world.main:
        record["parallel"]["hosts"] = nodes.hosts(world.meeting, world.nodes)
        record["parallel"]["allreduce"] = bandwidth


def build(run, record):
    """The workload's build(ctx) (its data, then its model, in the order they draw from the
    seeded RNG; then the options that cannot apply to it are refused), the pipeline; then
    the wrappers (channels_last, dp/ddp, compile), the optimizer and the phase clock. The
    tutorial's hyper-parameters are the CLI's defaults (bench/cli.py), in one place."""
    config, world, device, workload = run.config, run.world, run.device, run.workload
    loader_batch = config["batch_size"] * (world.size if world.mode == "dp" else 1)
    run.autocast = compat.autocast_factory(device, config["amp"])
    run.scaler = compat.grad_scaler(device, config["amp"])
    train_set, test_set = workload.data()
    run.pipeline = PIPELINES[config["pipeline"]](
        train_set, test_set, device, loader_batch, config["workers"], config["seed"],
        pin_memory=config["pin_memory"] == "on",
        shard=(world.rank, world.size) if world.distributed else None,
        inputs=workload.inputs)
    record["parallel"]["repeated_samples_per_epoch"] = run.pipeline.repeated_per_epoch()
    net = workload.model().to(device)
    if config["channels_last"]:
        net = net.to(memory_format=torch.channels_last)
    run.net = net
    run.wrapped = parallel.wrap(net, world, run.autocast if config["amp"] != "off" else None)
    run.model = compat.compile_model(run.wrapped, config["compile"])
    # Outside ddp the test pass uses the model as trained (compiled too); under ddp rank 0
    # tests alone, so it calls the network itself, which needs no other rank.
    run.test_model = net if world.distributed else run.model
    run.optimizer = workload.optimizer(net.parameters())
    run.clock = PhaseClock(cuda=device.type == "cuda")
    # Every micro-step syncs outside ddp's accumulation: no_sync is never asked for.
    run.common_steps = run.pipeline.common_steps() \
        if world.mode == "ddp" and run.accumulate > 1 else 0


def train_step(run):
    """The train step, the same in the timed epochs and in the profile window: a function
    over the run's parts, bound once here so the timed loop reads no attribute of ``run``."""
    config, world, device = run.config, run.world, run.device
    model, wrapped, optimizer, scaler = run.model, run.wrapped, run.optimizer, run.scaler
    criterion, autocast = run.workload.loss, run.autocast
    accumulate, common_steps, non_blocking = run.accumulate, run.common_steps, run.non_blocking
    channels_last = config["channels_last"]

    def micro_step(inputs, targets, index, clock, loss_sum):
        """One micro-step: copy, forward, backward, and the optimizer where an accumulation
        group ends. Returns whether it synchronised gradients and the forward's output dtype
        (None where the outputs hold no floating-point tensor)."""
        inputs = batches.move(inputs, device, non_blocking)
        targets = batches.move(targets, device, non_blocking)
        if channels_last:
            inputs = batches.channels_last(inputs)
        clock.mark("h2d")
        # Under ddp a micro-step inside an accumulation group keeps its gradients
        # local: one all-reduce per optimizer step, not one per micro-step.
        sync = parallel.syncs_gradients(index + 1, accumulate, common_steps)
        with parallel.gradient_sync(wrapped, world, sync):
            with autocast():
                outputs = batches.call(model, inputs)
                loss = criterion(outputs, targets)
            loss_sum += loss.detach().float()
            clock.mark("forward")
            # Dividing by 1 would be one more kernel per step for nothing.
            scaled = loss / accumulate if accumulate > 1 else loss
            (scaler.scale(scaled) if scaler is not None else scaled).backward()
            clock.mark("backward")
        if (index + 1) % accumulate == 0:
            _step(optimizer, scaler)
        clock.mark("optimizer")
        floating = batches.floating(outputs)
        return sync, floating.dtype if floating is not None else None

    return micro_step


def train_epoch(run, record, epoch):
    """One timed epoch, then (rank 0) its test pass and its entry in the record."""
    world, clock, accumulate = run.world, run.clock, run.accumulate
    micro_step, optimizer, scaler = run.micro_step, run.optimizer, run.scaler
    loss_sum = torch.zeros((), device=run.device)
    steps = samples = grad_syncs = 0
    forward_dtype = run.forward_dtype
    optimizer.zero_grad(set_to_none=True)
    parallel.barrier(world)  # every rank starts the epoch's clock together
    start = perf_counter()
    clock.start_epoch()
    # A rank whose shard ran out early keeps answering the others' gradient all-reduces.
    with (run.wrapped.join() if world.distributed else contextlib.nullcontext()):
        for inputs, targets in run.pipeline.train_batches(epoch):
            interrupts.check()  # a SIGTERM whose raise was swallowed ends the run here
            clock.mark("data")
            sync, dtype = micro_step(inputs, targets, steps, clock, loss_sum)
            if forward_dtype is None and dtype is not None:
                # What autocast did, not what was asked: bfloat16 proves --amp bf16 ran.
                forward_dtype = str(dtype).replace("torch.", "")
            steps += 1
            grad_syncs += sync
            samples += batches.rows(inputs)
        if steps % accumulate:  # the epoch's last, short accumulation group
            _step(optimizer, scaler)
            clock.mark("optimizer")
    clock.synchronize()
    wall = perf_counter() - start
    run.forward_dtype = forward_dtype
    phases = clock.resolve()
    gathered = parallel.gather(world, [wall, samples, steps, grad_syncs]
                               + [phases[p] for p in result.PHASES])
    ranks = [{"rank": rank, "wall_s": round(row[0], 6), "samples": int(row[1]),
              "steps": int(row[2]), "grad_syncs": int(row[3]),
              "phases_s": {p: round(v, 6) for p, v in zip(result.PHASES, row[4:])}}
             for rank, row in enumerate(gathered)]
    if world.main:
        _record_epoch(run, record, epoch, ranks, (loss_sum / max(steps, 1)).item())


def _record_epoch(run, record, epoch, ranks, train_loss):
    """Rank 0: the epoch's test pass, its entry in the record and its progress line."""
    config, workload = run.config, run.workload
    train_loss = result.finite_or_none(train_loss)
    if train_loss is None and workload.source == "file":
        raise WorkloadError("the training loss was not finite (NaN or infinite) in epoch "
                            "%d of %d: the model diverged or the loss is broken"
                            % (epoch + 1, config["epochs"]))
    test_start = perf_counter()
    accuracy, test_loss = evaluate(run.test_model, run.pipeline, run.device, run.autocast,
                                   config["channels_last"], workload, run.non_blocking)
    test_s = perf_counter() - test_start
    # The epoch lasts as long as its slowest rank; its phases are that rank's.
    slowest = max(ranks, key=lambda r: r["wall_s"])
    wall = slowest["wall_s"]
    samples = sum(r["samples"] for r in ranks)
    entry = {
        "epoch": epoch, "wall_s": wall, "samples": samples,
        "samples_per_s": round(samples / wall, 3), "phases_s": slowest["phases_s"],
        "train_loss": train_loss, "test_acc": accuracy, "test_loss": test_loss,
        "test_s": round(test_s, 6),
    }
    if run.world.distributed:
        entry["ranks"] = ranks
    record["epochs"].append(entry)
    print("epoch %d/%d  %.2f s  %.0f %s  loss %s  %s  (test %.2f s)"
          % (epoch + 1, config["epochs"], wall,
             samples * workload.units_per_sample / wall, RATE[workload.unit],
             "%.4f" % train_loss if train_loss is not None else "not finite",
             "acc %.2f%%" % (100 * accuracy) if accuracy is not None
             else "test loss %s" % ("%.4f" % test_loss if test_loss is not None
                                    else "not finite"), test_s), flush=True)


# -- after the timed epochs, in this order (each ``measure(run, record)``): what a later one
# does (the meta-device FLOP count, the profiler, the probe) cannot reach an earlier figure.

def device_peaks(run, record):
    """Every rank: the GPU peaks, read before anything else allocates (a collective)."""
    run.device_peaks = _device_peaks(run.device, run.world)


def quantized_eval(run, record):
    if run.world.main and run.quantize_eval:
        record["quantized_eval"] = quantize.evaluate(run.net, run.pipeline.test_batches())


def memory_section(run, record):
    if run.world.main:
        record["memory"] = memory.snapshot(run.device_peaks)


def summary_section(run, record):
    if run.world.main:
        record["summary"] = summarise(record["epochs"], weights_sha256(run.net),
                                      run.forward_dtype)


def model_section(run, record):
    """After the memory snapshot: counting on the meta device may import torch's dispatch
    machinery (torch._dynamo: about 1 s and 70 MB), which is no part of the run's figures.
    No random draws, whatever the model does."""
    if run.world.main:
        with torch.random.fork_rng(devices=[]):
            record["model"] = run.workload.describe(run.net)


def saved_weights(run, record):
    if run.world.main and run.config.get("save_weights"):
        torch.save(run.net.state_dict(), run.config["save_weights"])


def profile_section(run, record):
    """Every rank, once every figure above is taken (bench.profiling)."""
    if run.config["profile"]:
        _profile(run.config, record, run.world, run.pipeline, run.optimizer, run.micro_step,
                 run.device)


def clock_section(run, record):
    """The clock's own cost, measured here: the bound of what it added."""
    if run.world.main:
        record["clock"] = timing.section(run.clock.marks, timing.cost(run.device.type == "cuda"))


def probe_section(run, record):
    if run.world.main and run.config["probe"] == "on":
        record["probe"] = probe.measure(run.device, run.config["amp"])


AFTER_RUN = (device_peaks, quantized_eval, memory_section, summary_section, model_section,
             saved_weights, profile_section, clock_section, probe_section)


def _profile(config, record, world, pipeline, optimizer, micro_step, device):
    """The operator profile (bench.profiling): rank 0 profiles a few more steps of the same
    loop; under ddp the other ranks run them with it, unprofiled."""
    scratch = torch.zeros((), device=device)
    endless = profiling.cycle(pipeline, config["epochs"])

    def step(inputs, targets, index):
        micro_step(inputs, targets, index, NoClock(), scratch)

    optimizer.zero_grad(set_to_none=True)
    trace = None
    try:
        if world.main:
            # A file of its own until the CLI puts it beside the result (trace_path).
            fd, trace = tempfile.mkstemp(prefix="envbench-", suffix=tracefile.TRACE_SUFFIX)
            os.close(fd)
            record["profile"] = profiling.window(step, endless, device, trace,
                                                 group=config["accumulate"],
                                                 adapt=not world.distributed)
        else:
            profiling.follow(step, endless, group=config["accumulate"])
    except Exception as exc:
        if world.distributed:
            raise  # the other ranks wait in the window's all-reduces: the cell fails
        # The timed figures are whole: the cell stays ok and says what the window lacked.
        record["profile"] = profiling.failed(exc)
        if trace is not None and os.path.exists(trace):
            os.unlink(trace)
    finally:
        endless.close()  # a classic loader's workers end here, not at exit
    optimizer.zero_grad(set_to_none=True)


def _trained_devices(device, world):
    """The CUDA devices this process trains on: dp's replicas are all its own."""
    if world.mode == "dp":
        return list(range(world.size))
    return [device.index if device.index is not None else torch.cuda.current_device()]


def _device_peaks(device, world):
    """{device index: (allocated, reserved)} of every device the run trained on, on rank 0;
    None off CUDA. Under ddp each rank reads its own and rank 0 gathers them (a collective:
    every rank calls this)."""
    if device.type != "cuda":
        return None
    indices = _trained_devices(device, world)
    peaks = memory.gpu_peaks(indices)
    if not world.distributed:
        return {index: tuple(peak) for index, peak in zip(indices, peaks)}
    rows = parallel.gather(world, [indices[0]] + peaks[0])
    return {int(row[0]): (int(row[1]), int(row[2])) for row in rows}


def _step(optimizer, scaler):
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
