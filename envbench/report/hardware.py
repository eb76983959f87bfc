"""Hardware named by what bench measured, and a matrix label checked against it.

A label is the user's alias ("RTX 3060", "my laptop"). Where it names hardware (a vendor or
family word, or a model token such as 3060, i7-11800H or H200) every such word must appear
in what was measured; otherwise the report flags the cell instead of trusting the label.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from envbench import files

# Words that claim a vendor or a product family; generic words (cpu, gpu, laptop) claim none.
CLAIM_WORDS = {"nvidia", "amd", "intel", "geforce", "radeon", "instinct", "xeon", "epyc",
               "ryzen", "threadripper", "rtx", "gtx", "quadro", "tesla", "titan", "graviton"}


def _tokens(text: str) -> list[str]:
    # As it reads: full-width letters and look-alikes of other scripts are the plain ones,
    # so that "ＮＶＩＤＩＡ Ｈ２００" or a Cyrillic "Н200" claims what "NVIDIA H200" does.
    text = re.sub(r"\((r|tm|c)\)", " ", files.skeleton(text).lower())
    return [t for t in re.split(r"[^a-z0-9]+", text) if t]


def _claims(label: str) -> list[str]:
    """The words of a label that name hardware: vendor/family words and model tokens."""
    claims = []
    for token in _tokens(label):
        has_digit, has_letter = any(c.isdigit() for c in token), any(c.isalpha() for c in token)
        if re.fullmatch(r"\d+x|x\d+", token):  # "2x": a count, not a model
            continue
        if token in CLAIM_WORDS or (has_digit and has_letter) or (token.isdigit()
                                                                     and len(token) >= 3):
            claims.append(token)
    return claims


def measured_name(env: Mapping[str, Any], device: str | None, ranks: int = 1) -> str | None:
    """'NVIDIA H200', '2 × NVIDIA H200', 'AMD EPYC 7B13 · 2 threads', or under ddp on CPU
    'AMD EPYC 7B13 · 2 ranks × 1 thread'; None if not measured."""
    if device == "cuda":
        name = env.get("device_name")
        if not name:
            return None
        count = env.get("gpu_count")
        return "%d × %s" % (count, name) if isinstance(count, int) and count > 1 else str(name)
    model = env.get("cpu_model") or env.get("device_name")
    if not model:
        return None
    threads = env.get("threads")
    if not isinstance(threads, int):
        return str(model)
    per_rank = "%d thread%s" % (threads, "" if threads == 1 else "s")
    return "%s · %s" % (model, per_rank if ranks <= 1 else "%d ranks × %s" % (ranks, per_rank))


def contradiction(label: str | None, env: Mapping[str, Any], device: str | None) -> str | None:
    """'label says RTX 3060, measured NVIDIA H200' when the label names other hardware."""
    if not label:
        return None
    measured = [env.get("device_name"), env.get("cpu_model")] if device == "cuda" \
        else [env.get("cpu_model") or env.get("device_name")]
    named = [str(m) for m in measured if m]
    if not named:
        return None
    seen = set(_tokens(" ".join(named)))
    if all(claim in seen for claim in _claims(label)):
        return None
    return "label says %s, measured %s" % (label, named[0])
