"""Time windows of a trace export: a window given by the user, or windows around the slowest
ops, merged where they overlap; pure functions."""

from __future__ import annotations

import numpy as np


def around_slowest(start_ns: np.ndarray, latency_ns: np.ndarray, n: int,
                   pad_ns: int) -> list[tuple[int, int]]:
    """Windows [start - pad, end + pad] around the n slowest ops, merged, in time order."""
    if n <= 0 or latency_ns.size == 0:
        return []
    n = min(n, latency_ns.size)
    idx = np.argpartition(latency_ns, latency_ns.size - n)[-n:]
    spans = sorted((max(0, int(start_ns[i]) - pad_ns),
                    int(start_ns[i] + latency_ns[i]) + pad_ns) for i in idx)
    return merge(spans)


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
