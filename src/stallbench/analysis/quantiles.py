"""Summary statistics of a latency sample (int64 ns).

The comparison reads percentiles from per-run log-linear histograms (histogram.py: within
QUANTILE_RELATIVE_ERROR of numpy's `np.quantile(..., method="inverted_cdf")` on the raw ops).
"""

from __future__ import annotations

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


def spread(values: list[float | None]) -> float | None:
    """(max - min) / median of per-iteration values: how much iterations differ."""
    finite = [v for v in values if v is not None and np.isfinite(v)]
    if len(finite) < 2:
        return None
    median = float(np.median(finite))
    if median <= 0:
        return None
    return (max(finite) - min(finite)) / median
