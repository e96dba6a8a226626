"""Is a run stationary? A level shift of an op's median or of its rate inside one run.

A run that starts with a cold cache reads from the device for a while and then from memory; a
run whose memory limit starts to bind half way changes regime. Pooling both regimes gives
statistics that describe neither, and the share of each regime varies from run to run. A
regime change shows in the latency's median, or only in the rate: readers of a cgroup that
fills slow down in their slowest ops and in how many they complete (a guest's readers from
~2,500 to ~1,450 ops/s, their median barely moving), so both are checked.

Method: a level per stretch of time after the warm-up, on the log scale: the median of each time
block with at least MIN_BLOCK_OPS ops (from the blocks' coarse histograms), and the rate of
windows of whole blocks holding MIN_BLOCK_OPS ops on average; the single split that minimises
the within-segment sum of squares (least-squares change point), each segment at least
MIN_SEGMENT of the levels; the shift, the difference of the two segments' medians (robust to
bursts), is called when it is at least MIN_SHIFT (a factor) and at least MIN_T robust standard
errors (the residuals' MAD), conservative because the split was chosen to be the largest.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import histogram as hist
from . import summary as sm

MIN_BLOCK_OPS = 20
MIN_BLOCKS = 8
MIN_SHIFT = 1.5
MIN_T = 6.0
MIN_SEGMENT = 0.15
MEDIAN, RATE = "p50", "rate"


@dataclass
class LevelShift:
    at_ns: int              # when the new level started (on the run's clock)
    before: float           # the level before: median latency in ns, or ops/s (`stat`)
    after: float            # the level after
    early: bool             # in the first half of the run: a warm-up would remove it
    suggested_warmup_s: int | None
    stat: str = MEDIAN      # MEDIAN or RATE


def level_shift(op: sm.OpSummary, run: sm.RunSummary) -> LevelShift | None:
    """The run's largest shift of the block medians, else of the rate, or None when both are
    stationary enough."""
    return _median_shift(op, run) or _rate_shift(op, run)


@dataclass
class Levels:
    """An op's level per stretch of time, on the log scale: `log_level[i]` is the stretch that
    starts at block `first_block[i]` of the run (block numbers of the run's clock)."""

    stat: str
    first_block: np.ndarray     # int64, increasing
    log_level: np.ndarray       # float64


def quantile_levels(op: sm.OpSummary, first: int, probability: float = 0.5,
                    min_ops: int = MIN_BLOCK_OPS, stat: str = MEDIAN) -> Levels | None:
    """The `probability` quantile of each block from `first` on that holds at least `min_ops`
    ops (from the blocks' coarse histograms), or None with fewer than MIN_BLOCKS such blocks."""
    blocks = op.block_hist[first:]
    counts = blocks.sum(axis=1)
    used = np.flatnonzero(counts >= min_ops)
    if used.size < MIN_BLOCKS:
        return None
    edges = sm.coarse_lower_edges()[op.coarse_first:op.coarse_first + blocks.shape[1] + 1]
    values = hist.quantiles_from_counts(blocks[used], np.array([probability]), edges)[:, 0]
    return Levels(stat, first + used.astype(np.int64), np.log(np.maximum(values, 1.0)))


def rate_levels(op: sm.OpSummary, run: sm.RunSummary, first: int) -> Levels | None:
    """The rate of windows of whole blocks from `first` on that hold MIN_BLOCK_OPS ops on
    average (Poisson noise ~0.2), leaving out the span's cut ends, or None with fewer than
    MIN_BLOCKS windows."""
    counts = op.block_count[first:].astype(np.float64)
    seconds = run.block_durations_ns(op.blocks)[first:] / 1e9
    full = float(run.block_ns) / 1e9
    if counts.size == 0 or counts.sum() == 0:
        return None
    width = max(1, int(np.ceil(MIN_BLOCK_OPS * counts.size / counts.sum())))
    windows = counts.size // width
    if windows < MIN_BLOCKS:
        return None
    n = counts[:windows * width].reshape(windows, width).sum(axis=1)
    t = seconds[:windows * width].reshape(windows, width).sum(axis=1)
    whole = np.flatnonzero(t >= 0.5 * full * width)   # the span's cut ends are too short
    if whole.size < MIN_BLOCKS:
        return None
    return Levels(RATE, first + whole.astype(np.int64) * width,
                  np.log((n[whole] + 0.5) / t[whole]))


def _median_shift(op: sm.OpSummary, run: sm.RunSummary) -> LevelShift | None:
    return _shift_of(run, quantile_levels(op, run.warmup_blocks))


def _rate_shift(op: sm.OpSummary, run: sm.RunSummary) -> LevelShift | None:
    return _shift_of(run, rate_levels(op, run, run.warmup_blocks))


def _shift_of(run: sm.RunSummary, levels: Levels | None) -> LevelShift | None:
    if levels is None:
        return None
    found = _change_point(levels.log_level)
    if found is None:
        return None
    split, before, after = found
    return _shift(run, int(levels.first_block[split]) * run.block_ns, before, after,
                  levels.stat)


def _change_point(y: np.ndarray) -> tuple[int, float, float] | None:
    """The least-squares split of the levels `y` and the medians before and after it, when
    the shift is at least MIN_SHIFT and MIN_T robust standard errors; else None."""
    m = y.size
    cumulative = np.cumsum(y)
    squares = np.cumsum(y ** 2)
    best, best_sse = None, np.inf
    shortest = max(2, int(np.ceil(MIN_SEGMENT * m)))
    for split in range(shortest, m - shortest + 1):
        left, right = cumulative[split - 1], cumulative[-1] - cumulative[split - 1]
        left_sq, right_sq = squares[split - 1], squares[-1] - squares[split - 1]
        sse = (left_sq - left ** 2 / split) + (right_sq - right ** 2 / (m - split))
        if sse < best_sse:
            best, best_sse = split, sse
    if best is None:
        return None
    before, after = y[:best], y[best:]
    shift = float(np.median(after) - np.median(before))
    residual = np.concatenate((before - np.median(before), after - np.median(after)))
    sd = 1.4826 * float(np.median(np.abs(residual)))
    sd = max(sd, 1e-3)
    t = abs(shift) / (sd * np.sqrt(1.0 / before.size + 1.0 / after.size))
    if abs(shift) < np.log(MIN_SHIFT) or t < MIN_T:
        return None
    return best, float(np.exp(np.median(before))), float(np.exp(np.median(after)))


def _shift(run: sm.RunSummary, at_ns: int, before: float, after: float,
           stat: str) -> LevelShift:
    """A shift at `at_ns`: early when in the first half of the run's span; then the warm-up
    (counted from the first op) that would leave it out."""
    early = bool(at_ns < (run.start_ns + run.end_ns) / 2)
    warmup = int(np.ceil((at_ns + run.block_ns - run.start_ns) / 1e9)) if early else None
    return LevelShift(int(at_ns), before, after, early, warmup, stat)
