"""Build a Comparison (model.py): load the runs of each variant and call analysis/ for every
number.

Every number comes from the runs' summaries (summary.parquet, analysis/summary.py), so memory
does not grow with the number of operations. Several iterations of a variant are pooled for
the estimates; intervals come from analysis/intervals.py (runs and time blocks). The steps of
build_comparison, each a function here or a module beside it: load the variants (loading.py),
the conditions of each side (conditions.py: outside load, duet pairing, noise profile), per op
each side's statistics and each candidate's changes as measured (changes.py), the CPU rows,
every row's verdict from the one policy (verdicts/) given the facts of these runs, then the
notes, counters (counters.py), where (where/) and views; the Comparison is built once from
them, frozen.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..analysis import bands as bands_mod
from ..analysis import histogram as hist
from ..analysis import interference, stationarity
from ..analysis import intervals as iv
from ..analysis.change import Verdict
from ..analysis.distrust import regime_ratios
from ..analysis.environment import environment_diff  # fidelity
from ..analysis.quantiles import DECIDING_STATS, MAX, MEAN, MIN, RATE, percentiles
from ..analysis.summary import RESPONSE_SUFFIX
from ..analysis.where.section import WhereSection
from ..core.errors import UsageError
from ..results.rundirs import OPS_FILE
from ..results.runselect import Resolved
from . import conditions, verdicts
from .changes import compare_op, cpu_rows
from .conditions import Pairing, SideLoads
from .counters import counter_timelines
from .loading import OpSide, VariantRuns, load_variant, op_names, op_side
from .model import CompareOptions, Comparison, CpuRow, OpComparison, VariantInfo
from .stalltimeline import activity, others_active, stall_summary, starved

# a first op this long after the run's clock started is named (a guest under TCG: 1.5-13 s)
LATE_START_S = 1.0
SHIFT_PROBABILITIES = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.97, 0.98, 0.99, 0.995, 0.998, 0.999,
                       0.9995, 0.9999)


@dataclass
class Loaded:
    """The variants compared, the baseline first, and the one workload they hold."""

    variants: list[VariantRuns]
    infos: list[VariantInfo]
    workload: str

    @property
    def labels(self) -> list[str]:
        return [v.label for v in self.variants]


@dataclass
class OpRows:
    """Every op's comparison as measured (no verdicts yet), each side's OpSide behind it, and
    the changes again with the saturated machine's prior for the pairs MACHINE BUSIER may
    distrust."""

    ops: list[OpComparison]
    sides_of: dict[str, list[OpSide]]
    saturated_bounds: dict[tuple[str, str], dict[str, iv.Change]]   # (op, candidate) ->


def build_comparison(baseline: Resolved, candidates: list[Resolved],
                     options: CompareOptions | None = None) -> Comparison:
    """Every number of the comparison report: see docs/architecture.md and report/."""
    options = options or CompareOptions()
    loaded = _load(baseline, candidates)
    variants, labels = loaded.variants, loaded.labels
    loads = conditions.side_loads(variants)
    profile, profile_problem = conditions.noise_profile(options, variants, loads.loads)
    duet_profile, duet_problem = conditions.noise_profile(options, variants, loads.loads,
                                                          duet=True) \
        if any(v.runs and v.runs[0].meta.duet for v in variants) else (None, None)
    pairing = conditions.pairing(variants, loads.saturated,
                                 duet_profile.runs - 1 if duet_profile is not None else None)
    for label in labels[1:]:   # a duet's sides shared the machine's other work, by design
        if pairing.pairs[label]:
            loads.busier[label] = 0
    options = dataclasses.replace(options, noise_profile=profile, duet_profile=duet_profile)
    measured = _op_rows(variants, options, loads, pairing)
    level_shifts = _level_shifts(variants, [op.op for op in measured.ops])
    ops, cpu, verdict_notes = _verdicts(measured, cpu_rows(variants, labels[1:]),
                                        level_shifts, loads, variants, options)
    prior_table = {**iv.RUN_TO_RUN_SD, **(options.run_to_run_sd or {})}
    where, where_error = _where(ops, labels, variants) if options.explain else (None, None)
    from . import views  # heatmaps and blocked-time profiles, computed when a report draws
    return Comparison(
        workload=loaded.workload, baseline=labels[0], candidates=labels[1:],
        variants=loaded.infos, method=pairing.method, options=options, ops=ops, cpu=cpu,
        adjustment=_adjustment(options),
        notes=_notes(loaded.infos) + verdict_notes,
        counters=counter_timelines(variants),
        where=where, where_error=where_error,
        problems=[p for r in (baseline, *candidates) for p in r.problems],
        level_shifts=level_shifts,
        accuracy={"quantile_relative_error": hist.QUANTILE_RELATIVE_ERROR,
                  "exact": ["samples", *(s.key for s in (RATE, MIN, MAX, MEAN))],
                  "run_to_run_prior_sd": prior_table,
                  "prior_dof": iv.PRIOR_DOF,
                  "one_run_reach": _one_run_reach(prior_table)},
        environment=environment_diff(   # fidelity: what else differed
            {v.label: [r.meta.environment or {} for r in v.runs] for v in variants}),
        views=views.build(variants) if options.explain else None,
        noise_profile="; ".join(p.describe() for p in (profile, duet_profile)
                                if p is not None) or None,
        profile_problem="; ".join(p for p in (profile_problem, duet_problem) if p) or None,
        duet={label: d for label, d in pairing.duets.items() if d},
    )


def _load(baseline: Resolved, candidates: list[Resolved]) -> Loaded:
    """The variants' runs and summaries; refuses no candidate, a variant named twice and
    variants of different workloads."""
    if not candidates:
        raise UsageError("compare needs a baseline and at least one candidate")
    labels = [baseline.label, *(c.label for c in candidates)]
    if len(set(labels)) != len(labels):
        raise UsageError(f"variants named twice ({', '.join(labels)}): give each variant once")
    loaded = [load_variant(r) for r in (baseline, *candidates)]
    variants = [v for v, _ in loaded]
    workloads = sorted({run.workload for v in variants for run in v.runs})
    if len(workloads) > 1:
        raise UsageError(f"the variants hold different workloads ({', '.join(workloads)}): "
                         "pick one with --workload")
    return Loaded(variants, [i for _, i in loaded], workloads[0])


def _op_rows(variants: list[VariantRuns], options: CompareOptions, loads: SideLoads,
             pairing: Pairing) -> OpRows:
    probabilities = sorted(set(SHIFT_PROBABILITIES) |
                           {s.probability for s in percentiles(options.percentiles)})
    active = [activity(v.summaries, options.interval_s) for v in variants]
    rows = OpRows([], {}, {})
    for name in op_names(variants):
        sides = [op_side(name, v, options.percentiles) for v in variants]
        rows.sides_of[name] = sides
        rows.ops.append(_op_comparison(name, variants, sides, active, probabilities, options,
                                       loads, pairing, rows.saturated_bounds))
    return rows


def _op_comparison(name: str, variants: list[VariantRuns], sides: list[OpSide],
                   active: list[list[dict[str, np.ndarray]]], probabilities: list[float],
                   options: CompareOptions, loads: SideLoads, pairing: Pairing,
                   saturated_bounds: dict[tuple[str, str], dict[str, iv.Change]]
                   ) -> OpComparison:
    """One op: each variant's statistics, bands and stalls, each candidate's changes (and,
    where one side was busier, its changes under the saturated prior into saturated_bounds)."""
    kind = "response" if name.endswith(RESPONSE_SUFFIX) else "service"
    base = sides[0]
    workers_seen = np.unique(np.concatenate(
        [op.workers for side in sides for op in side.ops] or [np.empty(0, np.int64)]))
    result = OpComparison(op=name, kind=kind, stats={}, changes={}, starved={},
                          slower_probability={}, shift={}, bands={}, shift_curve={}, ccdf={},
                          stalls={})
    for v, side, act in zip(variants, sides, active, strict=True):
        result.stats[v.label] = side.stats
        counts = bands_mod.bands_from_histogram(side.histogram)
        result.bands[v.label] = counts.tolist()
        total = counts.sum()
        result.band_shares[v.label] = (counts / total).tolist() if total else \
            [0.0] * counts.size
        result.ccdf[v.label] = hist.ccdf(side.histogram)
        result.stalls[v.label] = stall_summary(
            side.ops, side.runs, others_active(act, name.removesuffix(RESPONSE_SUFFIX)),
            [r.meta.iteration for r in v.runs], workers_seen, options.interval_s,
            options.stall_threshold_ns)
    for v, side in zip(variants[1:], sides[1:], strict=True):
        label = v.label
        found = compare_op(base, side, probabilities, options, kind, loads.saturated_sd[label],
                           name, pairing.pairs[label])
        result.changes[label], result.shift_curve[label], result.rate_fell[label] = \
            found.changes, found.curve, found.rate_fell
        if loads.busier[label] and not loads.saturated[label]:   # its bound (saturated: the
            heavier = loads.loads[label] if loads.busier[label] > 0 \
                else loads.loads[variants[0].label]                # change itself)
            saturated_bounds[name, label] = compare_op(
                base, side, probabilities, options, kind, interference.load_sd(heavier), name,
                pairing.pairs[label]).changes
        result.samples_change[label] = iv.ratio_change(side.stats.samples, base.stats.samples)
        result.starved[label] = starved(result.stalls[label], side.stats.samples,
                                        base.stats.samples, base.stats.rate)
        result.slower_probability[label] = hist.superiority(side.histogram, base.histogram)
        result.shift[label] = bands_mod.distribution_shift(
            np.asarray(result.bands[variants[0].label]), np.asarray(result.bands[label]))
    return result


def _level_shifts(variants: list[VariantRuns], names: list[str]) -> list[dict[str, Any]]:
    """Runs that mix regimes (analysis/stationarity.py), first per op and variant."""
    found = []
    for variant in variants:
        for name in names:
            if name.endswith(RESPONSE_SUFFIX):
                continue
            for run, summary in zip(variant.runs, variant.summaries, strict=True):
                op = summary.ops.get(name)
                shift = stationarity.level_shift(op, summary) if op is not None else None
                if shift is not None:
                    found.append({"variant": variant.label, "op": name,
                                  "iteration": run.meta.iteration,
                                  **asdict(shift)})
                    break
    return found


def _verdicts(measured: OpRows, cpu: list[CpuRow], level_shifts: list[dict[str, Any]],
              loads: SideLoads, variants: list[VariantRuns], options: CompareOptions
              ) -> tuple[list[OpComparison], list[CpuRow], list[str]]:
    """The verdict policy (verdicts/) over the measured rows and the facts of these runs:
    the finished ops and CPU rows, and the policy's notes."""
    labels = [v.label for v in variants]
    names = {op.op for op in measured.ops}
    kept = {op.op: {label: side.schedule_kept() for label, side in
                    zip(labels, measured.sides_of[op.op + RESPONSE_SUFFIX], strict=True)}
            for op in measured.ops
            if op.kind == "service" and op.op + RESPONSE_SUFFIX in names}
    paced_by = {**{name: name for name in kept},
                **{name + RESPONSE_SUFFIX: name for name in kept}}
    facts = verdicts.Facts(
        baseline=labels[0], options=options,
        ops={op.op: verdicts.OpFacts(op.kind, {label: s.samples for label, s in op.stats.items()},
                                     paced_by.get(op.op), kept.get(paced_by.get(op.op, ""), {}))
             for op in measured.ops},
        runs={v.label: len(v.runs) for v in variants},
        regime_ratios=regime_ratios(level_shifts),
        loads=loads.loads, busier=loads.busier, saturated=loads.saturated,
        loaded_bounds=measured.saturated_bounds)
    judged = verdicts.judge(verdicts.measured_rows(
        {op.op: op.changes for op in measured.ops},
        [(row.name, row.changes) for row in cpu]), facts)
    by_op, by_cpu = verdicts.by_op(judged.rows)
    ops = [dataclasses.replace(op, changes=by_op.get(op.op, {}),
                               schedule_kept=dict(kept.get(op.op, {})))
           for op in measured.ops]
    return ops, [dataclasses.replace(row, changes=by_cpu.get(row.name, {})) for row in cpu], \
        judged.notes


