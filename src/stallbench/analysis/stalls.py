"""Stalls over time: per-interval count, p99 and max of an op; stall episodes; starved workers."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

_LATENCY_BITS = 40  # latencies above 2**40 ns (18 min) are clipped for the per-interval sort


@dataclass
class Timeline:
    """One op in one run, per interval of `interval_ns` by start time."""

    interval_ns: int
    count: np.ndarray  # int64 per interval
    p99_ns: np.ndarray  # float, NaN where no op started
    max_ns: np.ndarray  # float, NaN where no op started


def timeline(latency_ns: np.ndarray, start_ns: np.ndarray, interval_ns: int,
             intervals: int) -> Timeline:
    """Count, p99 (nearest rank) and max of the ops that started in each interval."""
    count = np.zeros(intervals, dtype=np.int64)
    p99 = np.full(intervals, np.nan)
    peak = np.full(intervals, np.nan)
    if latency_ns.size == 0 or intervals == 0:
        return Timeline(interval_ns, count, p99, peak)
    slot = np.clip(start_ns // interval_ns, 0, intervals - 1).astype(np.int64)
    clipped = np.minimum(latency_ns, (1 << _LATENCY_BITS) - 1)
    keys = np.sort((slot << _LATENCY_BITS) | np.maximum(clipped, 0))
    sorted_slot = keys >> _LATENCY_BITS
    sorted_latency = keys & ((1 << _LATENCY_BITS) - 1)
    count = np.bincount(sorted_slot, minlength=intervals).astype(np.int64)
    ends = np.cumsum(count)
    begins = ends - count
    used = count > 0
    rank = begins[used] + np.ceil(0.99 * count[used]).astype(np.int64) - 1
    p99[used] = sorted_latency[rank]
    peak[used] = sorted_latency[ends[used] - 1]
    return Timeline(interval_ns, count, p99, peak)


@dataclass
class Episode:
    start_ns: int
    duration_ns: int
    kind: str  # "slow" (max above the threshold) or "starved" (no op while others went on)
    worst_ns: float | None  # the largest latency in the episode (slow)


def episodes(line: Timeline, others_active: np.ndarray, threshold_ns: int) -> list[Episode]:
    """Runs of consecutive intervals where the op's max exceeded the threshold or it completed
    nothing while other ops did."""
    slow = np.nan_to_num(line.max_ns, nan=0.0) > threshold_ns
    starved = (line.count == 0) & others_active
    found: list[Episode] = []
    for mask, kind in ((slow, "slow"), (starved, "starved")):
        padded = np.concatenate(([False], mask, [False]))
        edges = np.flatnonzero(np.diff(padded.astype(np.int8)))
        for first, stop in zip(edges[::2], edges[1::2], strict=True):
            worst = float(np.nanmax(line.max_ns[first:stop])) if kind == "slow" else None
            found.append(Episode(int(first * line.interval_ns),
                                 int((stop - first) * line.interval_ns), kind, worst))
    found.sort(key=lambda e: e.start_ns)
    return found


def longest_gap(latency_ns: np.ndarray, start_ns: np.ndarray, duration_ns: int) -> tuple[int, int]:
    """(start, length) of the longest time in the run during which no op of this kind
    completed, counting from the run start and up to the run end."""
    if latency_ns.size == 0:
        return 0, int(duration_ns)
    ends = np.sort(start_ns + latency_ns)
    points = np.concatenate(([0], ends, [max(int(duration_ns), int(ends[-1]))]))
    gaps = np.diff(points)
    i = int(np.argmax(gaps))
    return int(points[i]), int(gaps[i])


@dataclass
class WorkerCounts:
    counts: dict[int, int] = field(default_factory=dict)
    starved: list[int] = field(default_factory=list)  # workers far below the median worker


def worker_counts(worker: np.ndarray, expected: np.ndarray | None = None,
                  starved_fraction: float = 0.1) -> WorkerCounts:
    """Ops per worker (workers in `expected` that did nothing count 0); a worker is starved
    when it did fewer than 10% of the median worker's ops."""
    ids = np.union1d(np.unique(worker), expected if expected is not None else [])
    ids = ids.astype(np.int64)
    if ids.size == 0:
        return WorkerCounts()
    position = np.searchsorted(ids, worker)
    counts = np.bincount(position, minlength=ids.size)
    median = float(np.median(counts))
    starved = [int(w) for w, c in zip(ids, counts, strict=True) if c < starved_fraction * median]
    return WorkerCounts({int(w): int(c) for w, c in zip(ids, counts, strict=True)}, starved)
