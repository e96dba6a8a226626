"""95% intervals for the change candidate/baseline - 1 of a statistic, and the verdict words.

Two methods, chosen by the number of runs per variant:

- one run each ("within-run precision"): for a percentile, the distribution-free order-statistic
  interval of each variant (fractional ranks from the normal approximation to the binomial)
  gives the standard error of its log quantile; the two are combined on the log scale;
  for rate and mean, batch means over equal time slices of the run. This says how precisely the
  run measured its own distribution, not how much another run would differ.
- two or more runs each ("between runs"): the run is the unit of replication. Runs are resampled
  with replacement (per-run log-linear histograms, so the cost does not grow with the samples);
  the bootstrap standard error of the log statistic, corrected for small k (k/(k-1)) and combined
  with a Student t critical value (Welch degrees of freedom), gives the interval around the
  pooled estimate. A plain percentile bootstrap over 2-5 runs covers far less than 95%.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from . import histogram as hist

CONFIDENCE = 0.95
BOOTSTRAP_RESAMPLES = 1000
BATCHES = 20
METHOD_WITHIN_RUN = "within-run precision (order statistics; batch means for rate and mean)"
METHOD_BETWEEN_RUNS = "between runs (bootstrap over runs, t interval)"


@functools.cache
def _scipy_stats():
    """scipy.stats, imported on first use: it takes seconds, and most commands never need it."""
    from scipy import stats

    return stats


@dataclass
class Change:
    """ratio - 1 of candidate vs baseline with its interval (None where there is none)."""

    change: float | None
    low: float | None = None
    high: float | None = None
    p_value: float | None = None
    p_adjusted: float | None = None
    verdict: str = "n/a"  # better | worse | same | unclear | n/a
    note: str | None = None


def ratio_change(candidate: float | None, baseline: float | None) -> float | None:
    if candidate is None or baseline is None or not np.isfinite(candidate) \
            or not np.isfinite(baseline) or baseline <= 0:
        return None
    return candidate / baseline - 1.0


# ----------------------------------------------------------------------------------------------
# one run per variant


@functools.lru_cache(maxsize=4096)
def order_statistic_ranks(n: int, probability: float,
                          confidence: float = CONFIDENCE) -> tuple[int, int]:
    """0-based ranks (low, high) of the distribution-free interval for the p-quantile:
    P(x[low] <= q_p <= x[high]) >= confidence for any continuous distribution."""
    alpha = 1.0 - confidence
    low = int(_scipy_stats().binom.ppf(alpha / 2, n, probability)) - 1
    high = int(_scipy_stats().binom.ppf(1 - alpha / 2, n, probability))
    return max(low, 0), min(high, n - 1)


def _fractional_positions(n: int, p: float,
                          confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """0-based positions of the estimate and of the interval ends: (n-1)p -+ z*sqrt(np(1-p))."""
    centre = p * (n - 1)
    half = _scipy_stats().norm.ppf(0.5 + confidence / 2) * np.sqrt(n * p * (1 - p))
    return centre, min(max(centre - half, 0.0), n - 1.0), min(max(centre + half, 0.0), n - 1.0)


def quantile_ranks(n: int, probabilities: list[float]) -> np.ndarray:
    """All ranks that quantiles_with_interval needs (for one np.partition call)."""
    ranks: set[int] = {0, n - 1}
    for p in probabilities:
        for position in _fractional_positions(n, p):
            ranks.update((int(np.floor(position)), min(int(np.ceil(position)), n - 1)))
    return np.array(sorted(ranks), dtype=np.int64)


def _at(partitioned: np.ndarray, position: float) -> float:
    below_i = int(np.floor(position))
    above_i = min(int(np.ceil(position)), partitioned.size - 1)
    below, above = float(partitioned[below_i]), float(partitioned[above_i])
    return below + (above - below) * (position - below_i)


def quantiles_with_interval(partitioned: np.ndarray,
                            probabilities: list[float]) -> list[tuple[float, float, float]]:
    """(estimate, low, high) per probability from an array partitioned at quantile_ranks().

    The estimate interpolates between order statistics as np.quantile does; low and high are
    the order statistics at the fractional ranks (n-1)p -+ 1.96*sqrt(np(1-p)), a
    distribution-free 95% interval for the quantile."""
    return [tuple(_at(partitioned, position)
                  for position in _fractional_positions(partitioned.size, p))
            for p in probabilities]


def combine_log_intervals(candidate: tuple[float, float, float],
                          baseline: tuple[float, float, float],
                          confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """Interval for candidate/baseline - 1 from two independent (estimate, low, high) triples.

    Each interval gives the standard error of its log quantile (width / 2z); the log ratio is
    then normal with the two variances added. (Combining the asymmetric halves instead covers
    ~97% at p99 with a few thousand samples: the tail intervals are wider than 2z·sd.)"""
    z = _scipy_stats().norm.ppf(0.5 + confidence / 2)
    c, cl, ch = (np.log(max(v, 1.0)) for v in candidate)
    b, bl, bh = (np.log(max(v, 1.0)) for v in baseline)
    log_ratio = c - b
    half = z * np.hypot((ch - cl) / (2 * z), (bh - bl) / (2 * z))
    return float(np.expm1(log_ratio)), float(np.expm1(log_ratio - half)), \
        float(np.expm1(log_ratio + half))


def batch_rate_log_se(start_ns: np.ndarray, duration_ns: float,
                      batches: int = BATCHES) -> tuple[float, float, int] | None:
    """(log rate, its standard error, degrees of freedom) from equal time slices of one run."""
    if duration_ns <= 0 or start_ns.size == 0:
        return None
    slot = np.minimum((start_ns.astype(np.float64) / duration_ns * batches).astype(np.int64),
                      batches - 1)
    counts = np.bincount(np.maximum(slot, 0), minlength=batches).astype(np.float64)
    mean = counts.mean()
    if mean <= 0:
        return None
    se = counts.std(ddof=1) / np.sqrt(batches) / mean
    return float(np.log(start_ns.size / (duration_ns / 1e9))), float(se), batches - 1


def batch_mean_log_se(latency_ns: np.ndarray, start_ns: np.ndarray, duration_ns: float,
                      batches: int = BATCHES) -> tuple[float, float, int] | None:
    """(log mean latency, standard error, dof) by batch means (ratio estimator) over time."""
    n = latency_ns.size
    if n < 2 or duration_ns <= 0:
        return None
    slot = np.minimum((start_ns.astype(np.float64) / duration_ns * batches).astype(np.int64),
                      batches - 1)
    slot = np.maximum(slot, 0)
    counts = np.bincount(slot, minlength=batches).astype(np.float64)
    sums = np.bincount(slot, weights=latency_ns.astype(np.float64), minlength=batches)
    mean = sums.sum() / n
    if mean <= 0:
        return None
    used = counts > 0
    k = int(used.sum())
    if k < 2:
        return None
    residual = sums[used] - mean * counts[used]
    variance = k / (k - 1) * np.sum(residual ** 2) / n ** 2
    return float(np.log(mean)), float(np.sqrt(variance) / mean), k - 1


def combine_log_se(candidate: tuple[float, float, int], baseline: tuple[float, float, int],
                   confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """Welch t interval for exp(log c - log b) - 1."""
    log_ratio = candidate[0] - baseline[0]
    se = float(np.hypot(candidate[1], baseline[1]))
    dof = welch_dof(candidate[1] ** 2, candidate[2], baseline[1] ** 2, baseline[2])
    half = _scipy_stats().t.ppf(0.5 + confidence / 2, dof) * se
    return float(np.expm1(log_ratio)), float(np.expm1(log_ratio - half)), \
        float(np.expm1(log_ratio + half))


def welch_dof(var_a: float, dof_a: int, var_b: float, dof_b: int) -> float:
    denominator = (var_a ** 2 / max(dof_a, 1) if var_a > 0 else 0.0) + \
        (var_b ** 2 / max(dof_b, 1) if var_b > 0 else 0.0)
    if denominator <= 0:
        return float(max(dof_a + dof_b, 1))
    return float(max((var_a + var_b) ** 2 / denominator, 1.0))


# ----------------------------------------------------------------------------------------------
# several runs per variant


@dataclass
class RunSummaries:
    """What the bootstrap over runs needs from each run of one variant, for one op."""

    counts: np.ndarray  # (runs, buckets) histogram counts, trimmed to a common bucket range
    samples: np.ndarray  # (runs,)
    sum_ns: np.ndarray  # (runs,) sum of latencies
    min_ns: np.ndarray  # (runs,)
    max_ns: np.ndarray  # (runs,)
    duration_s: np.ndarray  # (runs,)


def resample_weights(runs: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """(resamples, runs) how often each run is drawn in each bootstrap resample."""
    picks = rng.integers(0, runs, size=(resamples, runs))
    weights = np.zeros((resamples, runs))
    np.add.at(weights, (np.repeat(np.arange(resamples), runs), picks.ravel()), 1.0)
    return weights


def bootstrap_log_statistics(summary: RunSummaries, weights: np.ndarray,
                             probabilities: list[float],
                             edges: np.ndarray) -> dict[str, np.ndarray]:
    """Bootstrap replicates of the log of each pooled statistic (rows: resamples)."""
    counts = weights @ summary.counts.astype(np.float64)
    quantiles = hist.quantiles_from_counts(counts, np.array(probabilities), edges)
    samples = weights @ summary.samples
    duration = weights @ summary.duration_s
    with np.errstate(divide="ignore", invalid="ignore"):
        out = {
            "quantiles": np.log(np.maximum(quantiles, 1.0)),
            "rate": np.log(samples / duration),
            "mean": np.log(np.maximum((weights @ summary.sum_ns) / samples, 1.0)),
        }
    drawn = weights > 0
    out["min"] = np.log(np.maximum(np.where(drawn, summary.min_ns[None, :], np.inf).min(axis=1),
                                   1.0))
    out["max"] = np.log(np.maximum(np.where(drawn, summary.max_ns[None, :], 0).max(axis=1), 1.0))
    return out


def between_runs_interval(estimate_change: float, replicates_candidate: np.ndarray,
                          runs_candidate: int, replicates_baseline: np.ndarray,
                          runs_baseline: int,
                          confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """t interval around the pooled estimate from bootstrap variances of the log statistic."""
    if not np.isfinite(replicates_candidate).all() or not np.isfinite(replicates_baseline).all():
        return None
    var_c = float(np.var(replicates_candidate, ddof=1)) * runs_candidate / (runs_candidate - 1)
    var_b = float(np.var(replicates_baseline, ddof=1)) * runs_baseline / (runs_baseline - 1)
    dof = welch_dof(var_c, runs_candidate - 1, var_b, runs_baseline - 1)
    half = _scipy_stats().t.ppf(0.5 + confidence / 2, dof) * np.sqrt(var_c + var_b)
    log_ratio = np.log1p(estimate_change)
    return float(np.expm1(log_ratio - half)), float(np.expm1(log_ratio + half))


# ----------------------------------------------------------------------------------------------
# verdicts


def p_value_from_interval(change: float, low: float, high: float,
                          confidence: float = CONFIDENCE) -> float:
    """Two-sided p-value of 'no change', reading the interval as normal on the log scale."""
    log_ratio = np.log1p(change)
    bound = np.log1p(low) if log_ratio > 0 else np.log1p(high)
    z_crit = _scipy_stats().norm.ppf(0.5 + confidence / 2)
    se = abs(log_ratio - bound) / z_crit
    if se <= 0:
        return 0.0 if log_ratio != 0 else 1.0
    return float(2 * _scipy_stats().norm.sf(abs(log_ratio) / se))


def benjamini_hochberg(p_values: list[float]) -> list[float]:
    """BH-adjusted p-values (false discovery rate), same order as given."""
    m = len(p_values)
    if m == 0:
        return []
    p = np.asarray(p_values, dtype=np.float64)
    order = np.argsort(p)
    scaled = p[order] * m / np.arange(1, m + 1)
    adjusted_sorted = np.minimum.accumulate(scaled[::-1])[::-1]
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(adjusted_sorted, 1.0)
    return adjusted.tolist()


def verdict(change: Change, higher_is_better: bool, noise: float,
            alpha: float = 1.0 - CONFIDENCE) -> str:
    """better/worse: interval excludes 0, adjusted p < alpha and |change| > noise;
    same: the whole interval lies within +-noise; unclear: otherwise; n/a: no interval."""
    if change.change is None or change.low is None or change.high is None:
        return "n/a"
    excludes_zero = change.low > 0 or change.high < 0
    significant = change.p_adjusted is None or change.p_adjusted < alpha
    if excludes_zero and significant and abs(change.change) > noise:
        larger = change.change > 0
        return "better" if larger == higher_is_better else "worse"
    if -noise <= change.low and change.high <= noise:
        return "same"
    return "unclear"
