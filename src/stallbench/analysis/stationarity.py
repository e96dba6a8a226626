"""Is a run stationary? A level shift of an op's median inside one run.

A run that starts with a cold cache reads from the device for a while and then from memory; a
run whose memory limit starts to bind half way changes regime. Pooling both regimes gives
percentiles that describe neither, and the share of each regime varies from run to run.

Method: the median of each time block after the warm-up (blocks with at least MIN_BLOCK_OPS ops,
from the blocks' coarse histograms) on the log scale; the single split that minimises the
within-segment sum of squares (least-squares change point), each segment at least MIN_SEGMENT
of the blocks; the shift, the difference of the two segments' medians (robust to bursts), is
called when it is at least MIN_SHIFT (a factor) and at least MIN_T robust standard errors (the
residuals' MAD), conservative because the split was chosen to be the largest.
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


@dataclass
class LevelShift:
    at_ns: int              # when the new level started (since the run start)
    before_ns: float        # median latency before
    after_ns: float         # median latency after
    early: bool             # in the first half of the run: a warm-up would remove it
    suggested_warmup_s: int | None


def level_shift(op: sm.OpSummary, run: sm.RunSummary) -> LevelShift | None:
    """The run's largest shift of the block medians, or None when it is stationary enough."""
    first = run.warmup_blocks
    blocks = op.block_hist[first:]
    counts = blocks.sum(axis=1)
    used = np.flatnonzero(counts >= MIN_BLOCK_OPS)
    if used.size < MIN_BLOCKS:
        return None
    edges = sm.coarse_lower_edges()[op.coarse_first:op.coarse_first + blocks.shape[1] + 1]
    medians = hist.quantiles_from_counts(blocks[used], np.array([0.5]), edges)[:, 0]
    y = np.log(np.maximum(medians, 1.0))
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
    at_ns = int((first + used[best]) * run.block_ns)
    run_end = max(run.duration_ns, (first + blocks.shape[0]) * run.block_ns)
    early = at_ns < run_end / 2
    warmup = int(np.ceil((at_ns + run.block_ns) / 1e9)) if early else None
    return LevelShift(at_ns, float(np.exp(np.median(before))), float(np.exp(np.median(after))),
                      early, warmup)