def _one_run_reach(prior_table: dict[str, float]) -> dict[str, list[float]]:
    """Per statistic of the A/A table, the interval [low, high] of a change of 0 with one run
    a side and that prior (intervals.one_run_reach): what a change must exceed to be called."""
    out = {}
    for stat, sd in prior_table.items():
        half = iv.one_run_reach(sd)
        out[stat] = [float(np.expm1(-half)), float(np.expm1(half))]
    return out


def _adjustment(options: CompareOptions) -> str:
    budgets = []
    if options.metrics:
        budgets.append(", ".join(f"{op}:{stat}" for op, stat in options.metrics)
                       + (" (the metrics asked for)" if options.default_rows else ""))
    if options.default_rows:
        budgets.append("/".join(DECIDING_STATS) + " of each op")
    return (f"Benjamini–Hochberg within each candidate over {' and, apart, over '.join(budgets)}"
            "; other rows: unadjusted intervals, no verdict")


def _notes(infos: list[VariantInfo]) -> list[str]:
    from ..results.guestnote import guest_note

    notes = []
    emulated = [info.label for info in infos if guest_note(info.environment)]
    if emulated:
        notes.append(f"{', '.join(emulated)}: {guest_note({'vm': {'hypervisor': 'tcg'}})}")
    for info in infos:
        if info.interval_sampled:
            notes.append(f"{info.label}: imported interval maxima (MMTests), not per-op "
                         "latencies: percentiles describe per-interval maxima")
        late = [r.started_s for r in info.runs if r.started_s >= LATE_START_S]
        if late:
            span = f"{min(late):.1f}" + (f"-{max(late):.1f}" if max(late) - min(late) >= 0.05
                                         else "")
            notes.append(f"{info.label}: the workload's first op came {span} s after the "
                         f"run's clock started in {len(late)} of {len(info.runs)} run(s) (its "
                         "monitors and workers starting): the warm-up and the rates count "
                         "from it")
    bare = [info.label for info in infos
            if any(not (Path(r.path) / OPS_FILE).exists() for r in info.runs)]
    if bare:   # results/bundle.py: a bundle made without --ops
        notes.append(f"{', '.join(bare)}: the runs' ops.parquet are not here (a bundle made "
                     "without --ops): every statistic comes from their summaries, and where "
                     "the time went leaves out what needs each op's own time")
    return notes


