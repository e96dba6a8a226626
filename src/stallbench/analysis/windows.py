"""Time windows of a trace export: a window given by the user, or windows around the slowest
ops, merged where they overlap; pure functions."""

from __future__ import annotations

import numpy as np


def slowest(latency_ns: np.ndarray, n: int) -> np.ndarray:
    """Indexes of the n slowest ops (ties at the n-th latency broken by position)."""
    n = min(max(n, 0), latency_ns.size)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    return np.argpartition(latency_ns, latency_ns.size - n)[-n:]


def around_slowest(start_ns: np.ndarray, latency_ns: np.ndarray, n: int,
                   pad_ns: int) -> list[tuple[int, int]]:
    """Windows [start - pad, end + pad] around the n slowest ops, merged, in time order."""
    spans = sorted((max(0, int(start_ns[i]) - pad_ns),
                    int(start_ns[i] + latency_ns[i]) + pad_ns)
                   for i in slowest(latency_ns, n).tolist())
    return merge(spans)


def longest(duration_ns: np.ndarray, room: int) -> np.ndarray:
    """Mask of the `room` longest intervals (all of them when they fit): what a bounded export
    keeps of the slices it may thin."""
    keep = np.zeros(duration_ns.size, dtype=bool)
    if room >= duration_ns.size:
        keep[:] = True
    elif room > 0:
        keep[np.argpartition(duration_ns, duration_ns.size - room)[-room:]] = True
    return keep


def merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(spans):
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


def mask(t_ns: np.ndarray, end_ns: np.ndarray, windows: list[tuple[int, int]]) -> np.ndarray:
    """True where the interval [t, end] overlaps one of the (merged, sorted) windows."""
    t = np.asarray(t_ns)
    end = np.asarray(end_ns)
    keep = np.zeros(t.shape, dtype=bool)
    for lo, hi in windows:
        keep |= (end >= lo) & (t <= hi)
    return keep
