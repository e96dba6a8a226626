"""How long the traced waits lasted: bcc-style power-of-two histograms of the trace table's
reclaim, throttle and block durations. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .section import Bin


def log2_histogram(durations_ns: np.ndarray) -> list[dict[str, int]]:
    """bcc-style power-of-two histogram in µs: rows {lo_ns, hi_ns, count}, zeros in the middle
    kept (the shape shows), leading and trailing empty buckets dropped."""
    values = np.asarray(durations_ns, dtype=np.int64)
    values = values[values >= 0]
    if len(values) == 0:
        return []
    usec = np.maximum(values // 1000, 0)
    # bucket k holds [2**(k-1), 2**k) µs; bucket 0 holds 0 µs
    bucket = np.where(usec == 0, 0, np.floor(np.log2(np.maximum(usec, 1))).astype(np.int64) + 1)
    counts = np.bincount(bucket)
    rows = []
    for k, count in enumerate(counts):
        lo = 0 if k == 0 else (1 << (k - 1))
        hi = 1 if k == 0 else (1 << k)
        rows.append({"lo_ns": lo * 1000, "hi_ns": hi * 1000, "count": int(count)})
    first = next(i for i, r in enumerate(rows) if r["count"])
    return rows[first:]


HISTOGRAM_GROUPS = ("reclaim", "throttle", "block")


def histograms(trace: Sequence[tuple[np.ndarray, np.ndarray]]) -> dict[str, list[Bin]]:
    """(category, duration_ns) of each run's trace table -> per group the log2 histogram."""
    out = {}
    for name in HISTOGRAM_GROUPS:
        parts = [np.asarray(d)[np.asarray(c, dtype=object) == name] for c, d in trace]
        if parts and sum(p.size for p in parts):
            out[name] = [Bin(**b) for b in log2_histogram(np.concatenate(parts))]
    return out
