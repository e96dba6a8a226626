"""Log-linear histograms of latencies: 2**SUB_BITS buckets per power of two (0.4% wide).

A run's samples become a vector of counts; summing the vectors of resampled runs gives the
bootstrap distribution of a pooled quantile at a cost independent of the number of samples.
"""

from __future__ import annotations

import numpy as np

SUB_BITS = 8
SUB_BUCKETS = 1 << SUB_BITS
MAX_EXPONENT = 48  # 2**48 ns ~ 3 days: anything longer lands in the last bucket
N_BUCKETS = (MAX_EXPONENT + 1) * SUB_BUCKETS


def bucket_index(latency_ns: np.ndarray) -> np.ndarray:
    """Bucket of each latency: exponent * SUB_BUCKETS + linear sub-bucket (values < 1 -> 0).

    For v = 2**e * (1 + f) the IEEE-754 double holds e + 1023 and f's top bits side by side,
    so the bucket e * SUB_BUCKETS + floor(f * SUB_BUCKETS) is one shift of its bits."""
    values = np.maximum(np.asarray(latency_ns, dtype=np.float64), 1.0)
    index = (values.view(np.int64) >> (52 - SUB_BITS)) - (1023 << SUB_BITS)
    return np.minimum(index, N_BUCKETS - 1)


def bucket_lower_edges(sub_bits: int = SUB_BITS) -> np.ndarray:
    """Lower edges of every bucket (and the upper edge of the last) for 2**sub_bits buckets
    per power of two; a fine bucket index >> (SUB_BITS - sub_bits) is its coarse bucket."""
    sub_buckets = 1 << sub_bits
    index = np.arange((MAX_EXPONENT + 1) * sub_buckets + 1)
    exponent, sub = np.divmod(index, sub_buckets)
    return np.ldexp(1.0 + sub / sub_buckets, exponent)


# the relative error of a quantile read from the histogram: at most one bucket's relative
# width (the estimate is interpolated inside the bucket that holds the true value)
QUANTILE_RELATIVE_ERROR = 1.0 / SUB_BUCKETS


def histogram(latency_ns: np.ndarray, index: np.ndarray | None = None) -> np.ndarray:
    """Counts per bucket (length N_BUCKETS, int64); `index` if bucket_index() is known."""
    index = bucket_index(latency_ns) if index is None else index
    return np.bincount(index, minlength=N_BUCKETS).astype(np.int64)


def quantiles_from_counts(counts: np.ndarray, probabilities: np.ndarray,
                          edges: np.ndarray) -> np.ndarray:
    """Quantiles of histograms, interpolated linearly inside a bucket.

    counts: (rows, buckets); edges: (buckets + 1,) lower edges; returns (rows, len(probabilities)).
    Rows with no samples give NaN.
    """
    counts = np.atleast_2d(counts).astype(np.float64)
    rows, buckets = counts.shape
    cumulative = np.cumsum(counts, axis=1)
    total = cumulative[:, -1]
    targets = np.asarray(probabilities, dtype=np.float64)[None, :] * total[:, None]
    # one searchsorted over all rows: offset each row so the flattened sums keep increasing
    offset = (np.arange(rows, dtype=np.float64) * (float(total.max(initial=0.0)) + 1.0))[:, None]
    flat_index = np.searchsorted((cumulative + offset).ravel(), (targets + offset).ravel(),
                                 side="left").reshape(targets.shape)
    idx = np.minimum(flat_index - np.arange(rows)[:, None] * buckets, buckets - 1)
    idx = np.maximum(idx, 0)
    row_index = np.arange(rows)[:, None]
    before = np.where(idx > 0, cumulative[row_index, np.maximum(idx - 1, 0)], 0.0)
    inside = counts[row_index, idx]
    fraction = np.where(inside > 0, (targets - before) / np.maximum(inside, 1.0), 0.0)
    low, high = edges[idx], edges[idx + 1]
    result = low + np.clip(fraction, 0.0, 1.0) * (high - low)
    result[total <= 0] = np.nan
    return result


def quantiles(counts: np.ndarray, probabilities: list[float]) -> list[float]:
    """Quantiles of one fine histogram (N_BUCKETS counts), as floats (NaN when it is empty)."""
    return quantiles_from_counts(counts, np.asarray(probabilities),
                                 bucket_lower_edges())[0].tolist()


def ccdf(counts: np.ndarray) -> dict[str, list[float]]:
    """Fraction of ops slower than each bucket's upper edge (for the log-log CCDF plot)."""
    total = counts.sum()
    if total == 0:
        return {"latency_ns": [], "fraction_above": []}
    used = np.flatnonzero(counts)
    upper = bucket_lower_edges()[used + 1]
    above = 1.0 - np.cumsum(counts)[used] / total
    keep = above > 0
    return {"latency_ns": upper[keep].tolist(), "fraction_above": above[keep].tolist()}


def count_above(counts: np.ndarray, threshold: float) -> int:
    """How many samples exceed `threshold` (the bucket holding it counted by interpolation)."""
    edges = bucket_lower_edges()
    i = int(np.searchsorted(edges, threshold, side="right")) - 1
    if i < 0:
        return int(counts.sum())
    if i >= counts.size:
        return 0
    inside = counts[i] * (edges[i + 1] - threshold) / (edges[i + 1] - edges[i])
    return int(round(counts[i + 1:].sum() + inside))


def superiority(counts_candidate: np.ndarray, counts_baseline: np.ndarray) -> float | None:
    """P(a candidate op is slower than a baseline op), ties (same bucket) counted half."""
    nc, nb = counts_candidate.sum(), counts_baseline.sum()
    if nc == 0 or nb == 0:
        return None
    cand = counts_candidate.astype(np.float64) / nc
    base = counts_baseline.astype(np.float64) / nb
    below = np.cumsum(base) - base  # baseline mass strictly below each bucket
    return float(np.sum(cand * (below + 0.5 * base)))
