"""Each statistic's change between the baseline and a candidate, with its interval: the
two-level model (analysis/intervals.py) with its run-to-run prior, or the paired interval of
duet runs (analysis/paired.py); and the CPU rows' changes (analysis/means.py)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..analysis import histogram as hist
from ..analysis import interference, paired
from ..analysis import intervals as iv
from ..analysis.means import mean_change
from ..analysis.quantiles import (
    RATE,
    latency_stats,
    percentiles,
    resolvable,
    stat_named,
)
from .loading import OpSide, VariantRuns
from .model import CompareOptions, CpuRow, ShiftCurve

CPU_ROWS = (("user", "user_s"), ("system", "system_s"), ("elapsed", "elapsed_s"))
# why a row has no estimate (Change.note), as measured
NO_SAMPLES = "no samples"         # a side has no samples of the op
NOT_RESOLVED = "not resolvable"   # a side has too few samples beyond the percentile


@dataclass
class OpChanges:
    """One op's changes for one candidate: every statistic's, the shift function, and whether
    its rate fell by more than CompareOptions.rate_drop."""

    changes: dict[str, iv.Change]
    curve: ShiftCurve
    rate_fell: bool


def _prior(options: CompareOptions, op: str, stat: str | None, probability: float | None,
           kind: str, saturated_sd: float, data_dof: int) -> iv.Prior:
    """The run-to-run prior of one statistic: the noise profile's where it has the op and
    statistic, else the A/A table (response times: RESPONSE_PRIOR_FACTOR times it, not the
    rate, which is the service op's); `saturated_sd` floors it on a saturated machine."""
    if options.noise_profile is not None and stat is not None:
        measured = options.noise_profile.prior(op, stat)
        if measured is not None:
            return measured
    sd = iv.prior_sd(stat, probability, options.run_to_run_sd)
    if kind == "response" and stat != RATE.key:
        sd *= iv.RESPONSE_PRIOR_FACTOR
    if saturated_sd > 0.0:
        # a saturated machine: whole runs land 30x apart, a spread few runs cannot measure
        return iv.Prior(max(sd, saturated_sd), interference.SATURATED_PRIOR_DOF, floor=True)
    return iv.assumed_prior(sd, data_dof, probability if probability is not None else
                            (stat_named(stat).probability if stat else None))


def _changes(base: OpSide, cand: OpSide, probabilities: list[float],
             options: CompareOptions, kind: str = "service", saturated_sd: float = 0.0,
             op: str = "", pairs: list[tuple[int, int]] | None = None
             ) -> tuple[dict[str, iv.Change], ShiftCurve]:
    """Every statistic's change with its two-level interval (analysis/intervals.py), or its
    paired one where `pairs` (2+ duet rounds, conditions.py: Pairing) pair the runs
    (analysis/paired.py); `saturated_sd` floors the run-to-run sd (a saturated machine,
    analysis/interference.py)."""
    changes: dict[str, iv.Change] = {}
    bs, cs = base.stats, cand.stats
    data_dof = len(base.ops) + len(cand.ops) - 2

    def prior(stat: str | None, probability: float | None = None) -> iv.Prior:
        return _prior(options, op, stat, probability, kind, saturated_sd, data_dof)

    def interval(estimate: float | None, b: list[iv.RunStatistic],
                 c: list[iv.RunStatistic], stat: str | None,
                 probability: float | None = None) -> iv.Change:
        if pairs is None:
            return iv.two_level_change(estimate, b, c, prior(stat, probability))
        floor = iv.prior_sd(stat, probability, options.run_to_run_sd) \
            if probability is not None and probability > iv.TAIL_PROBABILITY \
            and paired.TAIL_FLOOR else None
        measured = options.duet_profile.prior(op, stat) \
            if options.duet_profile is not None and stat is not None else None
        return paired.paired_change([b[i] for i, _ in pairs], [c[j] for _, j in pairs], floor,
                                    measured)

    changes["rate"] = interval(iv.ratio_change(cs.rate, bs.rate), base.rate_statistics(),
                               cand.rate_statistics(), "rate")
    changes["mean"] = interval(iv.ratio_change(cs.values["mean"], bs.values["mean"]),
                               base.mean_statistics(), cand.mean_statistics(), "mean")
    for stat in ("min", "max"):
        changes[stat] = iv.Change(iv.ratio_change(cs.values[stat], bs.values[stat]),
                                  note="no interval")
    b_values = hist.quantiles(base.histogram, probabilities)
    c_values = hist.quantiles(cand.histogram, probabilities)
    b_runs = base.quantile_statistics(probabilities)
    c_runs = cand.quantile_statistics(probabilities)
    stat_of = {s.probability: s.key for s in percentiles(options.percentiles)}
    triples = []
    for j, p in enumerate(probabilities):
        change = interval(iv.ratio_change(c_values[j], b_values[j]),
                          [r[j] for r in b_runs], [r[j] for r in c_runs], stat_of.get(p), p)
        triples.append((change.change, change.low, change.high))   # the plot clips wide ones
        if p in stat_of:
            changes[stat_of[p]] = change
    return changes, _curve(probabilities, triples, bs.samples, cs.samples)


def _curve(probabilities: list[float], triples: list[tuple[float | None, ...]], nb: int,
           nc: int) -> ShiftCurve:
    curve = ShiftCurve([], [], [], [])
    for p, (change, low, high) in zip(probabilities, triples, strict=True):
        if p > 0.5 and not (resolvable(nb, p) and resolvable(nc, p)):
            continue
        curve.probabilities.append(p)
        curve.change.append(change)
        curve.low.append(low)
        curve.high.append(high)
    return curve


def compare_op(base: OpSide, cand: OpSide, probabilities: list[float],
               options: CompareOptions, kind: str = "service", saturated_sd: float = 0.0,
               op: str = "", pairs: list[tuple[int, int]] | None = None) -> OpChanges:
    """One op's changes for one candidate as measured: no verdict (verdicts/ gives it)."""
    nb, nc = base.stats.samples, cand.stats.samples
    if nb == 0 or nc == 0:
        changes = {stat.key: iv.Change(None, note=NO_SAMPLES)
                   for stat in latency_stats(options.percentiles)}
        rate_change = iv.ratio_change(cand.stats.rate, base.stats.rate)
        changes["rate"] = iv.Change(rate_change, note=NO_SAMPLES)
        return OpChanges(changes, ShiftCurve([], [], [], []), nc == 0 and nb > 0)
    changes, curve = _changes(base, cand, probabilities, options, kind, saturated_sd, op, pairs)
    for stat in percentiles(options.percentiles):
        if stat.key in base.stats.unresolved or stat.key in cand.stats.unresolved:
            changes[stat.key] = iv.Change(None, note=NOT_RESOLVED)
    rate = changes["rate"].change
    return OpChanges(changes, curve, rate is not None and rate < -options.rate_drop)


def cpu_rows(variants: list[VariantRuns], candidates: list[str]) -> list[CpuRow]:
    """run.json rusage per variant (mean seconds per iteration) and each candidate's change."""
    rows = []
    base = variants[0]
    for name, key in CPU_ROWS:
        per_variant: dict[str, list[float]] = {}
        for v in variants:
            per_variant[v.label] = [float(r.meta.rusage[key]) for r in v.runs
                                    if isinstance(r.meta.rusage, dict)
                                    and isinstance(r.meta.rusage.get(key), (int, float))]
        if not any(per_variant.values()):
            continue
        values = {label: (float(np.mean(x)) if x else None) for label, x in per_variant.items()}
        changes = {label: mean_change(per_variant[base.label], per_variant[label])
                   for label in candidates}
        rows.append(CpuRow(name, values, changes))
    return rows


def statistic_prior(options: CompareOptions, op: str, stat: str, kind: str,
                    data_dof: int) -> iv.Prior:
    """The run-to-run prior compare gives one statistic of one op (no saturated floor) when
    its two sides hold data_dof + 2 runs: what a series' change points are judged with."""
    return _prior(options, op, stat, stat_named(stat).probability, kind, 0.0, data_dof)
