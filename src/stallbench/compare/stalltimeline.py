"""Stalls over time of one op in one variant, from the runs' time blocks
(analysis/stalltimeline.py): per-interval count, p99 and max, stall episodes, the longest gap,
per-worker counts, and whether the op starved. Part of the comparison (comparison.py builds one
per op and variant)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..analysis import histogram as hist
from ..analysis import stalltimeline as stalls_mod
from ..analysis import summary as sm
from ..analysis.summary import RESPONSE_SUFFIX


@dataclass
class StallSummary:
    """Stalls of one op in one variant, over all its iterations."""

    interval_ns: int
    threshold_ns: int
    timelines: list[dict[str, list]]  # per iteration: count, p99_ns, max_ns (None = no op)
    episodes: list[dict[str, Any]]  # iteration, start_ns, duration_ns, kind, worst_ns
    longest_stall: dict[str, Any]  # iteration, start_ns, duration_ns
    workers: list[dict[str, Any]]  # per iteration: counts {worker: n}, starved [workers]
    warmup_ns: int = 0  # timelines start at the run start; statistics after this




def interval_blocks(run: sm.RunSummary, interval_s: float) -> int:
    """How many of the run's time blocks make one interval of the stalls over time."""
    return max(1, int(round(interval_s * 1e9 / run.block_ns)))


def timeline(op: sm.OpSummary, run: sm.RunSummary, per: int) -> stalls_mod.Timeline:
    """Count, p99 and max per interval of `per` blocks (count and max exact; p99 from the
    blocks' coarse histograms)."""
    blocks = op.blocks
    intervals = max(-(-blocks // per), 1)
    pad = intervals * per - blocks
    count = np.pad(op.block_count, (0, pad)).reshape(intervals, per).sum(axis=1)
    peak = np.pad(op.block_max, (0, pad), constant_values=-1).reshape(intervals, per).max(axis=1)
    width = op.block_hist.shape[1]
    p99 = np.full(intervals, np.nan)
    if width:
        cells = np.pad(op.block_hist, ((0, pad), (0, 0))).reshape(intervals, per, width)
        cells = cells.sum(axis=1)
        edges = sm.coarse_lower_edges()[op.coarse_first:op.coarse_first + width + 1]
        p99 = hist.quantiles_from_counts(cells, np.array([0.99]), edges)[:, 0]
    peak = np.where(count > 0, peak, np.nan).astype(np.float64)
    p99 = np.where(count > 0, p99, np.nan)
    return stalls_mod.Timeline(per * run.block_ns, count.astype(np.int64), p99, peak)


def _full_intervals(run: sm.RunSummary, interval_ns: int) -> int:
    """How many intervals from the start lie wholly inside the run: the last one, which the
    run's end cuts (or which starts at it), holds too little time to be an episode."""
    return int(run.end_ns // interval_ns) if run.end_ns > 0 else 0


def stall_summary(ops: list[sm.OpSummary], runs: list[sm.RunSummary],
                  others_active: list[np.ndarray], iterations: list[int | None],
                  expected_workers: np.ndarray, interval_s: float,
                  threshold_ns: int) -> StallSummary:
    """Timelines, stall episodes, the longest gap and per-worker counts of one op in one
    variant's runs."""
    timelines, found, workers = [], [], []
    longest = {"iteration": None, "start_ns": 0, "duration_ns": 0}
    interval_ns = int(interval_s * 1e9)
    warmup_ns = 0
    for op, run, active, iteration in zip(ops, runs, others_active, iterations, strict=True):
        per = interval_blocks(run, interval_s)
        line = timeline(op, run, per)
        interval_ns = line.interval_ns
        warmup_ns = max(warmup_ns, run.warmup_ns)
        active = np.pad(active, (0, max(line.count.size - active.size, 0)))[:line.count.size]
        timelines.append({
            "count": line.count.tolist(),
            "p99_ns": [None if np.isnan(v) else float(v) for v in line.p99_ns],
            "max_ns": [None if np.isnan(v) else float(v) for v in line.max_ns],
        })
        for episode in stalls_mod.episodes(line, active, threshold_ns,
                                           _full_intervals(run, line.interval_ns)):
            if episode.start_ns + episode.duration_ns <= run.warmup_ns:
                continue
            found.append({"iteration": iteration, "start_ns": episode.start_ns,
                          "duration_ns": episode.duration_ns, "kind": episode.kind,
                          "worst_ns": episode.worst_ns})
        if op.gap_ns > longest["duration_ns"]:
            longest = {"iteration": iteration, "start_ns": op.gap_start_ns,
                       "duration_ns": op.gap_ns, "exact": op.gap_exact}
        counted = stalls_mod.worker_counts_from(op.workers, op.worker_count, expected_workers)
        workers.append({"iteration": iteration, "counts": counted.counts,
                        "starved": counted.starved,
                        "median": int(np.median(list(counted.counts.values())))
                        if counted.counts else None})
    return StallSummary(interval_ns, threshold_ns, timelines, found, longest,
                        workers, warmup_ns)


def activity(summaries: list[sm.RunSummary], interval_s: float) -> list[dict[str, np.ndarray]]:
    """Per run: op -> intervals in which that op started anything (for the starved test)."""
    per_run = []
    for summary in summaries:
        per = interval_blocks(summary, interval_s)
        intervals = max(-(-summary.blocks // per), 1)
        pad = intervals * per - summary.blocks
        per_run.append({name: np.pad(op.block_count, (0, pad)).reshape(intervals, per)
                        .sum(axis=1) > 0 for name, op in summary.ops.items()})
    return per_run


def others_active(activity: list[dict[str, np.ndarray]], op: str) -> list[np.ndarray]:
    out = []
    for per_op in activity:
        length = max((m.size for m in per_op.values()), default=1)
        active = np.zeros(length, dtype=bool)
        for name, mask in per_op.items():
            if name != op and not name.endswith(RESPONSE_SUFFIX):
                active[:mask.size] |= mask
        out.append(active)
    return out


STARVED_MIN_PER_INTERVAL = 5   # an op rarer than this per interval has empty intervals anyway


def starved(stalls: StallSummary, samples: int, baseline_samples: int,
            baseline_rate: float | None) -> bool:
    """Starved: the op stopped completing while other ops went on (a 'starved' stall episode
    or a worker far below the others) where the baseline completes it often enough that an
    empty interval means something, or it completed nothing where the baseline did. A variant
    that is merely slower is not starved."""
    if samples == 0:
        return baseline_samples > 0
    if (baseline_rate or 0.0) * stalls.interval_ns / 1e9 < STARVED_MIN_PER_INTERVAL:
        return False
    return any(e["kind"] == "starved" for e in stalls.episodes) or \
        any(w["starved"] for w in stalls.workers)
