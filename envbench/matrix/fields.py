"""What every part of matrix.yaml is checked with: strict scalars (YAML's `true` is no
count), versions written as text, a value shown as the file spelt it, and cpusets."""
from __future__ import annotations

import re
from typing import Annotated, Any, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo

from bench import rules

VERSION = re.compile(r"^\d+\.\d+(\.\d+)?([a-z]+\d*)?\Z")
CUDA_VERSION = re.compile(r"^\d+\.\d+\Z")
NAME = rules.NAME
CPUSET = r"^\d+(-\d+)?(,\d+(-\d+)?)*$"
SIZE = r"^\d+[kmg]?$"  # Docker's --memory grammar, lower-case units
WEEK_S = 7 * 24 * 3600

# Strict scalars: YAML's `true` is no count, `2.0` no batch size and `"0.35"` no price.
Count = Annotated[int, Field(strict=True, ge=1)]
Price = Annotated[float, Field(strict=True, ge=0, allow_inf_nan=False)]
Text = Annotated[str, Field(strict=True)]
Flag = Annotated[bool, Field(strict=True)]


def version_text(value: Optional[str], what: str = "version") -> Optional[str]:
    if value is not None and not VERSION.match(str(value)):
        raise ValueError("%r is not a %s (expected e.g. 2.13.0)" % (value, what))
    return value


def not_a_number(value: Any, info: ValidationInfo) -> Any:
    """Versions are text: YAML reads `python: 3.10` as the number 3.1 and `cuda: 12.10` as 12.1."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        written = getattr(value, "source", repr(value))
        raise ValueError('%s was read as a number, which can lose digits (YAML reads 3.10 as '
                         '3.1): quote it: `%s: "%s"`' % (written, info.field_name, written))
    return value


def refuse(problem: Optional[str]) -> None:
    if problem is not None:
        raise ValueError(problem)


def shown(value: Any) -> str:
    """A value as the YAML file spelt it: `true`, `3.10`, `'0.35'`."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    text = getattr(value, "source", None) or repr(value)
    return text if len(text) <= SHOWN else text[:SHOWN] + "… (%d characters)" % len(text)


SHOWN = 80  # an error message quotes at most this much of a value


MIN_MEMORY = 64 * 2**20  # below this no torch starts; Docker's own floor is 6m


MAX_CPU = 8191  # Linux's largest CPU number (NR_CPUS is at most 8192)


def cpuset_ranges(cpuset: str) -> list[tuple[int, int]]:
    """The (first, last) CPU of each part of a cpuset such as '0-3,8', bounded: a CPU past
    MAX_CPU or a range that runs backwards is a ValueError naming it (a set of every number
    up to 10^20 is never built)."""
    ranges = []
    for part in cpuset.split(","):
        low_text, _, high_text = part.partition("-")
        if len(low_text) > 5 or len(high_text) > 5:
            raise ValueError("CPU %s is past the largest Linux numbers (%d)"
                             % (shown(part), MAX_CPU))
        low, high = int(low_text), int(high_text or low_text)
        if high > MAX_CPU:
            raise ValueError("CPU %d is past the largest Linux numbers (%d)" % (high, MAX_CPU))
        if high < low:
            raise ValueError("%s runs backwards" % shown(part))
        ranges.append((low, high))
    return ranges


def cpuset_size(cpuset: str) -> int:
    """How many CPUs a cpuset such as '0-3,8' names."""
    cpus: set[int] = set()
    for low, high in cpuset_ranges(cpuset):
        cpus.update(range(low, high + 1))
    return len(cpus)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
