"""Rates over time for counter tracks (the Perfetto export's): a cumulative counter's rate
between its samples, the ops completed per second in time bins."""

from __future__ import annotations

import numpy as np


def rate_per_s(t_ns: np.ndarray, cumulative: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(t of each step's start, change per second over the step) of a cumulative counter
    sampled at t_ns (samples in time order; a counter that went backwards gives 0)."""
    t = np.asarray(t_ns, dtype=np.float64)
    v = np.asarray(cumulative, dtype=np.float64)
    if t.size < 2:
        return np.empty(0), np.empty(0)
    dt = np.diff(t)
    keep = dt > 0
    rate = np.maximum(np.diff(v), 0)[keep] / dt[keep] * 1e9
    return t[:-1][keep], rate


def ops_per_s(end_ns: np.ndarray, lo_ns: int, hi_ns: int, bin_ns: int) -> tuple[np.ndarray,
                                                                                 np.ndarray]:
    """Completions per second in bins of bin_ns from lo to hi: (bin starts, rates)."""
    edges = np.arange(lo_ns, hi_ns + bin_ns, bin_ns, dtype=np.int64)
    if edges.size < 2:
        return np.empty(0), np.empty(0)
    counts, _ = np.histogram(end_ns, bins=edges)
    return edges[:-1], counts * (1e9 / bin_ns)


def changed(values: np.ndarray) -> bool:
    return bool(values.size) and bool(np.any(values != values[0]))
