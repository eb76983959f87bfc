"""The one workload contract: ``build(ctx)`` returns a dict, for the kit's own workloads and
the user's alike (docs/workloads.md, "Your own workload").

  model       an nn.Module (bench moves it to the device, wraps it for dp/ddp, compiles it)
  train       (inputs, targets): inputs a tensor, a tuple of tensors (model(*inputs)) or a
              dict of tensors (model(**inputs)); targets a tensor or None (the model computes
              its own loss from its inputs); every tensor with one row per sample
  test        (inputs, targets), the same way
  inputs      "images" for uint8 N x C x H x W images that the pipelines normalise as the
              tutorial does; "tensors" (the default) for inputs used as they are
  unit        what a sample is counted in on the page: "images", "tokens" or "samples"
              (default "samples"); units_per_sample: how many of them one sample is (default 1)
  quality     "accuracy" (default) or "loss": which figure the page leads with
  accuracy    whether test accuracy is computed (default: where quality is "accuracy"); a
              language model leads with its loss and may still score its next tokens. Without
              it accuracy is null and the outputs may have any shape
  loss        loss(outputs, targets) -> scalar, given the outputs as the model returns them
              (default: the model's own ``loss`` where its outputs carry one, as a Hugging
              Face model's do; else cross entropy over the last dim of a tensor)
  optimizer   optimizer(parameters) -> torch.optim.Optimizer (default: SGD with the run's lr
              and momentum, ``ctx.lr`` and ``ctx.momentum``)
  attention   "sdpa" or "explicit": how the model's attention ran, for the record (default
              none said)
  record      extra facts for the record's model section: {name: str, number, bool or None}
              under names the kit does not use itself

Accuracy, where computed, is the argmax over the last dimension of the outputs (a tensor, or
their ``logits`` attribute or key) against the targets, or where there are none, the inputs'
``labels``. A build() that raises, outputs that cannot be scored or given a loss each end the
cell with one sentence (the traceback, where there is one, goes to the cell's log).

Where a workload comes from (the kit's modules beside this one, or the user's file, checked
against the host's digest first: bench.workloads.user) is the only difference between the
two: this module checks and trains both the same way, so a built-in passes every check a
user's workload does.
"""
from __future__ import annotations

import traceback

import torch
from torch import nn
from torch.nn import functional as F

from bench import batches, datasets
from bench.errors import EXPECTED, UnsupportedOption, WorkloadError
from bench.messages import first_line
from bench.workloads import UNITS, flops

INPUTS = ("images", "tensors")
QUALITIES = ("accuracy", "loss")
ATTENTION = ("sdpa", "explicit")
KEYS = ("model", "train", "test", "inputs", "unit", "units_per_sample", "quality", "accuracy",
        "loss", "optimizer", "attention", "record")
# The record's model section as the kit writes it (a file's name and function too): a
# workload's own facts go beside these.
MODEL_KEYS = ("name", "parameters", "flops_per_image", "flops", "unit", "units_per_sample",
              "quality", "source", "sha256", "attention", "file", "function")
# Two samples, counted per sample: batch norm in training mode refuses a batch of one where a
# feature map is 1x1 (a timm ResNet-18 on 32x32 images was not counted).
FLOPS_BATCH = 2


class Context(object):
    """What build() is given."""

    def __init__(self, config, folder=None):
        self.workload = config["workload"]  # the name the matrix gives it
        self.seed = config["seed"]
        self.device = config["device"]
        self.limit = config["limit"]
        self.limit_test = config["limit_test"]
        self.synthetic = config["synthetic"]
        self.data_dir = config["data"]
        self.lr = config["lr"]
        self.momentum = config["momentum"]
        self.folder = folder  # where the workload's own files are (read-only)
        # NAME -> the path of a read-only input (its digest is the host's, in the config).
        self.inputs = {name: given["path"] for name, given in
                       sorted((config.get("inputs") or {}).items())}

    def cifar10(self):
        """((train images, labels), (test images, labels)): uint8 N x 3 x 32 x 32 and int64,
        with the run's limits; the seeded stand-in on synthetic data."""
        if self.synthetic or not self.data_dir:
            return datasets.synthetic(self.seed, limit=self.limit, limit_test=self.limit_test)
        return datasets.load_cifar(self.data_dir, self.limit, self.limit_test)


