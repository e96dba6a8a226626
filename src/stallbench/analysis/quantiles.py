"""Summary statistics of a latency sample (int64 ns).

Percentiles use numpy's default (linear interpolation, `np.quantile(..., method="linear")`) so a
reader can reproduce every number from ops.parquet with numpy alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# (statistic name, probability) for the percentile rows, in table order
PERCENTILES: tuple[tuple[str, float], ...] = (
    ("p50", 0.50),
    ("p90", 0.90),
    ("p95", 0.95),
    ("p99", 0.99),
    ("p999", 0.999),
)
LATENCY_STATS: tuple[str, ...] = ("min", "p50", "p90", "p95", "p99", "p999", "max", "mean")
ALL_STATS: tuple[str, ...] = ("rate",) + LATENCY_STATS
PROBABILITY = dict(PERCENTILES)
# a percentile needs at least this many samples at or beyond it to be shown as a number
MIN_TAIL_SAMPLES = 10


def tail_samples(n: int, probability: float) -> int:
    """How many of n samples lie at or beyond the `probability` quantile (ceil(n·(1-p)))."""
    return int(np.ceil(n * (1.0 - probability) - 1e-9)) if n > 0 else 0


def resolvable(n: int, probability: float) -> bool:
    return tail_samples(n, probability) >= MIN_TAIL_SAMPLES


@dataclass
class LatencySummary:
    """min, percentiles, max and mean of one sample; None where there are no samples."""

    samples: int
    values: dict[str, float | None]  # stat name -> ns (float: interpolated percentiles, mean)
    unresolved: dict[str, int]  # percentile stat -> samples at or beyond it (< MIN_TAIL_SAMPLES)


def summarize(latency_ns: np.ndarray) -> LatencySummary:
    """The statistics of LATENCY_STATS for one sample of latencies."""
    latency_ns = np.asarray(latency_ns)
    n = int(latency_ns.size)
    if n == 0:
        return LatencySummary(0, {stat: None for stat in LATENCY_STATS}, {})
    probabilities = [p for _, p in PERCENTILES]
    quantiles = np.quantile(latency_ns, probabilities)
    values: dict[str, float | None] = {"min": float(latency_ns.min())}
    unresolved: dict[str, int] = {}
    for (stat, probability), value in zip(PERCENTILES, quantiles, strict=True):
        values[stat] = float(value)
        if not resolvable(n, probability):
            unresolved[stat] = tail_samples(n, probability)
    values["max"] = float(latency_ns.max())
    values["mean"] = float(latency_ns.mean(dtype=np.float64))
    return LatencySummary(n, values, unresolved)


def spread(values: list[float | None]) -> float | None:
    """(max - min) / median of per-iteration values: how much iterations differ."""
    finite = [v for v in values if v is not None and np.isfinite(v)]
    if len(finite) < 2:
        return None
    median = float(np.median(finite))
    if median <= 0:
        return None
    return (max(finite) - min(finite)) / median
