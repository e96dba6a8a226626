"""Latency over time: 2-D histograms (time x log latency) and the share of each time bin spent
in intervals or stalled (PSI); pure functions over numpy arrays."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

BINS_PER_DECADE = 8
TIME_BINS = 120


@dataclass
class Heatmap:
    time_edges_ns: np.ndarray      # len T + 1
    latency_edges_ns: np.ndarray   # len L + 1, log spaced
    counts: np.ndarray             # T x L ops per cell (int64)


def latency_edges(latencies: list[np.ndarray], per_decade: int = BINS_PER_DECADE) -> np.ndarray:
    """Log-spaced edges covering every latency of every array (shared so panels compare)."""
    positive = [a[a > 0] for a in latencies if a.size]
    positive = [a for a in positive if a.size]
    if not positive:
        return np.array([1e3, 1e4])
    low = math.floor(math.log10(min(float(a.min()) for a in positive)) * per_decade)
    high = math.ceil(math.log10(max(float(a.max()) for a in positive)) * per_decade + 1e-9)
    high = max(high, low + 1)
    return 10.0 ** (np.arange(low, high + 1) / per_decade)


def time_edges(duration_ns: float, bins: int = TIME_BINS) -> np.ndarray:
    """Equal bins from 0 to the duration, the width rounded to a whole ms."""
    width = max(1_000_000, math.ceil(max(duration_ns, 1.0) / bins / 1e6) * 1_000_000)
    n = max(1, math.ceil(duration_ns / width))
    return np.arange(n + 1, dtype=np.float64) * width


def heatmap(start_ns: np.ndarray, latency_ns: np.ndarray, t_edges: np.ndarray,
            lat_edges: np.ndarray) -> Heatmap:
    """Ops counted by completion time (start + latency) and latency; ops of latency 0 go to the
    lowest latency bin, ops past the last edge to the last bin."""
    end = np.asarray(start_ns, dtype=np.float64) + latency_ns
    lat = np.clip(np.asarray(latency_ns, dtype=np.float64), lat_edges[0], lat_edges[-1])
    ti = np.clip(np.searchsorted(t_edges, end, side="right") - 1, 0, len(t_edges) - 2)
    li = np.clip(np.searchsorted(lat_edges, lat, side="right") - 1, 0, len(lat_edges) - 2)
    shape = (len(t_edges) - 1, len(lat_edges) - 1)
    counts = np.bincount(ti * shape[1] + li, minlength=shape[0] * shape[1])
    return Heatmap(t_edges, lat_edges, counts.astype(np.int64).reshape(shape))


def coverage(start_ns: np.ndarray, duration_ns: np.ndarray, t_edges: np.ndarray) -> np.ndarray:
    """Per time bin, the time covered by the intervals divided by the bin width (intervals of
    several threads add up, so 2.0 means two threads on average)."""
    start = np.asarray(start_ns, dtype=np.float64)
    end = start + np.maximum(np.asarray(duration_ns, dtype=np.float64), 0)
    widths = np.diff(t_edges)
    out = np.zeros(len(widths))
    if start.size == 0:
        return out
    # covered(t) = sum over intervals of clip(t - start, 0, len): evaluate at every edge
    order_s, order_e = np.sort(start), np.sort(end)
    cum_s = np.concatenate([[0.0], np.cumsum(order_s)])
    cum_e = np.concatenate([[0.0], np.cumsum(order_e)])
    ks = np.searchsorted(order_s, t_edges, side="right")
    ke = np.searchsorted(order_e, t_edges, side="right")
    covered = (ks * t_edges - cum_s[ks]) - (ke * t_edges - cum_e[ke])
    out = np.diff(covered) / widths
    return out


def stalled_share(t_ns: np.ndarray, total_ns: np.ndarray, t_edges: np.ndarray) -> np.ndarray:
    """PSI: the cumulative stall time sampled at t_ns, interpolated at the edges; per bin the
    stalled time divided by the bin width (0..1). NaN outside the sampled span."""
    t = np.asarray(t_ns, dtype=np.float64)
    total = np.asarray(total_ns, dtype=np.float64)
    if t.size < 2:
        return np.full(len(t_edges) - 1, np.nan)
    order = np.argsort(t, kind="stable")
    t, total = t[order], total[order]
    at = np.interp(t_edges, t, total, left=np.nan, right=np.nan)
    return np.clip(np.diff(at) / np.diff(t_edges), 0.0, 1.0)
