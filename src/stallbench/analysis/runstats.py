"""One run's estimate of a statistic and that estimate's own variance, from groups of
contiguous time blocks: the e_ji of the two-level model (intervals.py has the model and why)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import histogram as hist
from . import summary as sm
from .tdist import special

MIN_GROUPS = 4
MAX_GROUPS = 32
MIN_BLOCKS_PER_GROUP = 2
MIN_TAIL_PER_GROUP = 5
QUARTERS = 4
WANDERING_ALPHA = 0.001


@dataclass
class RunStatistic:
    """log of one statistic of one run, and the variance of that log from its time blocks."""

    log_value: float | None
    within_var: float | None    # None: too few blocks or tail samples to estimate it
    groups: int = 0
    quarter_var: float | None = None   # variance of the statistic over the run's quarters


def _groups(blocks: int, wanted: int) -> list[np.ndarray]:
    if blocks <= 0 or wanted <= 0:
        return []
    return [g for g in np.array_split(np.arange(blocks), min(wanted, blocks)) if g.size]


def quantile_statistics(op: sm.OpSummary, warmup_blocks: int,
                        probabilities: list[float]) -> list[RunStatistic]:
    """Per probability: the run's log quantile (fine histogram) and its batch variance."""
    n = int(op.histogram.sum())
    if n == 0:
        return [RunStatistic(None, None) for _ in probabilities]
    estimates = hist.quantiles_from_counts(op.histogram, np.asarray(probabilities),
                                           hist.bucket_lower_edges())[0]
    blocks = op.block_hist[warmup_blocks:]
    coarse_edges = sm.coarse_lower_edges()[op.coarse_first:op.coarse_first + blocks.shape[1] + 1]
    out = []
    cumulative_blocks = blocks.shape[0]
    for p, estimate in zip(probabilities, estimates, strict=True):
        log_value = float(np.log(max(estimate, 1.0)))
        wanted = min(MAX_GROUPS, int(round(n * (1.0 - p))) // MIN_TAIL_PER_GROUP,
                     cumulative_blocks // MIN_BLOCKS_PER_GROUP)
        if wanted < MIN_GROUPS:
            out.append(RunStatistic(log_value, None))
            continue
        groups = _groups(cumulative_blocks, wanted)
        counts = np.stack([blocks[g].sum(axis=0) for g in groups])
        if (counts.sum(axis=1) > 0).sum() < MIN_GROUPS:
            out.append(RunStatistic(log_value, None))
            continue
        left_out = counts.sum(axis=0)[None, :] - counts
        values = hist.quantiles_from_counts(left_out, np.array([p]), coarse_edges)[:, 0]
        logs = np.log(np.maximum(values, 1.0))
        g = logs.size
        jackknife = (g - 1) / g * float(np.sum((logs - logs.mean()) ** 2))
        quarters = np.stack([blocks[q].sum(axis=0) for q in _groups(cumulative_blocks, QUARTERS)])
        drift = None
        if quarters.shape[0] == QUARTERS and (quarters.sum(axis=1) * (1 - p)
                                              >= MIN_TAIL_PER_GROUP).all():
            level = hist.quantiles_from_counts(quarters, np.array([p]), coarse_edges)[:, 0]
            drift = float(np.var(np.log(np.maximum(level, 1.0)), ddof=1))
        out.append(RunStatistic(log_value, jackknife, g, drift))
    return out


def wandering(runs: list[RunStatistic]) -> float:
    """Variance of the runs' quarter levels beyond sampling (each quarter alone has about
    QUARTERS times the whole run's variance), counted only when the quarters differ
    significantly more than sampling explains (χ² test at 1%): 0 for a stationary run."""
    usable = [r for r in runs if r.quarter_var is not None and r.within_var]
    if not usable:
        return 0.0
    statistic = sum((QUARTERS - 1) * r.quarter_var / (QUARTERS * r.within_var) for r in usable)
    dof = (QUARTERS - 1) * len(usable)
    if float(special().chdtrc(dof, statistic)) >= WANDERING_ALPHA:
        return 0.0
    return max(0.0, float(np.mean([r.quarter_var - QUARTERS * r.within_var for r in usable])))


def mean_statistic(op: sm.OpSummary, warmup_blocks: int) -> RunStatistic:
    """log mean latency and its variance by batch means (ratio estimator) over time."""
    count = op.block_count[warmup_blocks:].astype(np.float64)
    total = op.block_sum[warmup_blocks:].astype(np.float64)
    return ratio_statistic(total, count)


def rate_statistic(op: sm.OpSummary, warmup_blocks: int,
                   block_seconds: np.ndarray) -> RunStatistic:
    """log ops/s and its variance by batch means over time (counts per group over its time)."""
    count = op.block_count[warmup_blocks:].astype(np.float64)
    return ratio_statistic(count, np.asarray(block_seconds[warmup_blocks:], np.float64))


def ratio_statistic(numerator: np.ndarray, denominator: np.ndarray) -> RunStatistic:
    """log(Σ numerator / Σ denominator) over a run's time blocks and its variance by batch
    means (the ratio estimator over groups of contiguous blocks)."""
    if denominator.sum() <= 0 or numerator.sum() <= 0:
        return RunStatistic(None, None)
    ratio = numerator.sum() / denominator.sum()
    groups = _groups(numerator.size, min(MAX_GROUPS, numerator.size // MIN_BLOCKS_PER_GROUP))
    if len(groups) < MIN_GROUPS:
        return RunStatistic(float(np.log(ratio)), None)
    num = np.array([numerator[g].sum() for g in groups])
    den = np.array([denominator[g].sum() for g in groups])
    k = len(groups)
    residual = num - ratio * den
    variance = float(k / (k - 1) * np.sum(residual ** 2) / den.sum() ** 2 / ratio ** 2)
    quarters = _groups(numerator.size, QUARTERS)
    q_num = np.array([numerator[q].sum() for q in quarters])
    q_den = np.array([denominator[q].sum() for q in quarters])
    drift = None
    if len(quarters) == QUARTERS and (q_num > 0).all() and (q_den > 0).all():
        drift = float(np.var(np.log(q_num / q_den), ddof=1))
    return RunStatistic(float(np.log(ratio)), variance, k, drift)
