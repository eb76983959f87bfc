"""Datasheet peaks of the GPUs people rent: the nominal ceiling beside the measured one.

Dense figures (no 2:4 sparsity), in TFLOP/s, per dtype the kit trains in: ``fp32`` on the
CUDA cores, ``tf32``, ``fp16`` and ``bf16`` on the tensor cores (fp16 and bf16 with fp32
accumulation, as PyTorch's matmuls use). None: the GPU has no such path. A measured GPU is
found by its name as the driver reports it. These are references, never measurements: the
page's "achievable" is the matmul probe's measured rate; published measurements put it well
below nominal (H100 SXM bf16: 794.5 of 989 TFLOP/s; A100 SXM: 271.2 of 312).
"""
from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Peak:
    name: str
    pattern: str                # matched against the driver's device name, case-insensitive
    fp32: float
    tf32: float | None
    fp16: float | None
    bf16: float | None
    source: str

    def tflops(self, dtype: str) -> float | None:
        return {"fp32": self.fp32, "tf32": self.tf32, "fp16": self.fp16,
                "bf16": self.bf16}.get(dtype)


HOPPER = "NVIDIA H100/H200 Tensor Core GPU datasheets (SXM form factor, dense)"
PEAKS: tuple[Peak, ...] = (
    Peak("H200 SXM", r"\bH200\b(?!.*NVL)", 67.0, 494.7, 989.4, 989.4, HOPPER),
    Peak("H200 NVL", r"\bH200\b.*NVL", 60.0, 417.5, 835.5, 835.5,
         "NVIDIA H200 datasheet (H200 NVL, dense)"),
    Peak("H100 PCIe", r"\bH100\b.*PCIe", 51.0, 378.0, 756.0, 756.0,
         "NVIDIA H100 datasheet (PCIe, dense)"),
    Peak("H100 NVL", r"\bH100\b.*NVL", 60.0, 417.5, 835.5, 835.5,
         "NVIDIA H100 datasheet (H100 NVL, dense)"),
    Peak("H100 SXM", r"\bH100\b", 67.0, 494.7, 989.4, 989.4, HOPPER),
    Peak("A100", r"\bA100\b", 19.5, 156.0, 312.0, 312.0,
         "NVIDIA A100 Tensor Core GPU datasheet (SXM and PCIe, dense)"),
    Peak("L4", r"\bL4\b", 30.3, 60.0, 121.0, 121.0, "NVIDIA L4 datasheet (dense)"),
    Peak("A10G", r"\bA10G\b", 31.2, 62.5, 125.0, 125.0,
         "NVIDIA A10 datasheet (dense); AWS's A10G is an A10 variant with no NVIDIA "
         "datasheet of its own"),
    Peak("A10", r"\bA10\b", 31.2, 62.5, 125.0, 125.0, "NVIDIA A10 datasheet (dense)"),
    Peak("T4", r"\bT4\b", 8.1, None, 65.0, None,
         "NVIDIA T4 datasheet (fp16 is mixed precision on the tensor cores)"),
    Peak("V100 PCIe", r"\bV100\b.*PCIE", 14.0, None, 112.0, None,
         "NVIDIA V100 datasheet (PCIe)"),
    Peak("V100 SXM2", r"\bV100\b", 15.7, None, 125.0, None, "NVIDIA V100 datasheet (SXM2)"),
    Peak("RTX 3060", r"\bRTX 3060\b(?! Ti)", 12.7, 12.7, 25.5, 25.5,
         "derived from NVIDIA's GA102 whitepaper (GeForce Ampere per-SM rates, fp32 "
         "accumulation) for 28 SMs at the 1.777 GHz boost clock"),
)


def find(device_name: str | None) -> Peak | None:
    """The datasheet entry for a GPU as the driver names it ('NVIDIA H100 80GB HBM3')."""
    if not device_name:
        return None
    for peak in PEAKS:
        if re.search(peak.pattern, device_name, re.IGNORECASE):
            return peak
    return None


def dtype_of(probe_dtype: str, tf32: bool | None) -> str:
    """The datasheet column for a probe's dtype ('float32' with TF32 allowed is tf32)."""
    if probe_dtype == "float32":
        return "tf32" if tf32 else "fp32"
    return {"float16": "fp16", "bfloat16": "bf16"}.get(probe_dtype, probe_dtype)