def cross_entropy(outputs, targets):
    """Mean cross entropy over every position: (N, C) against (N,), or (N, T, V) against
    (N, T) for a language model."""
    if outputs.dim() == 2:
        return F.cross_entropy(outputs, targets)
    return F.cross_entropy(outputs.reshape(-1, outputs.shape[-1]), targets.reshape(-1))


def _shape(part):
    return batches.shape(part)


def _named(name):
    """How a sentence names one tensor of a pair: inputs, inputs[1], input_ids, targets."""
    return "inputs" + name if not name or name.startswith("[") else name


def _check_pair(where, part, pair):
    """(inputs, targets) of train or test, in one sentence where they do not fit."""
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        raise WorkloadError("%s %s: expected (inputs, targets), got %s"
                            % (where, part, _shape(pair) if isinstance(pair, torch.Tensor)
                               else "a %s" % type(pair).__name__
                               if not isinstance(pair, (tuple, list))
                               else "%d items" % len(pair)))
    inputs, targets = pair
    if batches.form(inputs) is None:
        raise WorkloadError("%s %s: inputs are %s; they are a tensor, a tuple of tensors "
                            "(model(*inputs)) or a dict of tensors by name (model(**inputs))"
                            % (where, part, _shape(inputs)))
    if targets is not None and not isinstance(targets, torch.Tensor):
        raise WorkloadError("%s %s: targets are a %s; they are a tensor, or None where the "
                            "model computes its own loss" % (where, part,
                                                              type(targets).__name__))
    found = batches.tensors(inputs) + ([("targets", targets)] if targets is not None else [])
    for name, tensor in found:
        if tensor.dim() == 0:
            raise WorkloadError("%s %s: %s is a scalar; every tensor has one row per sample"
                                % (where, part, _named(name)))
    counts = sorted({t.shape[0] for _, t in found})
    if len(counts) == 1 and counts[0] > 0:
        return
    if isinstance(inputs, torch.Tensor) and targets is not None:
        said = "%d inputs for %d targets" % (inputs.shape[0], targets.shape[0])
    else:
        said = ", ".join("%s %d rows" % (_named(n), t.shape[0]) for n, t in found)
    raise WorkloadError("%s %s: %s (one row per sample in every tensor, at least one)"
                        % (where, part, said))


def _check_keys(where, built):
    if not isinstance(built, dict):
        raise WorkloadError("%s a %s, not a dict with model, train and test"
                            % (where, type(built).__name__))
    missing = [k for k in ("model", "train", "test") if k not in built]
    if missing:
        raise WorkloadError("%s no %s (keys: %s)" % (where, ", ".join(missing),
                                                     ", ".join(sorted(built)) or "none"))
    unknown = sorted(set(built) - set(KEYS))
    if unknown:
        raise WorkloadError("%s unknown key(s) %s (known: %s)"
                            % (where, ", ".join(unknown), ", ".join(sorted(KEYS))))
    if not isinstance(built["model"], nn.Module):
        raise WorkloadError("%s model: a %s, not a torch.nn.Module"
                            % (where, type(built["model"]).__name__))
    choices = {"inputs": INPUTS, "unit": UNITS, "quality": QUALITIES, "attention": ATTENTION}
    for key, allowed in choices.items():
        if key in built and built[key] not in allowed:
            raise WorkloadError("%s %s: %r (one of %s)" % (where, key, built[key],
                                                         ", ".join(allowed)))
    for key in ("loss", "optimizer"):
        if key in built and not callable(built[key]):
            raise WorkloadError("%s %s: not callable" % (where, key))


def _check_images(where, built):
    for part in ("train", "test"):
        images = built[part][0]
        if (not isinstance(images, torch.Tensor) or images.dtype != torch.uint8
                or images.dim() != 4):
            raise WorkloadError("%s %s: inputs 'images' are uint8 N x C x H x W (one tensor), "
                                "got %s %s" % (where, part, getattr(images, "dtype", "a"),
                                               _shape(images)))


def _check_record(where, extra):
    if not isinstance(extra, dict):
        raise WorkloadError("%s record: a %s, not a dict of facts by name"
                            % (where, type(extra).__name__))
    for name, value in sorted(extra.items(), key=lambda item: str(item[0])):
        if not isinstance(name, str) or name in MODEL_KEYS:
            raise WorkloadError("%s record: %r is the kit's own (its keys: %s)"
                                % (where, name, ", ".join(MODEL_KEYS)))
        if value is not None and not isinstance(value, (str, int, float, bool)):
            raise WorkloadError("%s record: %s is a %s (a string, number, bool or None)"
                                % (where, name, type(value).__name__))


