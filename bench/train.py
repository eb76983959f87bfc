"""The benchmark itself, top to bottom: set up, train N epochs timing every phase, evaluate."""
from __future__ import annotations

import hashlib
import random
import statistics
from time import perf_counter

import torch
from torch import nn

from bench import compat, data, fingerprint, memory, result
from bench.model import LeNet
from bench.pipelines import PIPELINES
from bench.timing import PhaseClock


class DeviceUnavailable(Exception):
    """--device cuda on a machine or container where torch sees no GPU."""


def select_device(name):
    if name == "cuda":
        if not torch.cuda.is_available():
            why = ("this torch is a CPU-only build" if torch.version.cuda is None
                   else "torch %s was built for CUDA %s but sees no GPU (no --gpus, or no driver)"
                   % (torch.__version__, torch.version.cuda))
            raise DeviceUnavailable("--device cuda: %s" % why)
        return torch.device("cuda", 0)
    return torch.device("cpu")


def load_data(config):
    if config["synthetic"]:
        return data.synthetic(config["seed"], limit=config["limit"],
                              limit_test=config["limit_test"])
    return data.load_cifar(config["data"], config["limit"], config["limit_test"])


def weights_sha256(model):
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        raw = tensor.detach().cpu().contiguous().flatten().view(torch.uint8)
        digest.update(name.encode() + b"\0" + bytes(raw.tolist()))
    return digest.hexdigest()


def evaluate(model, pipeline, device, autocast, channels_last):
    """Test accuracy; the argmax counts stay on the device until the one .item() at the end."""
    model.eval()
    correct = torch.zeros((), dtype=torch.int64, device=device)
    total = 0
    with torch.no_grad():
        for images, labels in pipeline.test_batches():
            images = images.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            if channels_last:
                images = images.contiguous(memory_format=torch.channels_last)
            with autocast():
                outputs = model(images)
            correct += (outputs.argmax(1) == labels).sum()
            total += labels.shape[0]
    model.train()
    return correct.item() / max(total, 1)


def run(config, record):
    """Train and fill ``record`` in place (so a failure keeps the epochs that finished)."""
    device = select_device(config["device"])
    if config["deterministic"]:
        compat.make_deterministic()
    torch.backends.cudnn.benchmark = bool(config["cudnn_benchmark"]) and not config["deterministic"]
    if config["threads"]:
        torch.set_num_threads(config["threads"])
    random.seed(config["seed"])
    torch.manual_seed(config["seed"])
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    record["env"] = fingerprint.collect(device)

    # The tutorial's hyper-parameters are the CLI's defaults (bench/cli.py), in one place.
    batch_size, accumulate = config["batch_size"], config["accumulate"]
    autocast = compat.autocast_factory(device, config["amp"])
    scaler = compat.grad_scaler(device, config["amp"])
    train_set, test_set = load_data(config)
    pipeline = PIPELINES[config["pipeline"]](train_set, test_set, device, batch_size,
                                             config["workers"], config["seed"])
    net = LeNet().to(device)
    if config["channels_last"]:
        net = net.to(memory_format=torch.channels_last)
    model = compat.compile_model(net, config["compile"])
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(net.parameters(), lr=config["lr"], momentum=config["momentum"])
    clock = PhaseClock(cuda=device.type == "cuda")
    forward_dtype = None

    for epoch in range(config["epochs"]):
        loss_sum = torch.zeros((), device=device)
        steps = samples = 0
        optimizer.zero_grad(set_to_none=True)
        start = perf_counter()
        clock.start_epoch()
        for images, labels in pipeline.train_batches():
            clock.mark("data")
            images = images.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            if config["channels_last"]:
                images = images.contiguous(memory_format=torch.channels_last)
            clock.mark("h2d")
            with autocast():
                outputs = model(images)
                loss = criterion(outputs, labels)
            if forward_dtype is None:
                # What autocast did, not what was asked: bfloat16 proves --amp bf16 ran.
                forward_dtype = str(outputs.dtype).replace("torch.", "")
            loss_sum += loss.detach().float()
            clock.mark("forward")
            # Dividing by 1 would be one more kernel per step for nothing.
            scaled = loss / accumulate if accumulate > 1 else loss
            (scaler.scale(scaled) if scaler is not None else scaled).backward()
            clock.mark("backward")
            steps += 1
            samples += labels.shape[0]
            if steps % accumulate == 0:
                _step(optimizer, scaler)
            clock.mark("optimizer")
        if steps % accumulate:  # the epoch's last, short accumulation group
            _step(optimizer, scaler)
            clock.mark("optimizer")
        phases = clock.resolve()
        wall = perf_counter() - start
        train_loss = result.finite_or_none((loss_sum / max(steps, 1)).item())
        test_start = perf_counter()
        accuracy = evaluate(model, pipeline, device, autocast, config["channels_last"])
        test_s = perf_counter() - test_start
        record["epochs"].append({
            "epoch": epoch, "wall_s": round(wall, 6), "samples": samples,
            "samples_per_s": round(samples / wall, 3), "phases_s": phases,
            "train_loss": train_loss, "test_acc": accuracy, "test_s": round(test_s, 6),
        })
        print("epoch %d/%d  %.2f s  %.0f img/s  loss %s  acc %.2f%%  (test %.2f s)"
              % (epoch + 1, config["epochs"], wall, samples / wall,
                 "%.4f" % train_loss if train_loss is not None else "not finite",
                 100 * accuracy, test_s), flush=True)

    record["memory"] = memory.snapshot(device)
    record["summary"] = summarise(record["epochs"], weights_sha256(net), forward_dtype)
    if config.get("save_weights"):
        torch.save(net.state_dict(), config["save_weights"])
    return record


def _step(optimizer, scaler):
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def summarise(epochs, weights_digest, forward_dtype):
    walls = [e["wall_s"] for e in epochs]
    steady = walls[1:] or walls
    rates = [e["samples_per_s"] for e in epochs]
    return {
        "epoch_s_median": statistics.median(steady) if steady else None,
        "first_epoch_s": walls[0] if walls else None,
        "samples_per_s": statistics.median(rates[1:] or rates) if rates else None,
        "final_test_acc": epochs[-1]["test_acc"] if epochs else None,
        "weights_sha256": weights_digest,
        "forward_dtype": forward_dtype,
    }
