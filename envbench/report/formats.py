"""How the report writes numbers: a dash for what was not measured, bytes in binary units,
money written out in full."""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

DASH = "—"


def na(fmt: str) -> Callable[[Any], str]:
    """``fmt`` for a value, the dash for None."""
    def render(value: Any) -> str:
        return DASH if value is None else fmt % value
    return render


def human_bytes(value: int | None) -> str:
    if value is None:
        return DASH
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= size:
            return "%.2f %s" % (value / size, unit)
    return "%d B" % value


def share(value: float | None) -> str:
    return DASH if value is None else "%.1f%%" % (100 * value)


def percent(fraction: float) -> str:
    """A difference as "would have seen" states it: 12%, 5%, 1.9% (two figures below ten
    percent, whole percents above)."""
    text = "%.0f" % (100 * fraction) if fraction >= 0.095 else "%.1f" % (100 * fraction)
    return (text[:-2] if text.endswith(".0") else text) + "%"


def money(value: float | None) -> str:
    if value is None:
        return DASH
    if value >= 1 or value == 0:
        return "$%.2f" % value
    # Cloud prices make single epochs cost fractions of a cent: three significant digits,
    # written out ($0.00000487), since "$4.87e-06" is no way to quote money.
    if value < 1e-9:
        return "<$0.000000001"
    decimals = 2 - math.floor(math.log10(value))
    return "$%.*f" % (decimals, value)


def flop_rate(value: float | None) -> str:
    """FLOP/s in the unit that keeps three figures: 48.8 GFLOP/s, 1.23 TFLOP/s."""
    if value is None:
        return DASH
    for unit, size in (("PFLOP/s", 1e15), ("TFLOP/s", 1e12), ("GFLOP/s", 1e9),
                       ("MFLOP/s", 1e6)):
        if value >= size:
            return "%.3g %s" % (value / size, unit)
    return "%.3g FLOP/s" % value


def step_time(seconds: float | None) -> str:
    """Seconds per step, in ms (µs below a tenth of a ms)."""
    if seconds is None:
        return DASH
    if seconds < 1e-4:
        return "%.1f µs" % (seconds * 1e6)
    return "%.3g ms" % (seconds * 1e3)


def confidence(alpha: float) -> str:
    """An interval's level as people quote one: 95%, 98.75%, 99.9%, 99.998% (enough figures
    that a level short of 100% never reads as 100%)."""
    text = "%.6f" % (100 * (1 - alpha))
    text = text.rstrip("0").rstrip(".")
    if text == "100":
        return ">99.9999%"
    integer, _, fraction = text.partition(".")
    keep = next((i + 1 for i, digit in enumerate(fraction) if digit != "9"), len(fraction))
    fraction = fraction[:max(2, keep)] if len(fraction) > 2 else fraction
    return "%s%s%%" % (integer, "." + fraction.rstrip("0") if fraction.rstrip("0") else "")
