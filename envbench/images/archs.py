"""Which GPUs a CUDA stack can run on: the architectures its torch was compiled for, against
a GPU's compute capability.

A kernel compiled for sm_XY runs on a GPU of the same major version and a minor version of
Y or more (sm_80 code runs on an 8.6 or 8.9 GPU); PTX for XY is compiled by the driver for
any GPU of XY or newer. Anything else fails at the first kernel with "no kernel image is
available", after the stack's wheels were fetched and its image built: so the check runs
before any build, from the image's own list where it is built (the envbench.cuda.archs
label), else from the published build list of the default stacks below.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

LABEL = "envbench.cuda.archs"


@dataclass(frozen=True)
class Archs:
    """A stack's compiled architectures: cubins and PTX, as torch writes them (sm_86,
    compute_90 for PTX)."""

    flags: tuple[str, ...]
    source: str

    @classmethod
    def parse(cls, text: str, source: str) -> Archs:
        """torch._C._cuda_getArchFlags() ('-gencode ... sm_86' or 'sm_50 sm_60 compute_90')
        or torch.cuda.get_arch_list() joined by spaces."""
        return cls(tuple(dict.fromkeys(re.findall(r"\b(?:sm|compute)_\d+[a-z]?\b", text))),
                   source)

    @property
    def cubins(self) -> list[tuple[int, int]]:
        return [_version(f) for f in self.flags if f.startswith("sm_") and f[-1].isdigit()]

    @property
    def ptx(self) -> list[tuple[int, int]]:
        return [_version(f) for f in self.flags if f.startswith("compute_") and f[-1].isdigit()]

    def fits(self, capability: tuple[int, int]) -> bool:
        major, minor = capability
        return any(m == major and n <= minor for m, n in self.cubins) or any(
            (m, n) <= capability for m, n in self.ptx)

    def span(self) -> str:
        """'sm_37–sm_86' (and '+ PTX compute_90' where there is PTX)."""
        cubins = sorted(self.cubins)
        text = "sm_%d%d–sm_%d%d" % (*cubins[0], *cubins[-1]) if cubins else "no cubins"
        if self.ptx:
            text += " and PTX for %s" % ", ".join("compute_%d%d" % p for p in sorted(self.ptx))
        else:
            text += ", no PTX"
        return text


def _version(flag: str) -> tuple[int, int]:
    digits = flag.split("_", 1)[1].rstrip("abcdefghijklmnopqrstuvwxyz")
    return int(digits[:-1]), int(digits[-1])


# The build lists of the default matrix's CUDA stacks (x86_64 wheels): torch 1.12's cu116
# wheels from pytorch/builder's manywheel/build_cuda.sh; torch 2.14's cu128 wheels from
# pytorch/pytorch's .ci/manywheel/build_cuda.sh. The cu130 list is read from the wheel
# itself (torch 2.14.1 on PyPI, torch._C._cuda_getArchFlags() in a built image, as CI's
# CUDA image test does): it has no PTX, whatever a build script's "+PTX" suggested.
KNOWN: dict[tuple[str, str], Archs] = {
    ("1.12", "11.6"): Archs(("sm_37", "sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86"),
                            "pytorch/builder manywheel/build_cuda.sh (torch 1.12, CUDA 11.6)"),
    ("2.14", "12.8"): Archs(("sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"),
                            "pytorch .ci/manywheel/build_cuda.sh (CUDA 12.8)"),
    ("2.14", "13.0"): Archs(("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"),
                            "torch 2.14.1's CUDA 13.0 wheel, its compiled list"),
}


def known(torch: str | None, cuda: str | None) -> Archs | None:
    """The published list for a stack not built yet; None where the kit has none."""
    if not torch or not cuda:
        return None
    return KNOWN.get((".".join(torch.split(".")[:2]), cuda))


def misfit(environment: str, torch: str | None, cuda: str | None, archs: Archs,
           gpu_name: str, capability: tuple[int, int]) -> str | None:
    """One sentence when the stack has no kernels this GPU can run; None when it has."""
    if archs.fits(capability):
        return None
    return ("%s (torch %s+cu%s) has kernels for %s; this %s is sm_%d%d: it cannot run here "
            "(use a stack built for it; from %s)"
            % (environment, torch or "?", (cuda or "").replace(".", ""), archs.span(),
               gpu_name, capability[0], capability[1], archs.source))
