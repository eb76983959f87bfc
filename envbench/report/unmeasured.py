"""What this run did not measure, and the matrix line that would: the sections of the page
that would be empty fold into one short list, so a newcomer reads answers, not blanks."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Missing:
    section: str   # the page's anchor of the section left out
    what: str
    line: str      # a matrix.yaml line that fills it


def sections(context: dict[str, Any]) -> list[Missing]:
    groups = context["groups"]
    out = []
    if not any(g.device == "cuda" for g in groups):
        out.append(Missing("gpu", "GPU against CPU",
                           "targets: {gpu: {device: cuda, gpus: all}}  (on a GPU host)"))
    if not context["batch_table"]:
        out.append(Missing("batch", "speedup at each batch size",
                           "benchmark: {sweep: {batch_size: [32, 256]}}  (and a second target)"))
    if not context["ladder"]:
        out.append(Missing("ladder", "what each option buys",
                           "benchmark: {sweep: {amp: [off, bf16], channels_last: [false, true]}}"))
    if not context["scaling"]:
        out.append(Missing("scaling", "scaling over devices",
                           "benchmark: {nproc: 2, sweep: {parallel: [none, ddp]}}"))
    if not context["models"]:
        out.append(Missing("models", "light models and the quantised test pass",
                           "benchmark: {sweep: {workload: [lenet, lenet-gap, lenet-dws]}, "
                           "quantize_eval: dynamic}"))
    if not context["efficiency"]:
        out.append(Missing("efficiency", "achieved against achievable FLOP/s",
                           "benchmark: {probe: true}  (the default; older results had no probe)"))
    if not context["profiles"]:
        out.append(Missing("operators", "where the time goes, operator by operator",
                           "benchmark: {profile: true}  (or --profile)"))
    if not any(g.price is not None for g in groups):
        out.append(Missing("cost", "cost per epoch and per run",
                           "targets: {cpu: {device: cpu, price_per_hour: 0.10}}"))
    if context["goal"] is None:
        out.append(Missing("accuracy", "time and cost to an accuracy",
                           "benchmark: {target_accuracy: 0.5}"))
    if not context.get("cloud_runs"):
        out.append(Missing("cloud", "cloud clusters and what they cost",
                           "targets: {l4: {device: cuda, cloud: {accelerators: \"L4:1\"}}}  "
                           "(then ./noxw -s cloud)"))
    return out
