"""Stalls over time: per-interval count, p99 and max of an op; stall episodes; starved workers."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import histogram as hist

_LATENCY_BITS = 40  # latencies above 2**40 ns (18 min) are clipped for the per-interval sort


@dataclass
class Timeline:
    """One op in one run, per interval of `interval_ns` by start time."""

    interval_ns: int
    count: np.ndarray  # int64 per interval
    p99_ns: np.ndarray  # float, NaN where no op started
    max_ns: np.ndarray  # float, NaN where no op started


def timeline(latency_ns: np.ndarray, start_ns: np.ndarray, interval_ns: int,
             intervals: int, buckets: np.ndarray | None = None) -> Timeline:
    """Count, p99 (nearest rank) and max of the ops that started in each interval.

    Exact, in time linear in the ops: a 2-D histogram (interval x log-linear bucket) finds the
    bucket that holds each interval's p99, and only the ops at or above it (about 1%) are
    sorted. `buckets` may pass histogram.bucket_index(latency_ns) when it is already known."""
    count = np.zeros(intervals, dtype=np.int64)
    p99 = np.full(intervals, np.nan)
    peak = np.full(intervals, np.nan)
    if latency_ns.size == 0 or intervals == 0:
        return Timeline(interval_ns, count, p99, peak)
    slot = np.clip(start_ns // interval_ns, 0, intervals - 1).astype(np.int64)
    latency = np.clip(latency_ns, 0, (1 << _LATENCY_BITS) - 1).astype(np.int64)
    count = np.bincount(slot, minlength=intervals).astype(np.int64)
    used = count > 0
    rank = np.ceil(0.99 * count).astype(np.int64)  # 1-based, ascending
    if buckets is None or latency_ns.max() >= 1 << _LATENCY_BITS:
        buckets = hist.bucket_index(latency)
    keep = _at_or_above_p99_bucket(buckets, slot, rank, intervals)
    sub_slot, sub_latency = (slot, latency) if keep is None else (slot[keep], latency[keep])
    keys = np.sort((sub_slot << _LATENCY_BITS) | sub_latency)
    sorted_latency = keys & ((1 << _LATENCY_BITS) - 1)
    ends = np.cumsum(np.bincount(sub_slot, minlength=intervals))
    # each interval's kept ops are its largest ones: the p99 is (count - rank) from the top
    p99[used] = sorted_latency[ends[used] - 1 - (count[used] - rank[used])]
    peak[used] = sorted_latency[ends[used] - 1]
    return Timeline(interval_ns, count, p99, peak)


_MAX_CELLS = 8_000_000


def _at_or_above_p99_bucket(bucket: np.ndarray, slot: np.ndarray, rank: np.ndarray,
                            intervals: int) -> np.ndarray | None:
    """Mask of the ops in or above the histogram bucket that holds their interval's p99."""
    first = int(bucket.min())
    width = int(bucket.max()) - first + 1
    if intervals * width > _MAX_CELLS:
        return None  # a very long run with a very wide range: sort everything instead
    cells = np.bincount(slot * width + (bucket - first), minlength=intervals * width)
    cumulative = np.cumsum(cells.reshape(intervals, width), axis=1)
    p99_bucket = (cumulative < rank[:, None]).sum(axis=1)
    return (bucket - first) >= p99_bucket[slot]


@dataclass
class Episode:
    start_ns: int
    duration_ns: int
    kind: str  # "slow" (max above the threshold) or "starved" (no op while others went on)
    worst_ns: float | None  # the largest latency in the episode (slow)


def episodes(line: Timeline, others_active: np.ndarray, threshold_ns: int,
             full_intervals: int | None = None) -> list[Episode]:
    """Runs of consecutive intervals where the op's max exceeded the threshold or it completed
    nothing while other ops did, among the first `full_intervals` (those wholly inside the
    run; all without)."""
    usable = np.arange(line.count.size) < (line.count.size if full_intervals is None
                                           else full_intervals)
    slow = (np.nan_to_num(line.max_ns, nan=0.0) > threshold_ns) & usable
    starved = (line.count == 0) & others_active & usable
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


_GAP_BINS = 1_000_000


def longest_gap(latency_ns: np.ndarray, start_ns: np.ndarray, duration_ns: int) -> tuple[int, int]:
    """(start, length) of the longest time in the run during which no op of this kind
    completed, counting from the run start and up to the run end.

    Linear time: completions are binned finely; a gap that crosses bins is exactly the first
    completion of the next busy bin minus the last of the previous one. Only when no such gap
    is longer than a bin (then the answer may lie inside a bin) are the completions sorted."""
    if latency_ns.size == 0:
        return 0, int(duration_ns)
    ends = (start_ns + latency_ns).astype(np.int64)
    run_end = max(int(duration_ns), int(ends.max()))
    width = max(run_end // _GAP_BINS, 1)
    bins = ends // width
    n_bins = int(run_end // width) + 1
    first = np.full(n_bins, np.iinfo(np.int64).max)
    last = np.full(n_bins, -1, dtype=np.int64)
    np.minimum.at(first, bins, ends)
    np.maximum.at(last, bins, ends)
    busy = np.flatnonzero(last >= 0)
    points_from = np.concatenate(([0], last[busy]))
    points_to = np.concatenate((first[busy], [run_end]))
    gaps = points_to - points_from
    i = int(np.argmax(gaps))
    if gaps[i] >= width:
        return int(points_from[i]), int(gaps[i])
    ordered = np.sort(ends)
    points = np.concatenate(([0], ordered, [run_end]))
    steps = np.diff(points)
    i = int(np.argmax(steps))
    return int(points[i]), int(steps[i])


def decimate(t: np.ndarray, values: np.ndarray, points: int) -> tuple[np.ndarray, np.ndarray]:
    """At most `points` points: consecutive samples averaged in equal groups (a rate averaged
    over its samples' intervals stays the rate of the longer interval when they are equal)."""
    if t.size <= points:
        return t, values
    groups = np.array_split(np.arange(t.size), points)
    return (np.array([t[g].mean() for g in groups]), np.array([values[g].mean() for g in groups]))


@dataclass
class WorkerCounts:
    counts: dict[int, int] = field(default_factory=dict)
    starved: list[int] = field(default_factory=list)  # workers far below the median worker


def worker_counts_from(ids: np.ndarray, counts: np.ndarray, expected: np.ndarray | None = None,
                       starved_fraction: float = 0.1) -> WorkerCounts:
    """Ops per worker (workers in `expected` that did nothing count 0); a worker is starved
    when it did fewer than 10% of the median worker's ops."""
    ids = np.asarray(ids, dtype=np.int64)
    all_ids = np.union1d(ids, expected if expected is not None else []).astype(np.int64)
    if all_ids.size == 0:
        return WorkerCounts()
    full = np.zeros(all_ids.size, dtype=np.int64)
    full[np.searchsorted(all_ids, ids)] = counts
    median = float(np.median(full))
    starved = [int(w) for w, c in zip(all_ids, full, strict=True) if c < starved_fraction * median]
    return WorkerCounts({int(w): int(c) for w, c in zip(all_ids, full, strict=True)}, starved)
