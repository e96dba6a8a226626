"""Reading sizes, durations and percentages (parse_*), and writing them back as a flag takes
them (size_text, duration_text); the display units of a report are analysis/display.py's."""

from __future__ import annotations

import math
import re

from .errors import UsageError

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?b?)\s*$", re.IGNORECASE)
_SIZE_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}
MAX_SIZE = 1 << 60

# the unit of every time in a run's tables (ops.parquet's start_ns, a monitor table's t_ns):
# CLOCK_MONOTONIC nanoseconds since the run started; and the axis of the plots drawn over it
RUN_TIME_UNIT = "ns since run start"
RUN_TIME_AXIS = "time since run start (s)"


def parse_size(text: str | int, what: str = "size") -> int:
    """'512M', '4KiB', '1.5g', '8192' -> bytes (binary multiples, as dd and fio do)."""
    if isinstance(text, bool):
        raise UsageError(f"{what}: expected a size like 512M, got {text!r}")
    if isinstance(text, int):
        value = text
    else:
        match = _SIZE_RE.match(str(text))
        if not match:
            raise UsageError(f"{what}: {text!r} is not a size (use e.g. 4K, 512M, 2G)")
        number, unit, _ = match.groups()
        value = float(number) * (1024 ** _SIZE_POWERS[unit.lower()])
        if not math.isfinite(value):
            raise UsageError(f"{what}: {text!r} is too large")
        value = int(value)
    if value <= 0:
        raise UsageError(f"{what}: must be greater than zero, got {text!r}")
    if value > MAX_SIZE:
        raise UsageError(f"{what}: {text!r} is too large")
    return value


_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ns|us|µs|ms|s|m|min|h)?\s*$", re.IGNORECASE)
_DURATION_SECONDS = {
    "ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "": 1.0,
    "m": 60.0, "min": 60.0, "h": 3600.0,
}


def parse_duration(text: str | float | int, what: str = "duration") -> float:
    """'10', '10s', '250ms', '2m', '1h' -> seconds (float, > 0)."""
    if isinstance(text, bool):
        raise UsageError(f"{what}: expected a duration like 10s, got {text!r}")
    if isinstance(text, (int, float)):
        seconds = float(text)
    else:
        match = _DURATION_RE.match(str(text))
        if not match:
            raise UsageError(f"{what}: {text!r} is not a duration (use e.g. 30s, 500ms, 2m)")
        number, unit = match.groups()
        seconds = float(number) * _DURATION_SECONDS[(unit or "").lower()]
    if not math.isfinite(seconds) or seconds <= 0:
        raise UsageError(f"{what}: must be greater than zero, got {text!r}")
    if seconds > 366 * 86400:
        raise UsageError(f"{what}: {text!r} is longer than a year")
    return seconds


def parse_percent(text: str, what: str) -> float:
    """'10%' or '10' -> 0.10."""
    raw = str(text).strip().removesuffix("%").strip()
    try:
        value = float(raw)
    except ValueError:
        raise UsageError(f"{what}: {text!r} is not a percentage (use e.g. 10%)") from None
    if not math.isfinite(value) or value < 0 or value > 10000:
        raise UsageError(f"{what}: {text!r} must be a percentage between 0 and 10000")
    return value / 100.0


def size_text(nbytes: int) -> str:
    """4096 -> '4K', 1048576 -> '1M', 1000 -> '1000': a size as a flag takes it (parse_size)."""
    for suffix, power in (("G", 3), ("M", 2), ("K", 1)):
        if nbytes % 1024 ** power == 0:
            return f"{nbytes // 1024 ** power}{suffix}"
    return str(nbytes)


def duration_text(seconds: float) -> str:
    """0.001 -> '1ms', 0.0002 -> '200us', 30.0 -> '30s': the largest unit of which it is a
    whole number, as a flag takes it (parse_duration)."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        value = seconds / scale
        if round(value) >= 1 and abs(value - round(value)) < 1e-6 * value:
            return f"{round(value)}{unit}"
    return f"{seconds:g}s"
