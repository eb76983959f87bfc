"""The user's own workload: a function in a file or folder beside the matrix, mounted read-only.

The contract (docs/workloads.md, "Your own workload"): ``build(ctx)`` returns a dict with

  model       an nn.Module (bench moves it to the device, wraps it for dp/ddp, compiles it)
  train       (inputs, targets): inputs a tensor, a tuple of tensors (model(*inputs)) or a
              dict of tensors (model(**inputs)); targets a tensor or None (the model computes
              its own loss from its inputs); every tensor with one row per sample
  test        (inputs, targets), the same way
  inputs      "images" for uint8 N x C x H x W images that the pipelines normalise as the
              tutorial does; "tensors" (the default) for inputs used as they are
  unit        what a sample is counted in on the page: "images", "tokens" or "samples"
              (default "samples"); units_per_sample: how many of them one sample is (default 1)
  quality     "accuracy" (default) or "loss": which figure the page leads with; with "loss"
              no accuracy is computed (null) and the outputs may have any shape
  loss        loss(outputs, targets) -> scalar, given the outputs as the model returns them
              (default: cross entropy over the last dim of a tensor; the model's own
              ``loss`` where its outputs carry one, as a Hugging Face model's do)
  optimizer   optimizer(parameters) -> torch.optim.Optimizer (default: SGD with the
              matrix's lr and momentum)

``ctx`` carries the run's seed, device name, limits, ``ctx.inputs`` (the matrix's inputs of
this workload by name: the path of each read-only file or folder, e.g. pretrained weights to
give from_pretrained), and ``ctx.cifar10()``: CIFAR-10 as bench reads it, or its seeded
stand-in when the cell runs on synthetic data.

Accuracy, where asked, is the argmax over the last dimension of the outputs (a tensor, or
their ``logits`` attribute or key) against the targets, or where there are none, the inputs'
``labels``. A missing file or function, a build() that raises, outputs that cannot be scored
or given a loss, and a loss that is not finite each end the cell with one sentence (the
traceback, where there is one, goes to the cell's log); the other cells go on.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import traceback

import torch
from torch import nn

from bench import batches, datasets, workloads
from bench.errors import WorkloadError
from bench.messages import first_line
from bench.workloads.base import Workload, cross_entropy

MODULE_NAME = "envbench_workload"
INPUTS = ("images", "tensors")
QUALITIES = ("accuracy", "loss")


class Context(object):
    """What build() is given."""

    def __init__(self, config, folder):
        self.seed = config["seed"]
        self.device = config["device"]
        self.limit = config["limit"]
        self.limit_test = config["limit_test"]
        self.synthetic = config["synthetic"]
        self.data_dir = config["data"]
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


def _shape(part):
    return batches.shape(part)


def _import(path):
    """The workload's module: a .py file, or a folder that is a package (its __init__.py)."""
    if os.path.isdir(path):
        init = os.path.join(path, "__init__.py")
        if not os.path.isfile(init):
            raise WorkloadError("%s is a folder without __init__.py: a folder workload is a "
                                "package whose __init__.py defines the function" % path)
        spec = importlib.util.spec_from_file_location(MODULE_NAME, init,
                                                      submodule_search_locations=[path])
    else:
        if not os.path.isfile(path):
            raise WorkloadError("%s does not exist in the container (was the workload "
                                "mounted?)" % path)
        spec = importlib.util.spec_from_file_location(MODULE_NAME, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[MODULE_NAME] = module  # a package's modules import each other through it
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        traceback.print_exc()
        raise WorkloadError("importing %s failed: %s: %s (traceback in the log)"
                            % (os.path.basename(path), type(exc).__name__, first_line(exc)))
    return module


def _answers(inputs, targets):
    """What accuracy scores against: the targets, else the inputs' labels (a Hugging Face
    model takes them among its inputs)."""
    if targets is not None:
        return targets
    labels = inputs.get("labels") if isinstance(inputs, dict) else None
    return labels if isinstance(labels, torch.Tensor) else None


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


class UserWorkload(Workload):
    source = "file"

    def __init__(self, config):
        super().__init__(None, config)
        self.path = config["workload_file"]
        self.function = config["workload_function"] or "build"
        self.sha256 = workloads.digest(self.path) if os.path.exists(self.path) else None
        expected = config.get("workload_sha256")
        if self.sha256 is None:
            raise WorkloadError("%s does not exist in the container (was the workload "
                                "mounted?)" % self.path)
        if expected and expected != self.sha256:
            raise WorkloadError("%s changed since the host hashed it (sha256 %s, the cell "
                                "expects %s): run again" % (self.path, self.sha256[:12],
                                                           expected[:12]))
        stray = workloads.stray_bytecode(self.path) if expected else None
        if stray is not None:
            raise WorkloadError("%s/%s holds bytecode that appeared after the host hashed the "
                                "folder: Python could load it in place of the source; run "
                                "again" % (self.path, stray))
        for name, given in sorted((config.get("inputs") or {}).items()):
            if not os.path.exists(given["path"]):
                raise WorkloadError("input %s: %s does not exist in the container (was it "
                                    "mounted?)" % (name, given["path"]))
        self.built = None
        self.checked = False

    def _build(self):
        module = _import(self.path)
        fn = getattr(module, self.function, None)
        if not callable(fn):
            defined = sorted(n for n, v in vars(module).items()
                             if callable(v) and not n.startswith("_")
                             and getattr(v, "__module__", None) == MODULE_NAME)
            raise WorkloadError("%s defines no function %r (it defines: %s)"
                                % (os.path.basename(self.path), self.function,
                                   ", ".join(defined) or "nothing callable"))
        folder = self.path if os.path.isdir(self.path) else os.path.dirname(self.path)
        try:
            built = fn(Context(self.config, folder))
        except Exception as exc:
            traceback.print_exc()
            raise WorkloadError("%s() in %s raised %s: %s (traceback in the log)"
                                % (self.function, os.path.basename(self.path),
                                   type(exc).__name__, first_line(exc)))
        self.built = self._checked(built)

    def _checked(self, built):
        """The dict build() returned, every key checked, defaults filled in."""
        where = "%s() returned" % self.function
        if not isinstance(built, dict):
            raise WorkloadError("%s a %s, not a dict with model, train and test"
                                % (where, type(built).__name__))
        missing = [k for k in ("model", "train", "test") if k not in built]
        if missing:
            raise WorkloadError("%s no %s (keys: %s)" % (where, ", ".join(missing),
                                                         ", ".join(sorted(built)) or "none"))
        known = {"model", "train", "test", "inputs", "unit", "units_per_sample", "quality",
                 "loss", "optimizer"}
        unknown = sorted(set(built) - known)
        if unknown:
            raise WorkloadError("%s unknown key(s) %s (known: %s)"
                                % (where, ", ".join(unknown), ", ".join(sorted(known))))
        if not isinstance(built["model"], nn.Module):
            raise WorkloadError("%s model: a %s, not a torch.nn.Module"
                                % (where, type(built["model"]).__name__))
        for part in ("train", "test"):
            _check_pair(where, part, built[part])
        choices = {"inputs": INPUTS, "unit": workloads.UNITS, "quality": QUALITIES}
        for key, allowed in choices.items():
            if key in built and built[key] not in allowed:
                raise WorkloadError("%s %s: %r (one of %s)" % (where, key, built[key],
                                                             ", ".join(allowed)))
        self.inputs = built.get("inputs", "tensors")
        if self.inputs == "images":
            for part in ("train", "test"):
                images = built[part][0]
                if (not isinstance(images, torch.Tensor) or images.dtype != torch.uint8
                        or images.dim() != 4):
                    raise WorkloadError("%s %s: inputs 'images' are uint8 N x C x H x W "
                                        "(one tensor), got %s %s" % (
                                            where, part, getattr(images, "dtype", "a"),
                                            _shape(images)))
        self.unit = built.get("unit", "samples")
        self.quality = built.get("quality", "accuracy")
        units = built.get("units_per_sample", 1)
        if isinstance(units, bool) or not isinstance(units, int) or units < 1:
            raise WorkloadError("%s units_per_sample: %r (a whole number >= 1)" % (where, units))
        self.units_per_sample = units
        for key in ("loss", "optimizer"):
            if key in built and not callable(built[key]):
                raise WorkloadError("%s %s: not callable" % (where, key))
        return built

    def data(self):
        if self.built is None:
            self._build()
        return tuple(self.built["train"]), tuple(self.built["test"])

    def model(self):
        if self.built is None:
            self._build()
        return self.built["model"]

    def loss(self, outputs, targets):
        if self.checked:
            return self._loss(outputs, targets)
        self.checked = True
        self._check_outputs(outputs, targets)
        try:
            value = self._loss(outputs, targets)
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
        return value

    def _loss(self, outputs, targets):
        """The user's loss as given; else the model's own, else cross entropy of a tensor."""
        given = self.built.get("loss")
        if given is not None:
            return given(outputs, targets)
        own = batches.own_loss(outputs)
        if own is not None:
            return own
        if isinstance(outputs, torch.Tensor) and targets is not None:
            return cross_entropy(outputs, targets)
        raise WorkloadError(
            "the model returned %s%s and no loss: give build() a loss(outputs, targets), or "
            "return outputs with their own loss (a Hugging Face model given labels)"
            % (_shape(outputs), "" if targets is not None else " with no targets"))

    def hits(self, outputs, inputs, targets):
        if self.quality != "accuracy":
            return None
        scores, answers = batches.logits(outputs), _answers(inputs, targets)
        return (scores.argmax(-1) == answers).sum(), answers.numel()

    def _check_outputs(self, outputs, targets):
        """The first step's outputs, in one sentence where they cannot be scored: accuracy
        (the workload's quality unless it says "loss") takes the argmax over the last
        dimension of the outputs or their logits."""
        if self.quality != "accuracy":
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
            return super().optimizer(parameters)
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

    def example(self, batch=1):
        inputs = batches.select(self.built["train"][0], slice(0, batch))
        return inputs.float() if self.inputs == "images" else inputs

    def describe_extra(self):
        return {"file": os.path.basename(self.path), "function": self.function}
