"""The math libraries a stack's torch was built with (bench's fingerprint ``env.math``), in
the words the page uses: the fingerprint's row and the reason two stacks' probes differ."""
from __future__ import annotations

from typing import Any, Mapping

# (key in env.math, how the page names it)
PARTS = (("blas", "BLAS"), ("lapack", "LAPACK"), ("mkl", "MKL"), ("onednn", "oneDNN"),
         ("cpu_capability", "CPU kernels"))


def describe(math: Mapping[str, Any] | None) -> str | None:
    """'BLAS mkl, LAPACK mkl, MKL 2024.2, oneDNN 3.12.0, CPU kernels AVX512'; None if unknown."""
    if not math:
        return None
    words = ["%s %s" % (name, math[key]) for key, name in PARTS if math.get(key)]
    return ", ".join(words) or None


def blas(math: Mapping[str, Any] | None) -> str | None:
    """The BLAS alone ('mkl', 'generic', 'openblas'), what a matmul's speed turns on."""
    return (math or {}).get("blas") or None
