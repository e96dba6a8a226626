"""Display units, the one place they are chosen: a table's time unit from its typical value,
nanoseconds and bytes as a reader reads them. Pure, like the rest of analysis/, so that its
sentences and every report write a number the same way; reading units is core/units.py's."""

from __future__ import annotations

import math
from typing import NamedTuple


class TimeUnit(NamedTuple):
    name: str       # as printed: ns, µs, ms, s
    ns: int         # nanoseconds per unit


# smallest first
TIME_UNITS = (TimeUnit("ns", 1), TimeUnit("µs", 1_000), TimeUnit("ms", 1_000_000),
              TimeUnit("s", 1_000_000_000))


def choose_time_unit(values_ns) -> TimeUnit:
    """The unit in which the typical (median) value of a table reads best (1..9999)."""
    finite = sorted(v for v in values_ns if v is not None and v > 0 and math.isfinite(v))
    if not finite:
        return TIME_UNITS[1]
    typical = finite[len(finite) // 2]
    chosen = TIME_UNITS[0]
    for unit in TIME_UNITS:
        if typical >= unit.ns:
            chosen = unit
    return chosen


def format_ns(value_ns: float | None, unit: TimeUnit | None = None) -> str:
    """Render nanoseconds in a given unit (or one chosen for this value) with ~4 digits."""
    if value_ns is None or (isinstance(value_ns, float) and math.isnan(value_ns)):
        return "-"
    name, scale = unit or choose_time_unit([value_ns])
    value = value_ns / scale
    if value >= 100 or value == int(value):
        text = f"{value:.0f}"
    elif value >= 10:
        text = f"{value:.1f}"
    else:
        text = f"{value:.2f}"
    return f"{text} {name}" if unit is None else text


def format_size(nbytes: int) -> str:
    for name, power in (("GiB", 3), ("MiB", 2), ("KiB", 1)):
        if nbytes >= 1024 ** power:
            value = nbytes / 1024 ** power
            return f"{value:.0f} {name}" if value == int(value) else f"{value:.1f} {name}"
    return f"{nbytes} B"
