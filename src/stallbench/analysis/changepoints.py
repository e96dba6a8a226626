"""Change points along a series: the points where a statistic's level shifts, each with the
interval of the change across it, judged with the two-level model `compare` uses.

A series is a sequence of points (variants in order, kernels by version, nights by date), each
holding 1-3 or more runs. For one statistic (an op's p50, p99, rate, ...), the question at each
place k between two points is `compare`'s question with the runs before k as the baseline and
the runs from k on as the candidate: the change of the pooled statistic (the value `value(lo,
hi)` gives for points lo..hi-1, e.g. the quantile of their pooled histograms) with its 95%
interval from intervals.two_level_change: each run's own error from groups of its time blocks,
plus the run-to-run spread measured from the runs on both sides (and the same prior as compare
where they are few). Where the series is flat (an A/A series), the points differ only as runs
differ, and that spread is exactly what the model measures from the runs themselves.

The method is binary segmentation (Scott and Knott 1974; Vostrikova 1981), with each split
tested by that interval:

1. In a segment of m points (at first the whole series), every place k between two of its
   points is tried; the place whose change is largest relative to its interval's width is the
   candidate (|log(1 + change)| over the log interval's width: a t statistic).
2. The candidate is a change point when its p-value, multiplied by the m - 1 places tried (and
   by `family`, the number of statistics scanned together), is below ALPHA, its interval
   excludes 0 and |change| exceeds the noise threshold (compare's rule for better/worse, with
   the scan's Bonferroni adjustment in place of Benjamini–Hochberg).
3. Then both sides are segments of their own (step 1), until no segment has one.

Why not E-divisive with a t-test (Apache Otava, MongoDB's signal-processing-algorithms): they
see one number per test run, so the spread must be learned from the series itself, and they know
nothing of a run's own noise (its time blocks), of the prior compare falls back on when runs are
few, or of the outside load a run recorded; a point here also groups 1-3 runs, which their
input has no place for. On the same 25 recorded series (BENCHMARKS.md "series: change points",
each run's p50, p99 and rate given to Otava 0.8 with its defaults, max_pvalue 0.001) both found
every step at its knee and nowhere else, but Otava called a change point in 4 of 20 A/A series
(two where other work ran beside the series' last runs, one where the host ran 10% faster for
its last runs, one at the first run) and this method in 1 (the drift; the outside load it calls
"unclear (machine busier)", as compare does). Neither library is a dependency: Otava pins its
own numpy and brings cloud clients. Bonferroni over the places of a segment is conservative
(neighbouring splits share most runs), which costs little against a step that binds: its t
statistics are in the tens; on simulated series of 2 runs a point
(tests/analysis/test_changepoints.py) a +30% step is found at its point (+-1) in 100 of 100.

The spread between runs (issue 45): a split's own runs measure it, but in a history of one run
a point the few runs of a short segment agree by chance (8 identical variants of one run each:
p50 0.93, 0.92, 0.93, 0.95 then 0.97, 1.00, 1.01, 1.00 µs, a +7.4% "worse" from runs 1-2%
apart on each side while the machine drifted). So `series_spread` measures it from all the
runs of the series, robust to the steps themselves: where points hold two or more runs, each
run's deviation from its point's mean (scaled by √(k/(k-1)), 1.4826 times their median
absolute deviation), else the differences of consecutive runs along the series (1.4826 MAD
/ √2: a step is one difference among many); compare/series.py makes it a floor under every
split's spread (beside this host's noise profile), worth SPREAD_DOF_PER_VALUE degrees of
freedom a value (the MAD's efficiency), and falls back on compare's prior (the profile, or the
A/A table) where the series has fewer than SPREAD_MIN_VALUES.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .change import Change, excludes_zero, ratio_change
from .intervals import Prior, RunStatistic, two_level_change

ALPHA = 0.05
SPREAD_MIN_VALUES = 5        # deviations or differences behind a series' spread, at least
SPREAD_DOF_PER_VALUE = 0.37  # a MAD's efficiency: degrees of freedom per value behind it


@dataclass(frozen=True)
class ChangePoint:
    """A shift between point index-1 and point index: the change of the segment from `index` on
    against the segment before it, its interval and the scan-adjusted p-value, as measured (its
    verdict is the policy's: compare/verdicts/ change_point)."""

    index: int
    change: Change
    p_scan: float
    segment: tuple[int, int]   # the points [lo, hi) the split was found in


def change_points(runs: list[list[RunStatistic]], value: Callable[[int, int], float | None],
                  prior: Callable[[int], Prior], noise: float, family: int = 1,
                  alpha: float = ALPHA) -> list[ChangePoint]:
    """The change points of one statistic: `runs[i]` the runs of point i, `value(lo, hi)` the
    statistic of points lo..hi-1 pooled, `prior(data_dof)` the run-to-run prior of a split
    whose sides hold data_dof + 2 runs (see the module docstring); sorted by index."""
    found: list[ChangePoint] = []
    segments = [(0, len(runs))]
    while segments:
        lo, hi = segments.pop()
        if hi - lo < 2:
            continue
        best = _best_split(runs, value, prior, lo, hi)
        if best is None:
            continue
        k, change = best
        p_scan = min(1.0, float(change.p_value) * (hi - lo - 1) * max(family, 1))
        if p_scan >= alpha or not excludes_zero(change) or abs(change.change) <= noise:
            continue
        found.append(ChangePoint(k, change, p_scan, (lo, hi)))
        segments += [(lo, k), (k, hi)]
    return sorted(found, key=lambda c: c.index)


def split_change(runs: list[list[RunStatistic]], value: Callable[[int, int], float | None],
                 prior: Callable[[int], Prior], lo: int, k: int, hi: int) -> Change:
    """The change of points k..hi-1 against points lo..k-1, with its two-level interval."""
    left = [r for point in runs[lo:k] for r in point]
    right = [r for point in runs[k:hi] for r in point]
    estimate = ratio_change(value(k, hi), value(lo, k))
    return two_level_change(estimate, left, right, prior(len(left) + len(right) - 2))


def _best_split(runs: list[list[RunStatistic]], value: Callable[[int, int], float | None],
                prior: Callable[[int], Prior], lo: int, hi: int) -> tuple[int, Change] | None:
    best: tuple[float, int, Change] | None = None
    for k in range(lo + 1, hi):
        change = split_change(runs, value, prior, lo, k, hi)
        score = _t_score(change)
        if score is not None and (best is None or score > best[0]):
            best = (score, k, change)
    return None if best is None else (best[1], best[2])


def _t_score(change: Change) -> float | None:
    """|log(1 + change)| over the width of the log interval (a t statistic up to a factor)."""
    if change.change is None or change.low is None or change.high is None \
            or change.p_value is None or change.low <= -1:
        return None
    width = float(np.log1p(change.high) - np.log1p(change.low))
    if width <= 0:
        return None
    return abs(float(np.log1p(change.change))) / width


def series_spread(levels: list[list[float]]) -> tuple[float, float] | None:
    """The sd of a run's log statistic around its level, from all the runs of a series
    (`levels[i]`: point i's runs, in the series' order), robust to the series' steps (see the
    module docstring), and the degrees of freedom it is worth; None with fewer than
    SPREAD_MIN_VALUES values behind it."""
    replicated = [np.asarray(point, dtype=np.float64) for point in levels if len(point) >= 2]
    count = sum(p.size - 1 for p in replicated)
    if count >= SPREAD_MIN_VALUES:
        values = np.concatenate([(p - p.mean()) * np.sqrt(p.size / (p.size - 1))
                                 for p in replicated])
        sd = 1.4826 * float(np.median(np.abs(values)))
    else:
        values = np.diff(np.asarray([level for point in levels for level in point],
                                    dtype=np.float64))
        count = values.size
        if count < SPREAD_MIN_VALUES:
            return None
        sd = 1.4826 * float(np.median(np.abs(values - np.median(values)))) / np.sqrt(2.0)
    return sd, SPREAD_DOF_PER_VALUE * count
