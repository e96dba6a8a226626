"""95% intervals for the change candidate/baseline - 1 of a statistic, and the verdict words.

Why not the textbook interval: the latencies of one run are not independent draws. Stalls come
in bursts, the machine's noise comes in bursts, and a run can drift (a cache that warms, a
neighbour that wakes). And two runs of the same configuration differ by more than either run's
own noise shows (page placement, CPU frequency, what else ran): measured on A/A runs of a 2-core
VM, separate runs differ by 2-7% at p50-p99 and by tens of percent at p99.9, while an
order-statistic interval that treats the ops as independent claims ±0.1-1%. So the unit of
replication is the run, and within a run the unit is a stretch of time.

The model, on the log scale of each statistic (p50 ... p99.9, mean, rate), for run i of variant j:

    y_ji = log θ_j + u_ji + e_ji

- e_ji, the run's own error, has a variance w_ji estimated from the run itself over *groups of
  contiguous time*: the run's (post-warm-up) time blocks are split into G groups (4 <= G <= 32,
  at least two blocks each;
  for a quantile the run must hold at least MIN_TAIL_PER_GROUP ops beyond it per group). For a
  quantile, w is the grouped (delete-one-group) jackknife variance of the log quantile,
  (G-1)/G Σ_g (θ_(-g) - θ̄)², each θ_(-g) read from the run's histogram less group g's: unlike
  the variance of per-group quantiles divided by G (batch quantiles), which on bursty
  simulations overstated it 1.7x at p50 and 4x at p99 because small groups make the quantile
  nonlinear, the jackknife came within 0.85-1.27x (delete-d jackknives are consistent for
  quantiles when d grows with n). For the mean and the rate, w is the ratio-estimator form of
  batch means (groups weighed by their ops and time). Groups of contiguous time keep bursts and
  drift inside them, so w reflects the run's own dependence; a run that mixes regimes gets a
  wide interval (and a stationarity note, see stationarity.py).
- u_ji, the run effect, has variance τ² that only several runs can show. It is estimated by
  method of moments from the runs' spread, pooled over the two variants compared,
  τ̂² = max(0, (SS - Σ_j (k_j - 1) w̄_j) / df) with SS the within-variant sum of squares of y and
  df = Σ_j (k_j - 1), and combined with a prior τ0 worth ν0 runs' degrees of freedom (Prior):

      τ̃² = (ν0 · τ0² + df · τ̂²) / (ν0 + df),   t at ν0 + df degrees of freedom

  The prior is, in this order: a noise profile of this host and workload shape (`stallbench
  calibrate`: N A/A runs, ν0 = N - 1, analysis/noise.py), so its weight falls as measured runs
  grow; else the A/A table RUN_TO_RUN_SD of this machine kind (benchmarks/aa.py), but only
  where nothing is measured (one run a side, ν0 = PRIOR_DOF): that table comes from machines
  loaded by test suites, several times what a quiet machine shows, and with 2+ runs a side the
  t interval of the measured spread needs no outside guess (with 3+3 runs the old fixed weight
  of 4 made τ̃ 0.18 where the runs showed 0.03). A saturated machine (interference.py) keeps
  a widened table prior at ν0 = PRIOR_DOF beside its runs, whose spread is bursty there.
  τ0 is raised to the runs' own wandering where that is larger: the variance of the statistic
  over each run's four quarters beyond what sampling explains (each quarter alone has ~4x the
  whole run's variance), averaged over the runs compared, when a χ² test says the quarters
  differ more than sampling at the 0.1% level (so a stationary run adds nothing).
  With 2+ runs a side the interval is a pooled t on the runs' own values: their whole variance
  V̂ = τ̃² + w̄ at ν0 + df degrees of freedom, floored by a quarter of the wandering (+ w̄), the
  part of it the next run's level would carry if the quarters wander independently.
  A measured spread never exceeds what the runs' own values allow: the wandering (in τ0 and in
  the floor) is at most the upper end of V's 95% interval from their sum of squares,
  SS / χ²_{0.025}(df) (variance_bound), less w̄, and the floor itself at most that bound (or
  the pooled V̂ where that is larger): w̄ from groups of time counts a step that every run
  takes alike as noise of each run, while the runs' values show it is not. A level that moves
  inside every run alike (a memory cgroup that fills half way, a cold cache that warms) makes
  the quarters and the groups wander without making the runs differ: guest runs whose rates
  agreed within 4% got a run-to-run sd of 1.09 from that, and from empty time blocks before
  their workload started (summary.py now counts the warm-up and the span from the first op).
- The variant's estimate is the statistic of its pooled histogram; its variance is
  (τ̃² + w̄_j) / k_j. The change's interval is log(1 + change) ± t · sqrt(Σ_j (τ̃² + w̄_j) / k_j),
  with t at the Welch-Satterthwaite degrees of freedom of the three variance terms (τ̃² with
  PRIOR_DOF + df, each w̄_j with k_j (G_j - 1)). The p-value reads the same t.

min and max have no interval: one extreme value per run says nothing about the next run.

Verdicts (compare/verdicts/, the policy; the rule in change.py): only the statistics that decide
(DECIDING_STATS of each op: p50, p99 and rate, or the metrics named with --metric) share the
candidate's false-discovery budget, Benjamini-Hochberg within each candidate, so adding a
variant takes no verdict from another; the other rows keep their unadjusted interval, verdict
INTERVAL_ONLY. better/worse when the interval excludes 0, the adjusted p-value is below 5% and
|change| exceeds the noise threshold; same when the whole interval lies within ±noise; unclear
otherwise, with the reason where the interval alone does not show it (the policy's reasons:
adjusted, the distrust rules', an interval wider than MAX_INTERVAL_RATIO either way, which is
not shown), and the number of runs per variant that would likely decide it (the same formula
with k runs, given the variance seen). A paced op's rate is PACED: its schedule sets it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# the parts of the model in their own modules, re-exported: the per-run statistics (e_ji),
# the change and its verdict, the t distribution
from .change import (
    DECIDED,
    DIRECTED,
    MAX_INTERVAL_RATIO,
    Change,
    Verdict,
    excludes_zero,
    ratio_change,
    too_wide,
    verdict,
)
from .quantiles import stat_named
from .runstats import (
    MAX_GROUPS,
    MIN_BLOCKS_PER_GROUP,
    MIN_GROUPS,
    MIN_TAIL_PER_GROUP,
    QUARTERS,
    RunStatistic,
    mean_statistic,
    quantile_statistics,
    rate_statistic,
    wandering,
)
from .tdist import (
    CONFIDENCE,
    benjamini_hochberg,
    chi2_quantile,
    combine_log_se,
    p_value_from_interval,
    t_quantile,
    t_two_sided_p,
    welch_dof,
    z_quantile,
)

__all__ = [
    "ASSUMED", "ASSUMED_FADE_DOF", "CONFIDENCE", "DECIDED",
    "DIRECTED", "MAX_GROUPS", "MAX_INTERVAL_RATIO", "MAX_ITERATIONS_ADVICE",
    "MIN_BLOCKS_PER_GROUP", "MIN_GROUPS", "MIN_TAIL_PER_GROUP", "METHOD", "PRIOR_DOF",
    "PROFILE", "QUARTERS", "RESPONSE_PRIOR_FACTOR", "RUN_TO_RUN_SD", "TAIL_PROBABILITY",
    "Change", "Prior", "RunStatistic", "Verdict", "assumed_prior",
    "benjamini_hochberg", "chi2_quantile", "combine_log_se", "decision_half_width",
    "excludes_zero", "iterations_to_decide", "mean_statistic", "one_run_reach",
    "p_value_from_interval", "prior_sd",
    "quantile_statistics", "rate_statistic", "ratio_change", "t_quantile", "t_two_sided_p",
    "too_wide", "two_level_change", "variance_bound", "verdict", "wandering", "welch_dof",
    "z_quantile",
]

MAX_ITERATIONS_ADVICE = 30
PRIOR_DOF = 4.0
ASSUMED_FADE_DOF = 3.0   # the A/A table's weight falls from PRIOR_DOF to 0 as these are measured
# Run-to-run standard deviation of the log statistic, assumed where runs cannot show it:
# measured on A/A runs of this machine kind (benchmarks/aa.py, BENCHMARKS.md "A/A calibration":
# 10 separate runs each of randread cached and cold, pgioperf, pgioperf in a binding memory
# cgroup; the upper quartile over their service-time ops; p99.9 and p99.99 raised to the upper
# quartile of the quiet A/A sets of 2026-12-01 evening, BENCHMARKS.md "Power at equal honesty",
# whose whole runs fall into tail regimes). Quantiles in between are interpolated
# on -log10(1 - p). Response times (from the planned start) carry the schedule lag, which follows
# the CPU contention of the moment: their measured spread was 0.5-2.6, so RESPONSE_PRIOR_FACTOR.
RUN_TO_RUN_SD = {"p50": 0.14, "p90": 0.25, "p95": 0.25, "p99": 0.25, "p999": 0.90,
                 "p9999": 1.20, "mean": 0.25, "rate": 0.15}
TAIL_PROBABILITY = 0.99   # quantiles beyond it keep the A/A table's weight beside measured runs
RESPONSE_PRIOR_FACTOR = 4.0
# the table's quantiles by probability: the points the prior of any other quantile lies between
_QUANTILE_PRIOR = tuple(sorted((stat_named(key).probability, key) for key in RUN_TO_RUN_SD
                               if stat_named(key).probability is not None))
METHOD = ("two-level: time blocks within each run, and the spread between runs (measured from "
          "the runs, with this host's noise profile where there is one, else with fewer than "
          "3+3 runs partly assumed from A/A runs)")


def prior_sd(stat: str | None = None, probability: float | None = None,
             table: dict[str, float] | None = None) -> float:
    """τ0 for a statistic by name ('p99', 'mean', 'rate') or for any quantile probability,
    from RUN_TO_RUN_SD or a table with the same keys."""
    table = RUN_TO_RUN_SD if table is None else {**RUN_TO_RUN_SD, **table}
    if stat is not None and stat in table:
        return table[stat]
    if probability is None:
        raise KeyError(stat)
    x = -np.log10(max(1.0 - probability, 1e-6))
    xs = [-np.log10(1.0 - p) for p, _ in _QUANTILE_PRIOR]
    ys = [table[name] for _, name in _QUANTILE_PRIOR]
    return float(np.interp(x, xs, ys))


@dataclass(frozen=True)
class Prior:
    """The run-to-run sd τ0 of one statistic before this comparison's runs are seen, and how
    many runs' degrees of freedom it is worth. `source`: ASSUMED (this machine kind's A/A table,
    RUN_TO_RUN_SD) or PROFILE (a noise profile measured on this host for this workload)."""

    sd: float
    dof: float
    source: str = "assumed"
    within: float = 0.0   # a profile's mean within-run variance (its τ is beyond it)
    floor: bool = False   # the run-to-run sd is at least sd, whatever the runs show


ASSUMED, PROFILE = "assumed", "profile"


def assumed_prior(sd: float, data_dof: int, probability: float | None = None) -> Prior:
    """The A/A table's τ0 where nothing on this host measured the spread: worth PRIOR_DOF runs
    when the comparison's own runs cannot show it (one run a side), less as they do, and
    nothing from ASSUMED_FADE_DOF measured degrees of freedom on (3+3 runs: 4). The table
    comes from machines loaded by test suites, several times the spread of a quiet one, and
    with 3+ runs a side the t interval of the measured spread needs no outside guess (with
    3+3 runs the old fixed weight of 4 made τ̃ 0.18 where the runs showed 0.03); with 2+2 runs
    (2 degrees of freedom) two-valued run levels (a memory-limited checkpointer's p50 14%
    apart, each pair alike) made 15% of quiet A/A comparisons call something without it.
    Beyond TAIL_PROBABILITY it is a floor: there whole
    runs fall into a tail regime (p99.9 of ten quiet A/A runs here: about 5 µs in six, 12-43 µs
    in four), a two-valued run effect that two or three runs a side cannot measure, and that
    several runs of one side may all share."""
    if probability is not None and probability > TAIL_PROBABILITY:
        return Prior(sd, PRIOR_DOF, ASSUMED, floor=True)
    return Prior(sd, PRIOR_DOF * max(0.0, 1.0 - data_dof / ASSUMED_FADE_DOF), ASSUMED)


def one_run_reach(sd: float, dof: float = PRIOR_DOF, confidence: float = CONFIDENCE) -> float:
    """The log-scale half-width of a change's interval with one run a side and the A/A table's
    τ0 `sd` worth `dof` degrees of freedom, before the runs' own error: each side's level may
    be τ0 off, so their ratio √2·τ0, at t with the prior's degrees of freedom (2.78 at 4). A
    change is called only beyond it (the runs' own error widens it; with it the Welch degrees
    of freedom grow a little, so it is about, not at least, this)."""
    return float(t_quantile(0.5 + confidence / 2, dof) * np.sqrt(2.0) * sd)


def two_level_change(estimate: float | None, baseline: list[RunStatistic],
                     candidate: list[RunStatistic], prior: Prior | float,
                     confidence: float = CONFIDENCE) -> Change:
    """The change's interval from each side's runs (see the module docstring); a bare float
    prior is the A/A table's τ0 (assumed_prior)."""
    if estimate is None or not np.isfinite(estimate) or estimate <= -1:
        return Change(None)
    sides = [baseline, candidate]
    if any(not side or any(r.log_value is None for r in side) for side in sides):
        return Change(estimate, note="no samples in a run")
    if any(r.within_var is None for side in sides for r in side):
        return Change(estimate, note="too few for an interval")
    k = [len(side) for side in sides]
    w = [float(np.mean([r.within_var for r in side])) for side in sides]
    groups = [min(r.groups for r in side) for side in sides]
    dof_data = sum(kk - 1 for kk in k)
    if not isinstance(prior, Prior):
        prior = assumed_prior(float(prior), dof_data)
    measured = dof_data > 0
    wander = wandering([r for s in sides for r in s])
    if measured:
        ss = sum(float(np.sum((np.array([r.log_value for r in side])
                               - np.mean([r.log_value for r in side])) ** 2)) for side in sides)
        # a level that moves inside every run alike (a cgroup that fills half way) wanders
        # without making runs differ: what the runs' own values allow bounds it
        wander = min(wander, max(variance_bound(ss, dof_data, confidence)
                                 - float(np.mean(w)), 0.0))
    # a run whose quarters wander (the machine's load came and went) shows that the next run
    # may land elsewhere too: the prior is at least that wandering
    prior_sd = max(prior.sd, float(np.sqrt(wander)))
    # on the scale of a run's whole variance V = τ² + w, which is what the runs' spread (and a
    # profile's A/A runs) estimate, with their degrees of freedom
    prior_total = prior_sd ** 2 + prior.within
    if measured:
        total = (prior.dof * prior_total + ss) / (prior.dof + dof_data)
        within_ref = (prior.dof * prior.within + dof_data * float(np.mean(w))) \
            / (prior.dof + dof_data)
    elif prior.dof <= 0:
        return Change(estimate, note="one run each")
    else:
        total, within_ref = prior_total, prior.within
    run_var = max(0.0, total - within_ref)
    share = (run_var / total) ** 2 if total > 0 else 1.0
    # measured: a pooled t on the runs' own values at their (and the prior's) degrees of
    # freedom, V̂ the runs' whole variance; it is exact for normal run levels whatever the
    # split between τ² and w (the within-run variance and its many degrees of freedom enter
    # only where nothing is measured: splitting V̂ into τ̂² with few and w with many degrees of
    # freedom undercovered, 91% at p50 on bursty simulations, and flooring V̂ by w overcovered).
    # One run a side: τ0² with the prior's degrees of freedom (shrunk by its share of a
    # profile's whole variance) beside each run's own w.
    pooled_total = None
    fixed_dof = None
    if measured:
        pooled_total, fixed_dof = total, float(prior.dof + dof_data)
        # the level a run's quarters wander by, beyond sampling, is in the next run's level
        # too (a quarter of it if the quarters wander independently): a floor under a spread
        # that two or three runs happened to show small
        usable = [r for side in sides for r in side if r.quarter_var is not None
                  and r.within_var]
        floor = wander / QUARTERS + within_ref
        # nor can the floor exceed what the runs' own values allow: a level that steps inside
        # every run alike (a guest's cgroup filling) makes each run's own variance w large
        # while the runs agree (guest rates 0.1% and 1% apart got a half-width of 0.40)
        floor = min(floor, max(variance_bound(ss, dof_data, confidence), total))
        if floor > pooled_total:
            pooled_total = floor
            fixed_dof = float(max(fixed_dof, (QUARTERS - 1) * len(usable)))
        if prior.floor:
            pooled_total = max(pooled_total, prior_sd ** 2 + within_ref)
        run_var = max(0.0, pooled_total - within_ref)
    elif prior.floor:
        run_var = max(run_var, prior_sd ** 2)
    variance = {"run_var": run_var, "run_dof": (prior.dof + dof_data) * share,
                "pooled_total": pooled_total, "fixed_dof": fixed_dof, "within": w,
                "within_dof": [kk * (g - 1) for kk, g in zip(k, groups, strict=True)],
                "prior_dof": prior.dof, "prior_source": prior.source}
    half, dof = _half_width(variance, k, confidence)
    log_ratio = float(np.log1p(estimate))
    se = half / t_quantile(0.5 + confidence / 2, dof)
    p_value = t_two_sided_p(log_ratio / se, dof) if se > 0 else \
        (0.0 if log_ratio != 0 else 1.0)
    return Change(estimate, float(np.expm1(log_ratio - half)), float(np.expm1(log_ratio + half)),
                  p_value, runs=(k[0], k[1]), blocks=(groups[0], groups[1]),
                  run_sd=float(np.sqrt(run_var)), run_sd_measured=measured, variance=variance,
                  prior_dof=prior.dof, prior_source=prior.source)


