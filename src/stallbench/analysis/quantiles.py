"""Summary statistics of a latency sample (int64 ns), and the declaration of the statistics.

Every table row, JSON key and `check` metric is derived from Stat, RATE, MIN, MAX, MEAN,
DEFAULT_PERCENTS and percentile(). The comparison reads percentiles from per-run log-linear
histograms (histogram.py: within QUANTILE_RELATIVE_ERROR of numpy's
`np.quantile(..., method="inverted_cdf")` on the raw ops). No numpy at import: the command
line reads these declarations for its help.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# a percentile needs at least this many samples at or beyond it to be shown as a number
MIN_TAIL_SAMPLES = 10


@dataclass(frozen=True)
class Stat:
    """A statistic of an op: its key (the Comparison's dict keys, the JSON key's stem and
    check's OP:STAT), its label in tables, for a percentile its probability, its direction
    (whether a larger value is an improvement: the rate; a latency is better smaller) and its
    unit (latencies in ns; the JSON key of a latency statistic ends in it)."""

    key: str
    label: str
    probability: float | None = None
    higher_is_better: bool = False
    unit: str = "ns"

    @property
    def json_key(self) -> str:
        return f"{self.key}_ns" if self.unit == "ns" else self.key


# The one declaration of the statistics: every list of them (tables, JSON keys, check's STAT,
# the plan's metrics) is derived from these.
RATE = Stat("rate", "rate/s", higher_is_better=True, unit="ops/s")
MIN = Stat("min", "min")
MAX = Stat("max", "max")
MEAN = Stat("mean", "mean")
DEFAULT_PERCENTS: tuple[float, ...] = (50, 90, 95, 99, 99.9)
# the statistics whose verdicts share a candidate's false-discovery budget (comparison.decides)
DECIDING_STATS: tuple[str, ...] = ("p50", "p99", "rate")


def percentile(percent: float) -> Stat:
    """p50, p99.9 (key p999), p99.99 (key p9999), p12.5 (key p12_5): a fraction after 99 is
    written on (the tail's established keys), any other after an underscore."""
    if not (0 < percent < 100) or not math.isfinite(percent):
        raise ValueError(f"{percent:g} is not between 0 and 100")
    text = f"{percent:.10f}".rstrip("0").rstrip(".")
    whole, _, fraction = text.partition(".")
    if not fraction:
        key = f"p{whole}"
    elif whole == "99":
        key = f"p99{fraction}"
    else:
        key = f"p{whole}_{fraction}"
    return Stat(key, f"p{text}", round(percent / 100.0, 12))


def percentiles(percents: tuple[float, ...] | None = None) -> tuple[Stat, ...]:
    return tuple(percentile(p) for p in (DEFAULT_PERCENTS if percents is None else percents))


def latency_stats(percents: tuple[float, ...] | None = None) -> tuple[Stat, ...]:
    """The latency rows of a table in order: min, the percentiles, max, mean."""
    return (MIN, *percentiles(percents), MAX, MEAN)


def row_stats(percents: tuple[float, ...] | None = None) -> tuple[Stat, ...]:
    return (RATE, *latency_stats(percents))


def parse_percents(text: str) -> tuple[float, ...]:
    """'50,99,99.99' -> (50.0, 99.0, 99.99), sorted, once each; ValueError says what is wrong."""
    out = set()
    for item in str(text).split(","):
        try:
            value = float(item.strip())
        except ValueError:
            raise ValueError(f"{item.strip()!r} is not a number") from None
        percentile(value)
        out.add(value)
    if not out:
        raise ValueError("no percentile given")
    return tuple(sorted(out))


def stat_named(name: str) -> Stat:
    """A statistic by key or label: 'rate', 'min', 'p99', 'p999', 'p99.9', 'p99_9', 'p9999'."""
    for stat in (RATE, MIN, MAX, MEAN):
        if name in (stat.key, stat.label):
            return stat
    digits = name.removeprefix("p")
    if name.startswith("p") and digits:
        if digits.isdigit() and len(digits) > 2 and digits.startswith("99"):
            digits = "99." + digits[2:]           # p999 -> 99.9, p9999 -> 99.99
        try:
            return percentile(float(digits.replace("_", ".")))
        except ValueError:
            pass
    raise ValueError(f"{name!r} is not a statistic")


def needed_samples(probability: float) -> int:
    """The fewest ops for which the `probability` quantile is resolvable (MIN_TAIL_SAMPLES)."""
    n = max(int((MIN_TAIL_SAMPLES - 1) / (1.0 - probability)) - 2, 1)
    while not resolvable(n, probability):
        n += 1
    return n


# the default set's latency keys in table order
LATENCY_STATS: tuple[str, ...] = tuple(s.key for s in latency_stats())


def tail_samples(n: int, probability: float) -> int:
    """How many of n samples lie at or beyond the `probability` quantile (ceil(n·(1-p)))."""
    return int(math.ceil(n * (1.0 - probability) - 1e-9)) if n > 0 else 0


def resolvable(n: int, probability: float) -> bool:
    return tail_samples(n, probability) >= MIN_TAIL_SAMPLES


def spread(values: list[float | None]) -> float | None:
    """(max - min) / median of per-iteration values: how much iterations differ."""
    import numpy as np

    finite = [v for v in values if v is not None and np.isfinite(v)]
    if len(finite) < 2:
        return None
    median = float(np.median(finite))
    if median <= 0:
        return None
    return (max(finite) - min(finite)) / median
