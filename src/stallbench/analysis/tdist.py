"""The t and normal distributions behind every interval and p-value: quantiles, the
Welch–Satterthwaite degrees of freedom, a Welch interval from log standard errors, a p-value read
from an interval, and the Benjamini–Hochberg adjustment (intervals.py has the model)."""

from __future__ import annotations

import functools

import numpy as np

CONFIDENCE = 0.95   # of every interval


@functools.cache
def special():
    """scipy.special, imported on first use (0.4 s; scipy.stats would take 2 s)."""
    from scipy import special

    return special


def t_quantile(probability: float, dof: float) -> float:
    """Student t quantile."""
    return float(special().stdtrit(dof, probability))


def t_two_sided_p(t: float, dof: float) -> float:
    """P(|T| >= |t|) for Student t with `dof` degrees of freedom."""
    return float(2 * special().stdtr(dof, -abs(t)))


def chi2_quantile(dof: float, probability: float) -> float:
    """The χ² quantile: P(X <= x) = probability at dof degrees of freedom."""
    return float(special().chdtri(dof, 1.0 - probability))


def z_quantile(probability: float) -> float:
    return float(special().ndtri(probability))


def welch_dof(terms: list[tuple[float, float]]) -> float:
    """Welch-Satterthwaite degrees of freedom of a sum of variance terms (variance, dof)."""
    total = sum(v for v, _ in terms)
    denominator = sum(v ** 2 / d for v, d in terms if v > 0 and d > 0)
    if total <= 0 or denominator <= 0:
        return float(max(sum(d for _, d in terms), 1.0))
    return float(max(total ** 2 / denominator, 1.0))



def combine_log_se(candidate: tuple[float, float, int], baseline: tuple[float, float, int],
                   confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """Welch t interval for exp(log c - log b) - 1 from (log value, standard error, dof)."""
    log_ratio = candidate[0] - baseline[0]
    se = float(np.hypot(candidate[1], baseline[1]))
    dof = welch_dof([(candidate[1] ** 2, candidate[2]), (baseline[1] ** 2, baseline[2])])
    half = t_quantile(0.5 + confidence / 2, dof) * se
    return float(np.expm1(log_ratio)), float(np.expm1(log_ratio - half)), \
        float(np.expm1(log_ratio + half))


def p_value_from_interval(change: float, low: float, high: float,
                          confidence: float = CONFIDENCE) -> float:
    """Two-sided p-value of 'no change', reading the interval as normal on the log scale."""
    log_ratio = np.log1p(change)
    bound = np.log1p(low) if log_ratio > 0 else np.log1p(high)
    z_crit = z_quantile(0.5 + confidence / 2)
    se = abs(log_ratio - bound) / z_crit
    if se <= 0:
        return 0.0 if log_ratio != 0 else 1.0
    return float(special().erfc(abs(log_ratio) / se / np.sqrt(2)))


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