def _scored(where, built):
    """Whether accuracy is computed: quality "accuracy" always, "loss" where asked."""
    quality = built.get("quality", "accuracy")
    accuracy = built.get("accuracy", quality == "accuracy")
    if not isinstance(accuracy, bool):
        raise WorkloadError("%s accuracy: %r (true or false)" % (where, accuracy))
    if quality == "accuracy" and not accuracy:
        raise WorkloadError("%s accuracy: false, but quality is \"accuracy\": say quality: "
                            "\"loss\"" % where)
    return accuracy


def checked(where, built):
    """The dict build() returned, every key checked, defaults filled in."""
    _check_keys(where, built)
    for part in ("train", "test"):
        _check_pair(where, part, built[part])
    inputs = built.get("inputs", "tensors")
    if inputs == "images":
        _check_images(where, built)
    units = built.get("units_per_sample", 1)
    if isinstance(units, bool) or not isinstance(units, int) or units < 1:
        raise WorkloadError("%s units_per_sample: %r (a whole number >= 1)" % (where, units))
    _check_record(where, built.get("record", {}))
    return dict(built, inputs=inputs, unit=built.get("unit", "samples"), units_per_sample=units,
                quality=built.get("quality", "accuracy"), accuracy=_scored(where, built),
                attention=built.get("attention"), record=dict(built.get("record", {})))


def _answers(inputs, targets):
    """What accuracy scores against: the targets, else the inputs' labels (a Hugging Face
    model takes them among its inputs)."""
    if targets is not None:
        return targets
    labels = inputs.get("labels") if isinstance(inputs, dict) else None
    return labels if isinstance(labels, torch.Tensor) else None