def variance_bound(ss: float, dof: int, confidence: float = CONFIDENCE) -> float:
    """The largest whole run variance V the runs' own values allow: the upper end of V's
    interval from their within-variant sum of squares `ss` at `dof` degrees of freedom
    (ss / V is χ² with dof degrees of freedom for normal run levels)."""
    return ss / chi2_quantile(dof, (1.0 - confidence) / 2)


def _half_width(variance: dict, k: list[int], confidence: float) -> tuple[float, float]:
    if variance.get("pooled_total") is not None:
        dof = variance["fixed_dof"]
        return float(t_quantile(0.5 + confidence / 2, dof)
                     * np.sqrt(variance["pooled_total"] * sum(1.0 / kk for kk in k))), dof
    run_term = variance["run_var"] * sum(1.0 / kk for kk in k)
    terms = [(run_term, variance["run_dof"])] if run_term > 0 else []
    terms += [(ww / kk, max(d, 1)) for ww, kk, d in
              zip(variance["within"], k, variance["within_dof"], strict=True)]
    dof = welch_dof(terms)
    total = sum(v for v, _ in terms)
    return float(t_quantile(0.5 + confidence / 2, dof) * np.sqrt(total)), dof


def decision_half_width(change: float, noise: float) -> float | None:
    """The log-scale half-width below which an interval around `change` excludes ±noise (or
    lies within it): the distance between |log(1 + change)| and log(1 + noise); None at 0."""
    gap = abs(float(np.log1p(change)))
    margin = float(np.log1p(noise))
    target = abs(gap - margin)
    return target if target > 0 else None


def iterations_to_decide(change: Change, noise: float,
                         confidence: float = CONFIDENCE) -> int | None:
    """Runs per variant (the same for both) after which an interval of the variance seen would
    likely exclude ±noise around the observed change: decide better/worse, or 'same'."""
    if change.change is None or not change.variance or change.runs is None:
        return None
    target = decision_half_width(change.change, noise)
    if target is None:
        return None
    current = max(change.runs)
    per_run_groups = [d / max(kk, 1) for d, kk in
                      zip(change.variance["within_dof"], change.runs, strict=True)]
    for k in range(current + 1, MAX_ITERATIONS_ADVICE + 1):
        variance = dict(change.variance)
        variance["fixed_dof"] = variance["prior_dof"] + 2 * (k - 1)
        if variance["pooled_total"] is None:   # one run each so far: the prior's V, measured on
            variance["pooled_total"] = variance["run_var"] + float(np.mean(variance["within"]))
        variance["within_dof"] = [g * k for g in per_run_groups]
        half, _ = _half_width(variance, [k, k], confidence)
        if half < target:
            return k
    return None
