"""The change of a mean over few runs (CPU seconds per iteration): each side's standard error
on the log scale from its runs, combined Welch-style (intervals.combine_log_se)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from . import intervals as iv


def mean_change(baseline: Sequence[float], candidate: Sequence[float]) -> iv.Change:
    """candidate mean / baseline mean - 1, with an interval and p value when each side has at
    least two runs."""
    estimate = iv.ratio_change(float(np.mean(candidate)) if candidate else None,
                               float(np.mean(baseline)) if baseline else None)
    if estimate is None or len(baseline) < 2 or len(candidate) < 2:
        return iv.Change(estimate)
    mb, mc = np.mean(baseline), np.mean(candidate)
    se_b = np.std(baseline, ddof=1) / np.sqrt(len(baseline)) / mb
    se_c = np.std(candidate, ddof=1) / np.sqrt(len(candidate)) / mc
    _, low, high = iv.combine_log_se((np.log(mc), se_c, len(candidate) - 1),
                                     (np.log(mb), se_b, len(baseline) - 1))
    if not (np.isfinite(low) and np.isfinite(high)):
        return iv.Change(estimate)
    return iv.Change(estimate, low, high, iv.p_value_from_interval(estimate, low, high))