class Workload(object):
    """What bench.train asks of every workload: its data, model, loss, score and optimizer,
    and its record, from one build(ctx). ``build`` is called (once, when the run asks for
    the data: after seeding, so that the data and the model draw from the seeded RNG in
    build's order) with a Context; ``source`` is "builtin" or "file"."""

    def __init__(self, config, build, source="builtin", folder=None, sha256=None,
                 called="build()", extra=None):
        self.config = config
        self.name = config["workload"]
        self.source = source
        self.sha256 = sha256
        self._build_fn = build
        self._folder = folder
        self._called = called  # how a sentence names the function: "build() in mlp.py"
        self._where = "%s returned" % called.split(" in ")[0]
        self._extra = dict(extra or {})  # the record's facts of the source (file, function)
        self.built = None
        self._loss_of = None  # the loss, chosen from the first step's outputs

    # -- what the train loop reads once the workload is built
    @property
    def inputs(self):
        return self._ready()["inputs"]

    @property
    def unit(self):
        return self._ready()["unit"]

    @property
    def units_per_sample(self):
        return self._ready()["units_per_sample"]

    @property
    def quality(self):
        return self._ready()["quality"]

    @property
    def attention(self):
        return self._ready()["attention"]

    def _ready(self):
        if self.built is None:
            self._build()
        return self.built

    def _build(self):
        try:
            built = self._build_fn(Context(self.config, self._folder))
        except EXPECTED:  # ctx.cifar10() without the data set: the kit's own sentence
            raise
        except Exception as exc:
            traceback.print_exc()
            raise WorkloadError("%s raised %s: %s (traceback in the log)"
                                % (self._called, type(exc).__name__, first_line(exc)))
        self.built = checked(self._where, built)

    def data(self):
        """((train inputs, train targets), (test inputs, test targets)): builds the workload,
        then refuses the options that cannot apply to it."""
        built = self._ready()
        self.check_options()
        return tuple(built["train"]), tuple(built["test"])

    def model(self):
        return self._ready()["model"]

    def check_options(self):
        if self.config["channels_last"] and self.inputs != "images":
            raise UnsupportedOption("--channels-last is a memory layout of 4-D image batches; "
                                    "%s's inputs are %s" % (self.name, self.unit))

    # -- the train step and the test pass
    def loss(self, outputs, targets):
        if self._loss_of is not None:
            return self._loss_of(outputs, targets)
        self._check_outputs(outputs, targets)
        loss_of = self._choose_loss(outputs, targets)
        try:
            value = loss_of(outputs, targets)
        except WorkloadError:
            raise
        except Exception as exc:
            traceback.print_exc()
            raise WorkloadError("the loss of outputs %s and targets %s raised %s: %s"
                                % (_shape(outputs), _shape(targets), type(exc).__name__,
                                   first_line(exc)))
        if not isinstance(value, torch.Tensor) or value.numel() != 1:
            raise WorkloadError("the loss returned %s, not a scalar tensor"
                                % (_shape(value) if isinstance(value, torch.Tensor)
                                   else type(value).__name__))
        self._loss_of = loss_of
        return value

    def _choose_loss(self, outputs, targets):
        """The workload's loss as given; else the model's own, else cross entropy of a
        tensor. Chosen once: a model's outputs keep their form from step to step."""
        given = self.built.get("loss")
        if given is not None:
            return given
        if batches.own_loss(outputs) is not None:
            return lambda outputs, targets: batches.own_loss(outputs)
        if isinstance(outputs, torch.Tensor) and targets is not None:
            return cross_entropy
        raise WorkloadError(
            "the model returned %s%s and no loss: give build() a loss(outputs, targets), or "
            "return outputs with their own loss (a Hugging Face model given labels)"
            % (_shape(outputs), "" if targets is not None else " with no targets"))

    def hits(self, outputs, inputs, targets):
        """(right answers, answers) of one test batch, both counted on the device; None
        where the workload computes no accuracy."""
        if not self.built["accuracy"]:
            return None
        scores, answers = batches.logits(outputs), _answers(inputs, targets)
        return (scores.argmax(-1) == answers).sum(), answers.numel()

    def _check_outputs(self, outputs, targets):
        """The first step's outputs, in one sentence where they cannot be scored: accuracy
        takes the argmax over the last dimension of the outputs or their logits."""
        if not self.built["accuracy"]:
            return
        scores = batches.logits(outputs)
        if scores is None:
            raise WorkloadError("the model returned %s: accuracy reads a tensor or its logits "
                                "(an attribute or key), which these outputs lack; return "
                                "them, or say quality: \"loss\"" % _shape(outputs))
        answers = _answers(self.built["train"][0], targets)
        if answers is None:
            raise WorkloadError("accuracy needs targets, or inputs that hold labels: the "
                                "targets are None and the inputs %s have no labels; say "
                                "quality: \"loss\"" % _shape(self.built["train"][0]))
        # Without targets the answers are the whole set's labels: rows are not compared.
        fits = (scores.dim() == answers.dim() + 1 and scores.shape[1:-1] == answers.shape[1:]
                and (targets is None or scores.shape[0] == answers.shape[0]))
        if not fits:
            raise WorkloadError("the model's outputs %s do not fit targets %s: scoring takes "
                                "the argmax over the last dimension, so outputs are (N, "
                                "classes) for targets (N,), or (N, T, classes) for (N, T); "
                                "a regression says quality: \"loss\""
                                % (_shape(scores), _shape(answers)))

    def optimizer(self, parameters):
        make = self.built.get("optimizer")
        if make is None:
            return torch.optim.SGD(parameters, lr=self.config["lr"],
                                   momentum=self.config["momentum"])
        try:
            optimizer = make(parameters)
        except Exception as exc:
            traceback.print_exc()
            raise WorkloadError("optimizer() raised %s: %s" % (type(exc).__name__,
                                                               first_line(exc)))
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise WorkloadError("optimizer() returned a %s, not a torch.optim.Optimizer"
                                % type(optimizer).__name__)
        return optimizer

    # -- the record
    def example(self, batch=1):
        """One batch of the model's inputs as the train step sees them (for counting FLOPs)."""
        inputs = batches.select(self.built["train"][0], slice(0, batch))
        return inputs.float() if self.inputs == "images" else inputs

    def describe(self, net):
        """The record's model section: what was trained, its size, and FLOPs per sample."""
        counted = flops.count(net, self.example(FLOPS_BATCH))
        section = {"name": self.name, "parameters": sum(p.numel() for p in net.parameters()),
                   "flops_per_image": counted["forward"], "flops": counted,
                   "unit": self.unit, "units_per_sample": self.units_per_sample,
                   "quality": self.quality, "source": self.source, "sha256": self.sha256,
                   "attention": self.attention}
        section.update(self.built["record"])
        section.update(self._extra)
        return section
