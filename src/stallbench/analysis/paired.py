"""Paired 95% intervals for duet runs: the change candidate/baseline - 1 of a statistic, from
the pairs of runs that ran at the same time (duet.py, `stallbench run --duet`).

Why pairs: on this machine kind the host's level moves for seconds at a time (a quiet cached
randread's 0.5 s medians sit at ~1.32 µs or ~1.75 µs, and both reader threads of one run share
the level), so two runs of one configuration started a minute apart differ by 5-12% at p50,
and the sequential model (intervals.py) rightly needs that spread in its interval. In a duet
round both sides run at the same time on their own CPUs; what the host does to one side it does
to the other, and it cancels in the ratio of the pair.

The model, on the log scale of each statistic, for round i (one run of each side):

    d_i = y_Ci - y_Bi = log(1 + Δ) + (u_Ci - u_Bi) + (e_Ci - e_Bi)

where the host's level of the round (h_i, in both y's) has cancelled. The d_i of different
rounds are independent (each round is a new pair of processes, files and CPU assignment), so
the interval is the paired t-interval

    d̄ ± t(n - 1) · s_d / √n,    change = exp(d̄) - 1,  n pairs, n - 1 degrees of freedom

with s_d the sample sd of the d_i; the p-value reads the same t. The estimate is the geometric
mean of the pairs' ratios, not the ratio of the pooled histograms (the sequential estimate):
the interval is centred on what it estimates.

What is not added, and why:
- No within-run floor (the sequential model floors its pooled variance by the runs' own
  time-block variance where their quarters wander): a run's time-block variance includes the
  host's drift within the run, which both sides of a pair share, so w_B + w_C overstates the
  variance of d_i; the spread of the d_i measures the whole variance of a pair directly.
- No assumed prior: the pairs measure their own spread from 2 pairs on. With one pair and
  nothing measured on this host the comparison uses the sequential one-run path (with its
  prior) and says "1 duet".
- A measured prior where one was made: `stallbench calibrate PLAN --duet` runs A/A duets of
  the baseline on this host and saves each statistic's pair sd s0 with its n0 - 1 degrees of
  freedom (a duet noise profile, analysis/noise.py). Pooled with the comparison's own pairs,

      s² = ((n0 - 1)·s0² + (n - 1)·s_d²) / (n0 - 1 + n - 1),   dof = n0 - 1 + n - 1,

  so one duet gets an interval and three get the t quantile of ~n0 degrees of freedom instead
  of 2 (t = 4.30 at 95%, the width that made 3 duets find +10% at p50 in 75% of trials), and
  the profile's weight falls as pairs grow. It assumes the pair spread of the A/A duets is
  the pair spread of the compared configurations; BENCHMARKS.md "Duet" checks that on real
  A/A duets (coverage) and real changes.
- The tail-regime floor of the sequential model beyond TAIL_PROBABILITY (whole runs falling
  into a tail regime, p99.9 about 5 µs in six of ten quiet runs and 12-43 µs in four) is kept
  when `floor_sd` is given: a regime that falls on one process and not on its partner does not
  cancel, so d_i's variance is then at least 2·τ0² (each side's run effect). BENCHMARKS.md
  "Duet" says what the A/A duets showed without it.
- On a saturated machine (interference.py) the comparison falls back to the sequential model
  with its floor: the others' load does not fall evenly on the two CPUs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import intervals as iv

METHOD = ("paired (duet): the runs of each round ran at the same time, each on its own CPUs; a "
          "t interval on the pairs' log ratios (n pairs, n - 1 degrees of freedom)")
PROFILED_METHOD = (METHOD[:-1] + "), pooled with this host's duet noise profile (its A/A "
                   "pairs' spread and degrees of freedom added)")
ONE_DUET = "1 duet"
ONE_DUET_METHOD = (f"{ONE_DUET}: no interval from one pair; the two-level model of one run "
                   "each (with its prior)")
TAIL_FLOOR = True   # the tail-regime floor beyond intervals.TAIL_PROBABILITY (see above)


def pair_runs(baseline: list[dict[str, Any] | None],
              candidate: list[dict[str, Any] | None]) -> list[tuple[int, int]] | None:
    """(baseline index, candidate index) of the runs of each duet round, from each run's
    run.json `duet` record; None unless every run of both sides has one and they pair one to
    one (a run without its partner, an interrupted round: the sequential model)."""
    if not baseline or not candidate or len(baseline) != len(candidate):
        return None
    ids_b = [d.get("id") if isinstance(d, dict) else None for d in baseline]
    ids_c = [d.get("id") if isinstance(d, dict) else None for d in candidate]
    if None in ids_b or None in ids_c or len(set(ids_b)) != len(ids_b) \
            or set(ids_b) != set(ids_c):
        return None
    where = {run_id: j for j, run_id in enumerate(ids_c)}
    return [(i, where[run_id]) for i, run_id in enumerate(ids_b)]


def paired_change(baseline: list[iv.RunStatistic], candidate: list[iv.RunStatistic],
                  floor_sd: float | None = None, prior: iv.Prior | None = None,
                  confidence: float = iv.CONFIDENCE) -> iv.Change:
    """The paired interval of one statistic: baseline[i] and candidate[i] ran at the same
    time. `floor_sd`: the tail-regime floor; `prior`: a duet noise profile's pair sd and its
    degrees of freedom (see the module docstring)."""
    if len(baseline) != len(candidate) or not baseline:
        raise ValueError("paired_change needs as many baseline as candidate runs")
    if any(r.log_value is None for r in (*baseline, *candidate)):
        return iv.Change(None, note="no samples in a run")
    d = np.array([c.log_value - b.log_value for b, c in zip(baseline, candidate, strict=True)])
    mean = float(d.mean())
    estimate = float(np.expm1(mean))
    if any(r.within_var is None for r in (*baseline, *candidate)):
        return iv.Change(estimate, note="too few for an interval")
    n = d.size
    prior_dof = prior.dof if prior is not None else 0.0
    if n < 2 and not prior_dof:
        return iv.Change(estimate, note=ONE_DUET)
    measured = float(np.var(d, ddof=1)) if n > 1 else 0.0
    pair_var = (prior_dof * (prior.sd ** 2 if prior else 0.0) + (n - 1) * measured) \
        / (prior_dof + n - 1)
    floored = floor_sd is not None and pair_var < 2 * floor_sd ** 2
    if floored:
        pair_var = 2 * floor_sd ** 2
    dof = float(prior_dof + n - 1)
    se = float(np.sqrt(pair_var / n))
    half = iv.t_quantile(0.5 + confidence / 2, dof) * se
    p_value = iv.t_two_sided_p(mean / se, dof) if se > 0 else (0.0 if mean != 0 else 1.0)
    groups = (min(r.groups for r in baseline), min(r.groups for r in candidate))
    return iv.Change(estimate, float(np.expm1(mean - half)), float(np.expm1(mean + half)),
                     p_value, runs=(n, n), blocks=groups,
                     run_sd=float(np.sqrt(pair_var / 2)), run_sd_measured=n > 1,
                     variance={"paired": True, "pair_var": pair_var, "pairs": n,
                               "tail_floor": floored, "prior_pair_sd": prior.sd if prior
                               else None},
                     prior_dof=prior_dof, prior_source=prior.source if prior else None)


def pairs_needed(change: iv.Change, noise: float,
                 confidence: float = iv.CONFIDENCE) -> int | None:
    """Duet rounds after which a paired interval of the pair variance seen would likely
    exclude ±noise around the observed change (intervals.iterations_to_decide's rule)."""
    if change.change is None or not change.variance.get("paired"):
        return None
    target = iv.decision_half_width(change.change, noise)
    if target is None:
        return None
    prior_dof = change.prior_dof or 0.0
    for n in range(change.variance["pairs"] + 1, iv.MAX_ITERATIONS_ADVICE + 1):
        half = iv.t_quantile(0.5 + confidence / 2, prior_dof + n - 1) * np.sqrt(
            change.variance["pair_var"] / n)
        if half < target:
            return n
    return None