def _where(ops: list[OpComparison], labels: list[str], variants: list[VariantRuns]
           ) -> tuple[WhereSection | None, str | None]:
    """The where section, or why its analysis failed."""
    from ..analysis.where.growth import NEW_OP, TailChange, growth
    from . import where

    baseline = labels[0]

    def change(op: OpComparison, label: str, stat: str) -> float | None:
        found = op.changes[label].get(stat)
        return found.change if found else None

    def new(op: OpComparison, label: str) -> bool:
        base, here = op.stats.get(baseline), op.stats.get(label)
        return bool(here and here.samples and not (base and base.samples))

    def tail(op: OpComparison, label: str) -> TailChange:
        # decided: the op is new, or some row of it was called worse (a throttled read's p99
        # may have too few samples for an interval while its rate is clearly worse)
        called = {stat: found.change for stat, found in op.changes[label].items()
                  if found.verdict == Verdict.WORSE and found.change is not None
                  and stat != RATE.key}
        rate = op.changes[label].get(RATE.key)
        stat, grew = growth(change(op, label, "p99"), change(op, label, "mean"), new(op, label),
                            called, rate is not None and rate.verdict == Verdict.WORSE)
        return TailChange(stat, grew, stat == NEW_OP or any(
            found.verdict == Verdict.WORSE for found in op.changes[label].values()))

    tail_changes = {label: {op.op: tail(op, label) for op in ops if op.kind == "service"}
                    for label in labels[1:]}
    try:
        return where.build(variants[0].runs, {v.label: v.runs for v in variants[1:]},
                           baseline, tail_changes), None
    except Exception as exc:  # a monitor analysis bug must not hide the latency comparison
        return None, (f"where did the time go: analysis failed "
                      f"({type(exc).__name__}: {exc})")

