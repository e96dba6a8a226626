"""Build a Comparison: load the runs of each variant and call analysis/ for every number.

The Comparison is a tree of dataclasses that the renderers in report/ print without computing
anything. Every number comes from the runs' summaries (summary.parquet, analysis/summary.py), so
memory does not grow with the number of operations. Several iterations of a variant are pooled
for the estimates; intervals come from analysis/intervals.py (runs and time blocks).

Split by command: the check gate is gate.py, the show summary showsummary.py, the stalls over
time stallsummary.py. What is left (~680 lines) is one builder whose steps all read the same
per-op sides (_OpSide) and fill the same dataclasses; splitting it further would pass those
private structures between modules.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from .analysis import bands as bands_mod
from .analysis import histogram as hist
from .analysis import interference, paired, stationarity
from .analysis import intervals as iv
from .analysis import summary as sm
from .analysis.environment import environment_diff  # fidelity
from .analysis.noise import NoiseProfile
from .analysis.quantiles import (
    DECIDING_STATS,
    MIN_TAIL_SAMPLES,
    RATE,
    Stat,
    latency_stats,
    needed_samples,
    parse_percents,
    percentiles,
    resolvable,
    row_stats,
    spread,
    stat_named,
    tail_samples,
)
from .analysis.summary import RESPONSE_SUFFIX
from .analysis.wheresection import WhereSection
from .errors import UsageError
from .runselect import Resolved
from .stallsummary import StallSummary, activity, others_active, stall_summary, starved
from .store import Run

NOT_STATIONARY = "not stationary"
MACHINE_BUSIER = "machine busier"
MEASURED_SPREAD_RUNS = 3
COUNTER_POINTS = 400     # per counter timeline (a 30-minute run samples 1800 times)
SHIFT_PROBABILITIES = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.97, 0.98, 0.99, 0.995, 0.998, 0.999,
                       0.9995, 0.9999)
CPU_ROWS = (("user", "user_s"), ("system", "system_s"), ("elapsed", "elapsed_s"))


@dataclass
class CompareOptions:
    noise: float = 0.02  # changes smaller than this are never called better/worse
    interval_s: float = 1.0  # stalls-over-time interval
    stall_threshold_ns: int = 100_000_000  # an interval whose max exceeds this is a stall
    rate_drop: float = 0.10  # rate fell by more than this -> flagged FEWER OPS
    explain: bool = True  # call stallbench.where (monitor sections); check does not need it
    run_to_run_sd: dict[str, float] | None = None  # prior τ0 per statistic; None: iv's table
    percentiles: tuple[float, ...] | None = None  # in per cent; None: DEFAULT_PERCENTS
    noise_profile: NoiseProfile | None = None  # this host's measured spread (calibrate)
    use_profiles: bool = True  # look for the baseline's profile beside its runs
    metrics: tuple[tuple[str, str], ...] | None = None  # (op, stat) that decide; None: DECIDING


@dataclass
class RunInfo:
    iteration: int | None
    path: str
    status: str
    duration_s: float
    duration_source: str  # "run.json" or "ops" (from the last completion) when run.json has none
    warmup_s: float = 0.0  # ops that started before this are recorded but not in the statistics
    block_ns: int = 0  # the time blocks behind the intervals and timelines


@dataclass
class VariantInfo:
    label: str
    runs: list[RunInfo]
    workload_summary: list[dict[str, Any]]
    interval_sampled: bool
    kernel: str | None
    environment: dict[str, Any]


@dataclass
class OpStats:
    """One op in one variant (all iterations pooled)."""

    samples: int
    rate: float | None  # ops/s = samples / total duration
    values: dict[str, float | None]  # latency_stats() keys -> ns
    unresolved: dict[str, int]  # percentile -> samples at or beyond it (< MIN_TAIL_SAMPLES)
    iteration_samples: list[int]
    iteration_p99_ns: list[float | None]
    iteration_p99_spread: float | None  # (max - min) / median of the per-iteration p99
    warmup_samples: int = 0  # recorded during the warm-up, not in the statistics
    needed: dict[str, int] = field(default_factory=dict)  # unresolved percentile -> ops it needs


@dataclass
class ShiftCurve:
    probabilities: list[float]
    change: list[float | None]
    low: list[float | None]
    high: list[float | None]


@dataclass
class OpComparison:
    op: str
    kind: str  # "service" (latency as recorded) or "response" (completion - planned start)
    stats: dict[str, OpStats]  # variant label -> stats
    changes: dict[str, dict[str, iv.Change]]  # candidate -> stat ("rate", "p99", ...) -> change
    starved: dict[str, bool]  # candidate -> the op stopped completing while others went on
    slower_probability: dict[str, float | None]  # candidate -> P(candidate op slower)
    shift: dict[str, bands_mod.Shift | None]  # candidate -> distribution shift
    bands: dict[str, list[int]]  # variant -> count per log2 band
    shift_curve: dict[str, ShiftCurve]  # candidate -> shift function
    ccdf: dict[str, dict[str, list[float]]]  # variant -> {latency_ns, fraction_above}
    stalls: dict[str, StallSummary]
    rate_fell: dict[str, bool] = field(default_factory=dict)  # rate fell beyond rate_drop
    samples_change: dict[str, float | None] = field(default_factory=dict)  # candidate -> c/b - 1
    band_shares: dict[str, list[float]] = field(default_factory=dict)  # variant -> share per band
    schedule_kept: dict[str, float | None] = field(default_factory=dict)  # paced ops: variant ->
    # share of the run its planned starts covered (comparison.schedule_kept)


@dataclass
class CpuRow:
    name: str
    values: dict[str, float | None]  # variant -> mean seconds per iteration
    changes: dict[str, iv.Change]


@dataclass
class Comparison:
    workload: str
    baseline: str
    candidates: list[str]
    variants: list[VariantInfo]
    method: dict[str, str]  # candidate -> interval method in words
    options: CompareOptions
    ops: list[OpComparison]
    cpu: list[CpuRow]
    adjustment: str
    notes: list[str] = field(default_factory=list)
    counters: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    where: WhereSection | None = None   # None also when not asked for, or where_error
    where_error: str | None = None      # the where section's analysis failed: why
    problems: list[str] = field(default_factory=list)
    level_shifts: list[dict[str, Any]] = field(default_factory=list)  # runs mixing regimes
    accuracy: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] | None = None   # fidelity: analysis/environment.py
    views: Any = None  # views.Views: heatmaps and blocked-time profiles for the pictures
    noise_profile: str | None = None    # the profile behind the priors, described
    profile_problem: str | None = None  # why a profile of this shape was not used
    duet: dict[str, dict[str, Any]] = field(default_factory=dict)  # candidate -> its pairing

    @property
    def labels(self) -> list[str]:
        return [self.baseline, *self.candidates]

    @property
    def stats(self) -> tuple[Stat, ...]:
        """The rows of every op table: rate, min, the percentiles asked, max, mean."""
        return row_stats(self.options.percentiles)


# ----------------------------------------------------------------------------------------------
# loading: every number below comes from the runs' summaries (summary.parquet), never raw ops


@dataclass
class _VariantRuns:
    label: str
    runs: list[Run]
    summaries: list[sm.RunSummary]
    durations: list[float]  # seconds after the warm-up, per run


def _run_seconds(run: Run, summary: sm.RunSummary) -> tuple[float, str]:
    if run.duration_s > 0:
        return run.duration_s, "run.json"
    return summary.duration_ns / 1e9, "ops"


def load_variant(resolved: Resolved) -> tuple[_VariantRuns, VariantInfo]:
    summaries = [run.summary() for run in resolved.runs]
    durations, infos = [], []
    for run, summary in zip(resolved.runs, summaries, strict=True):
        seconds, source = _run_seconds(run, summary)
        durations.append(max(seconds - summary.warmup_ns / 1e9, 0.0))
        infos.append(RunInfo(run.meta.iteration, str(run.path), run.describe_status(),
                             seconds, source, summary.warmup_ns / 1e9, summary.block_ns))
    first = resolved.runs[0].meta
    info = VariantInfo(
        label=resolved.label,
        runs=infos,
        workload_summary=[r.meta.workload_summary or {} for r in resolved.runs],
        interval_sampled=any(bool(r.meta.interval_sampled) for r in resolved.runs),
        kernel=first.kernel.get("release"),
        environment=first.environment,
    )
    return _VariantRuns(resolved.label, resolved.runs, summaries, durations), info


def op_names(variants: list[_VariantRuns]) -> list[str]:
    names: list[str] = []
    for variant in variants:
        for run, summary in zip(variant.runs, variant.summaries, strict=True):
            for name in [*run.meta.ops_declared, *summary.ops]:
                if name not in names:
                    names.append(name)
    service = [n for n in names if not n.endswith(RESPONSE_SUFFIX)]
    ordered = []
    for name in service:        # each paced op's response time right after it
        ordered.append(name)
        if name + RESPONSE_SUFFIX in names:
            ordered.append(name + RESPONSE_SUFFIX)
    return ordered + [n for n in names if n not in ordered]


def _empty_op(blocks: int) -> sm.OpSummary:
    zero = np.zeros(blocks, np.int64)
    return sm.OpSummary(np.zeros(hist.N_BUCKETS, np.int64), zero, zero.copy(),
                        np.full(blocks, np.iinfo(np.int64).max), np.full(blocks, -1, np.int64),
                        np.zeros((blocks, 0), np.int64), 0, np.empty(0, np.int64),
                        np.empty(0, np.int64), np.empty(0, np.int64), 0, 0, 0, True)


@dataclass
class _OpSide:
    """One op in one variant: each run's summary of it, and what is computed once from them."""

    ops: list[sm.OpSummary]
    runs: list[sm.RunSummary]
    durations: list[float]
    histogram: np.ndarray  # pooled fine histogram (after the warm-up)
    stats: OpStats
    _quantile_stats: dict[tuple[float, ...], list[list[iv.RunStatistic]]] = field(
        default_factory=dict)

    def quantile_statistics(self, probabilities: list[float]) -> list[list[iv.RunStatistic]]:
        """Per run, per probability (cached)."""
        key = tuple(probabilities)
        if key not in self._quantile_stats:
            self._quantile_stats[key] = [
                iv.quantile_statistics(op, run.warmup_blocks, probabilities)
                for op, run in zip(self.ops, self.runs, strict=True)]
        return self._quantile_stats[key]

    def mean_statistics(self) -> list[iv.RunStatistic]:
        return [iv.mean_statistic(op, run.warmup_blocks)
                for op, run in zip(self.ops, self.runs, strict=True)]

    def rate_statistics(self) -> list[iv.RunStatistic]:
        return [iv.rate_statistic(op, run.warmup_blocks, run.block_durations_ns() / 1e9)
                for op, run in zip(self.ops, self.runs, strict=True)]


def op_side(name: str, variant: _VariantRuns, percents: tuple[float, ...] | None = None
          ) -> _OpSide:
    ops = [summary.ops.get(name) or _empty_op(summary.blocks) for summary in variant.summaries]
    histogram = np.sum([op.histogram for op in ops], axis=0) if ops else \
        np.zeros(hist.N_BUCKETS, np.int64)
    totals = [sm.op_totals(op, run.warmup_blocks)
              for op, run in zip(ops, variant.summaries, strict=True)]
    n = int(sum(t[0] for t in totals))
    total_duration = float(sum(variant.durations))
    rate = n / total_duration if total_duration > 0 else None
    iteration_p99: list[float | None] = []
    for op, t in zip(ops, totals, strict=True):
        iteration_p99.append(_quantiles(op.histogram, [0.99])[0]
                             if t[0] and resolvable(t[0], 0.99) else None)
    iteration_samples = [int(t[0]) for t in totals]
    warmup = int(sum(op.warmup_samples for op in ops))
    wanted = percentiles(percents)
    if n == 0:
        stats = OpStats(0, rate, {s.key: None for s in latency_stats(percents)}, {},
                        iteration_samples,
                        iteration_p99, None, warmup)
        return _OpSide(ops, variant.summaries, variant.durations, histogram, stats)
    values: dict[str, float | None] = {
        "min": float(min(t[2] for t in totals if t[0])),
        "max": float(max(t[3] for t in totals if t[0])),
        "mean": float(sum(t[1] for t in totals)) / n,
    }
    unresolved: dict[str, int] = {}
    needed: dict[str, int] = {}
    for stat, estimate in zip(wanted, _quantiles(histogram, [s.probability for s in wanted]),
                              strict=True):
        values[stat.key] = estimate
        if not resolvable(n, stat.probability):
            unresolved[stat.key] = tail_samples(n, stat.probability)
            needed[stat.key] = needed_samples(stat.probability)
    values = {stat.key: values[stat.key] for stat in latency_stats(percents)}
    stats = OpStats(n, rate, values, unresolved, iteration_samples, iteration_p99,
                    spread(iteration_p99), warmup, needed)
    return _OpSide(ops, variant.summaries, variant.durations, histogram, stats)


def _quantiles(histogram: np.ndarray, probabilities: list[float]) -> list[float]:
    return hist.quantiles_from_counts(histogram, np.asarray(probabilities),
                                      hist.bucket_lower_edges())[0].tolist()


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


def _changes(base: _OpSide, cand: _OpSide, probabilities: list[float],
             options: CompareOptions, kind: str = "service", saturated_sd: float = 0.0,
             op: str = "", pairs: list[tuple[int, int]] | None = None
             ) -> tuple[dict[str, iv.Change], ShiftCurve]:
    """Every statistic's change with its two-level interval (analysis/intervals.py), or its
    paired one where `pairs` (2+ duet rounds, see _duet_pairs) pair the runs
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
        return paired.paired_change([b[i] for i, _ in pairs], [c[j] for _, j in pairs], floor)

    changes["rate"] = interval(iv.ratio_change(cs.rate, bs.rate), base.rate_statistics(),
                               cand.rate_statistics(), "rate")
    changes["mean"] = interval(iv.ratio_change(cs.values["mean"], bs.values["mean"]),
                               base.mean_statistics(), cand.mean_statistics(), "mean")
    for stat in ("min", "max"):
        changes[stat] = iv.Change(iv.ratio_change(cs.values[stat], bs.values[stat]),
                                  note="no interval")
    b_values = _quantiles(base.histogram, probabilities)
    c_values = _quantiles(cand.histogram, probabilities)
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


def _curve(probabilities: list[float], triples, nb: int, nc: int) -> ShiftCurve:
    curve = ShiftCurve([], [], [], [])
    for p, (change, low, high) in zip(probabilities, triples, strict=True):
        if p > 0.5 and not (resolvable(nb, p) and resolvable(nc, p)):
            continue
        curve.probabilities.append(p)
        curve.change.append(change)
        curve.low.append(low)
        curve.high.append(high)
    return curve


def _ccdf(counts: np.ndarray) -> dict[str, list[float]]:
    """Fraction of ops slower than each bucket's upper edge (for the log-log CCDF plot)."""
    total = counts.sum()
    if total == 0:
        return {"latency_ns": [], "fraction_above": []}
    used = np.flatnonzero(counts)
    upper = hist.bucket_lower_edges()[used + 1]
    above = 1.0 - np.cumsum(counts)[used] / total
    keep = above > 0
    return {"latency_ns": upper[keep].tolist(), "fraction_above": above[keep].tolist()}


def _level_shifts(variants: list[_VariantRuns], names: list[str]) -> list[dict[str, Any]]:
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


def _distrust_regime_mixes(ops: list[OpComparison], level_shifts: list[dict[str, Any]],
                           baseline: str, runs: dict[str, int]) -> None:
    """An op whose runs mix two regimes (a cold then a warm cache) pools them in proportions
    that vary from run to run, which can move its statistics by up to the ratio of the two
    regimes: verdicts on changes no larger than that become 'unclear' (the report says when
    the regime changed and what to do). A change beyond any regime ratio still stands, and so
    does every verdict with MEASURED_SPREAD_RUNS or more runs on each side: runs that mix the
    regimes in different proportions then show it in their measured spread."""
    ratio: dict[tuple[str, str], float] = {}
    for s in level_shifts:
        key = (s["variant"], s["op"])
        size = abs(float(np.log(max(s["after_ns"], 1.0) / max(s["before_ns"], 1.0))))
        ratio[key] = max(ratio.get(key, 0.0), size)
    for op in ops:
        name = op.op.removesuffix(RESPONSE_SUFFIX)
        for label, changes in op.changes.items():
            bound = max(ratio.get((baseline, name), 0.0), ratio.get((label, name), 0.0))
            if bound == 0.0 or min(runs.get(baseline, 0), runs.get(label, 0)) \
                    >= MEASURED_SPREAD_RUNS:
                continue
            for change in changes.values():
                if change.verdict not in iv.DECIDED:
                    continue
                if change.change is not None and change.low is not None and min(
                        abs(np.log1p(change.low)), abs(np.log1p(change.high))) > bound \
                        and change.verdict != iv.Verdict.SAME:
                    continue
                change.verdict = iv.Verdict.UNCLEAR
                change.note = NOT_STATIONARY


def _distrust_busier_machine(ops: list[OpComparison], cpu: list[CpuRow], base: str,
                             loads: dict[str, interference.OutsideLoad | None],
                             saturated: dict[str, int], busier: dict[str, int],
                             loaded: dict[tuple[str, str], dict[str, iv.Change]],
                             noise: float, floors: dict[str, float]) -> list[str]:
    """Verdicts that more outside load on one side could explain (analysis/interference.py):
    'worse' when the candidate's runs were busier, 'better' when the baseline's were, become
    'unclear (machine busier)' (`busier`: interference.busier_side per candidate) unless the
    change's interval with the saturated machine's run-to-run prior (`loaded`, per op and
    candidate) gives the same verdict: a change beyond what separate runs on a saturated
    machine differ by stands. CPU rows have no such bound.
    Returns the notes that say so, and the saturated ones (whose intervals were widened)."""
    notes = []
    for label, runs in saturated.items():
        if runs:
            notes.append(
                f"MACHINE SATURATED: in {runs} of the runs of {base} and {label} every CPU was "
                "busy, mostly with other processes; separate runs there differ far more than "
                "on a machine with room (A/A runs 30x apart), so the intervals assume a "
                f"run-to-run spread of at least ×{np.exp(floors[label]):.1f} per standard "
                "deviation: use a quieter machine")
    for label, side in busier.items():
        if side == 0:
            continue
        distrusted = iv.Verdict.WORSE if side > 0 else iv.Verdict.BETTER
        # a saturated pair's intervals already have the saturated prior
        changes = [(c, c if saturated[label] else loaded.get((op.op, label), {}).get(stat),
                    stat_named(stat).higher_is_better)
                   for op in ops for stat, c in op.changes[label].items()]
        changes += [(row.changes[label], None, False) for row in cpu if label in row.changes]
        kept = 0
        for change, bound, higher_is_better in changes:
            if change.verdict != distrusted:
                continue
            if bound is not None and iv.verdict(bound, higher_is_better, noise) == distrusted:
                kept += 1
                continue
            change.verdict, change.note = iv.Verdict.UNCLEAR, MACHINE_BUSIER
        busier, quieter = (label, base) if side > 0 else (base, label)
        notes.append(
            f"MACHINE BUSIER: other processes and steal took {loads[busier].mean_cpus:.2f} of "
            f"{loads[busier].cpus} CPUs during {busier}'s runs vs "
            f"{loads[quieter].mean_cpus:.2f} during {quieter}'s: '{distrusted}' verdicts for "
            f"{label} are left unclear"
            + (f" ({kept} beyond what separate runs on a saturated machine differ by stand)"
               if kept else "")
            + "; rerun on a quieter machine or interleave more iterations")
    return notes


def _cpu_rows(variants: list[_VariantRuns], candidates: list[str]) -> list[CpuRow]:
    rows = []
    by_label = {v.label: v for v in variants}
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
        changes = {}
        for label in candidates:
            xb, xc = per_variant[base.label], per_variant[by_label[label].label]
            estimate = iv.ratio_change(values[label], values[base.label])
            if estimate is None or len(xb) < 2 or len(xc) < 2:
                changes[label] = iv.Change(estimate)
                continue
            mb, mc = np.mean(xb), np.mean(xc)
            se_b = np.std(xb, ddof=1) / np.sqrt(len(xb)) / mb
            se_c = np.std(xc, ddof=1) / np.sqrt(len(xc)) / mc
            triple = iv.combine_log_se((np.log(mc), se_c, len(xc) - 1),
                                       (np.log(mb), se_b, len(xb) - 1))
            changes[label] = _change(estimate, triple[1], triple[2])
        rows.append(CpuRow(name, values, changes))
    return rows


def _change(change: float | None, low: float | None = None,
            high: float | None = None) -> iv.Change:
    if change is None or not np.isfinite(change):
        return iv.Change(None)
    if low is None or high is None or not (np.isfinite(low) and np.isfinite(high)):
        return iv.Change(change)
    return iv.Change(change, low, high, iv.p_value_from_interval(change, low, high))


def _counters(variants: list[_VariantRuns]) -> dict[str, dict[str, dict[str, Any]]]:
    """First run's `counters` monitor table per variant: column -> {t_s, values, kind}.

    The columns the counters monitor declares cumulative become per-second rates between
    samples; the gauges (such as free pages) are kept as they are (analysis/montables.py)."""
    from .analysis.montables import counter_series
    from .monitors.counters import COUNTERS

    out: dict[str, dict[str, dict[str, Any]]] = {}
    for v in variants:
        try:
            table = v.runs[0].monitor_table("counters")
        except UsageError:
            continue
        if table is None or "t_ns" not in table.column_names or table.num_rows < 2:
            continue
        t = table.column("t_ns").to_numpy(zero_copy_only=False).astype(np.float64) / 1e9
        columns: dict[str, dict[str, Any]] = {}
        for name in table.column_names:
            if name == "t_ns":
                continue
            try:
                values = table.column(name).to_numpy(zero_copy_only=False).astype(np.float64)
            except (TypeError, ValueError, NotImplementedError, pa.ArrowException):
                continue
            track = counter_series(t, values, COUNTERS.is_counter(name), COUNTER_POINTS)
            if track is not None:
                columns[name] = track
        out[v.label] = columns
    return out


def build_comparison(baseline: Resolved, candidates: list[Resolved],
                     options: CompareOptions | None = None) -> Comparison:
    """Every number of the comparison report: see docs/architecture.md and report/."""
    options = options or CompareOptions()
    if not candidates:
        raise UsageError("compare needs a baseline and at least one candidate")
    labels = [baseline.label, *(c.label for c in candidates)]
    if len(set(labels)) != len(labels):
        raise UsageError(f"variants named twice ({', '.join(labels)}): give each variant once")
    loaded = [load_variant(r) for r in (baseline, *candidates)]
    variants = [v for v, _ in loaded]
    infos = [i for _, i in loaded]
    workloads = sorted({run.workload for v in variants for run in v.runs})
    if len(workloads) > 1:
        raise UsageError(f"the variants hold different workloads ({', '.join(workloads)}): "
                         "pick one with --workload")
    base = variants[0]
    cand_labels = labels[1:]
    method = {label: iv.METHOD for label in cand_labels}
    probabilities = sorted(set(SHIFT_PROBABILITIES) |
                           {s.probability for s in percentiles(options.percentiles)})
    active = [activity(v.summaries, options.interval_s) for v in variants]
    loads = {v.label: interference.outside_load([r.meta.machine_load for r in v.runs])
             for v in variants}
    saturated = {label: sum(load.saturated for load in (loads[base.label], loads[label])
                            if load is not None) for label in cand_labels}
    saturated_sd = {label: interference.saturated_sd([loads[base.label], loads[label]])
                    for label in cand_labels}
    busier = {label: interference.busier_side(loads[base.label], loads[label])
              for label in cand_labels}
    profile, profile_problem = _noise_profile(options, variants, loads)
    duets = {label: _duet_pairs(base, v, saturated[label])
             for label, v in zip(cand_labels, variants[1:], strict=True)}
    pairs_of = {label: d.pop("pairs_used", None) for label, d in duets.items()}
    for label in cand_labels:   # a duet's sides shared the machine's other work, by design
        if pairs_of[label]:
            busier[label] = 0
    for label, d in duets.items():
        if d:
            method[label] = paired.METHOD if pairs_of[label] else d["method"]
    options = dataclasses.replace(options, noise_profile=profile)
    loaded: dict[tuple[str, str], dict[str, iv.Change]] = {}
    names = op_names(variants)
    ops: list[OpComparison] = []
    sides_of: dict[str, list[_OpSide]] = {}
    for name in names:
        kind = "response" if name.endswith(RESPONSE_SUFFIX) else "service"
        sides = [op_side(name, v, options.percentiles) for v in variants]
        sides_of[name] = sides
        workers_seen = np.unique(np.concatenate(
            [op.workers for side in sides for op in side.ops] or [np.empty(0, np.int64)]))
        result = OpComparison(name, kind, {}, {}, {}, {}, {}, {}, {}, {}, {})
        for v, side, act in zip(variants, sides, active, strict=True):
            result.stats[v.label] = side.stats
            counts = bands_from_histogram(side.histogram)
            result.bands[v.label] = counts.tolist()
            total = counts.sum()
            result.band_shares[v.label] = (counts / total).tolist() if total else \
                [0.0] * counts.size
            result.ccdf[v.label] = _ccdf(side.histogram)
            result.stalls[v.label] = stall_summary(
                side.ops, side.runs, others_active(act, name.removesuffix(RESPONSE_SUFFIX)),
                [r.meta.iteration for r in v.runs], workers_seen, options.interval_s,
                options.stall_threshold_ns)
        for label, side in zip(cand_labels, sides[1:], strict=True):
            result.changes[label], result.shift_curve[label], result.rate_fell[label] = \
                _compare_op(sides[0], side, probabilities, options, kind, saturated_sd[label],
                            name, pairs_of[label])
            if busier[label] and not saturated[label]:   # its bound (saturated: the change)
                heavier = loads[label] if busier[label] > 0 else loads[base.label]
                loaded[name, label] = _compare_op(sides[0], side, probabilities, options, kind,
                                                  interference.load_sd(heavier), name,
                                                  pairs_of[label])[0]
            result.samples_change[label] = iv.ratio_change(side.stats.samples,
                                                           sides[0].stats.samples)
            result.starved[label] = starved(result.stalls[label], side.stats.samples,
                                            sides[0].stats.samples, sides[0].stats.rate)
            result.slower_probability[label] = hist.superiority(side.histogram,
                                                                sides[0].histogram)
            result.shift[label] = bands_mod.distribution_shift(
                np.asarray(result.bands[base.label]), np.asarray(result.bands[label]))
        ops.append(result)

    cpu = _cpu_rows(variants, cand_labels)
    _pace_rates(ops, sides_of, labels, options.rate_drop)
    _adjust(ops, cpu, cand_labels, options)
    level_shifts = _level_shifts(variants, names)
    _distrust_regime_mixes(ops, level_shifts, base.label,
                           {v.label: len(v.runs) for v in variants})
    busier_notes = _distrust_busier_machine(ops, cpu, base.label, loads, saturated, busier,
                                            loaded, options.noise, saturated_sd)
    comparison = Comparison(
        workload=workloads[0], baseline=base.label, candidates=cand_labels, variants=infos,
        method=method, options=options, ops=ops, cpu=cpu,
        adjustment=_adjustment(options),
        counters=_counters(variants),
        problems=[p for r in (baseline, *candidates) for p in r.problems],
        level_shifts=level_shifts,
        accuracy={"quantile_relative_error": hist.QUANTILE_RELATIVE_ERROR,
                  "exact": ["samples", "rate", "min", "max", "mean"],
                  "run_to_run_prior_sd": dict(iv.RUN_TO_RUN_SD),
                  "prior_dof": iv.PRIOR_DOF},
    )
    comparison.noise_profile = profile.describe() if profile is not None else None
    comparison.duet = {label: d for label, d in duets.items() if d}
    comparison.profile_problem = profile_problem
    comparison.notes = _notes(comparison) + busier_notes
    comparison.environment = environment_diff(   # fidelity: what else differed
        {v.label: [r.meta.environment or {} for r in v.runs] for v in variants})
    comparison.where = _where(comparison, variants) if options.explain else None
    from . import views  # heatmaps and blocked-time profiles, computed when a report draws
    comparison.views = views.build(variants) if options.explain else None
    return comparison


def _duet_pairs(base: _VariantRuns, cand: _VariantRuns, saturated: int) -> dict[str, Any]:
    """How the candidate's runs pair with the baseline's (run.json `duet`, analysis/paired.py):
    {} when they are not duets of each other; else the rounds, the method, and `pairs_used`
    (the index pairs behind the paired intervals: None with one pair, or on a saturated
    machine, where the sequential model and its floor apply)."""
    pairs = paired.pair_runs([r.meta.duet for r in base.runs], [r.meta.duet for r in cand.runs])
    if pairs is None:
        return {}
    rounds = [base.runs[i].meta.duet.get("round") for i, _ in pairs]
    if len(pairs) < 2:
        return {"pairs": 1, "rounds": rounds, "interval": "two-level (1 duet)",
                "method": paired.ONE_DUET_METHOD, "pairs_used": None}
    if saturated:
        return {"pairs": len(pairs), "rounds": rounds,
                "interval": "two-level (machine saturated)",
                "method": iv.METHOD + "; duets, but the machine was saturated",
                "pairs_used": None}
    return {"pairs": len(pairs), "rounds": rounds, "interval": "paired",
            "method": paired.METHOD, "pairs_used": pairs}


def bands_from_histogram(histogram: np.ndarray) -> np.ndarray:
    """Log2 bands from the log-linear histogram: bucket // SUB_BUCKETS is the power of two."""
    counts = histogram.reshape(-1, hist.SUB_BUCKETS).sum(axis=1)
    out = np.zeros(bands_mod.N_BANDS, dtype=np.int64)
    out[:min(len(counts), bands_mod.N_BANDS)] = counts[:bands_mod.N_BANDS]
    out[-1] += counts[bands_mod.N_BANDS:].sum()
    return out


def compare_summaries(baseline: list[sm.RunSummary], candidate: list[sm.RunSummary], op: str,
                      options: CompareOptions | None = None) -> dict[str, iv.Change]:
    """Changes of every statistic of one op between two lists of run summaries (before the
    multiple-comparison adjustment), as build_comparison computes them."""
    options = options or CompareOptions()
    probabilities = sorted({s.probability for s in percentiles(options.percentiles)})
    sides = []
    for summaries in (baseline, candidate):
        durations = [max(s.duration_ns - s.warmup_ns, 0) / 1e9 for s in summaries]
        sides.append(op_side(op, _VariantRuns("", [], summaries, durations), options.percentiles))
    changes, _, _ = _compare_op(sides[0], sides[1], probabilities, options, op=op)
    return changes


def _compare_op(base: _OpSide, cand: _OpSide, probabilities: list[float],
                options: CompareOptions, kind: str = "service", saturated_sd: float = 0.0,
                op: str = "", pairs: list[tuple[int, int]] | None = None):
    nb, nc = base.stats.samples, cand.stats.samples
    if nb == 0 or nc == 0:
        changes = {stat.key: iv.Change(None, note="no samples")
                   for stat in latency_stats(options.percentiles)}
        rate_change = iv.ratio_change(cand.stats.rate, base.stats.rate)
        changes["rate"] = iv.Change(rate_change, note="no samples")
        if nc == 0 and nb >= MIN_TAIL_SAMPLES:
            changes["rate"].verdict = iv.Verdict.WORSE
        return changes, ShiftCurve([], [], [], []), nc == 0 and nb > 0
    changes, curve = _changes(base, cand, probabilities, options, kind, saturated_sd, op, pairs)
    for stat in percentiles(options.percentiles):
        if stat.key in base.stats.unresolved or stat.key in cand.stats.unresolved:
            changes[stat.key] = iv.Change(None, note="not resolvable")
    rate = changes["rate"].change
    return changes, curve, rate is not None and rate < -options.rate_drop


def decides(op: OpComparison, stat: str, options: CompareOptions) -> bool:
    """Whether a row is in its candidate's false-discovery budget: the statistics named with
    --metric (check, iterations auto), else DECIDING_STATS of every op (not a response op's
    rate, which is its service op's)."""
    if options.metrics is not None:
        return (op.op, stat) in options.metrics
    return stat in DECIDING_STATS and not (op.kind == "response" and stat == RATE.key)


def _adjust(ops: list[OpComparison], cpu: list[CpuRow], candidates: list[str],
            options: CompareOptions) -> None:
    """Benjamini–Hochberg within each candidate over the rows that decide (`decides`), then
    their verdict words and, where undecided, why and how many runs would likely decide; the
    other rows keep their unadjusted interval with the verdict INTERVAL_ONLY."""
    for label in candidates:
        family: list[tuple[iv.Change, bool]] = []
        for op in ops:
            for stat, change in op.changes[label].items():
                if change.verdict != iv.Verdict.NA:
                    continue
                if decides(op, stat, options):
                    family.append((change, stat_named(stat).higher_is_better))
                elif change.low is not None:
                    change.verdict = iv.Verdict.INTERVAL_ONLY
        with_p = [change for change, _ in family if change.p_value is not None]
        for change, adjusted in zip(with_p, iv.benjamini_hochberg([c.p_value for c in with_p]),
                                    strict=True):
            change.p_adjusted = adjusted
        for change, higher_is_better in family:
            change.verdict = iv.verdict(change, higher_is_better, options.noise)
            if change.verdict == iv.Verdict.UNCLEAR:
                if iv.excludes_zero(change) and abs(change.change) > options.noise:
                    change.note = iv.ADJUSTED
                change.iterations_needed = (paired.pairs_needed if change.variance.get(
                    "paired") else iv.iterations_to_decide)(change, options.noise)
        for op in ops:
            for change in op.changes[label].values():
                _mark_wide_interval(change)
    for row in cpu:
        for change in row.changes.values():
            if change.low is not None and change.verdict == iv.Verdict.NA:
                change.verdict = iv.Verdict.INTERVAL_ONLY


def _mark_wide_interval(change: iv.Change) -> None:
    """An interval wider than MAX_INTERVAL_RATIO either way tells nothing as numbers: it is not
    shown (Change.interval_shown), its verdict stands where even it excludes 0 (O_DIRECT's 40x
    on a saturated machine), and an unclear row says why (TOO_WIDE)."""
    if iv.too_wide(change):
        change.interval_shown = False
        if change.verdict == iv.Verdict.UNCLEAR:
            change.note = iv.TOO_WIDE


def _pace_rates(ops: list[OpComparison], sides_of: dict[str, list[_OpSide]],
                labels: list[str], rate_drop: float) -> None:
    """A paced op's rate is set by its own schedule: no interval, verdict PACED, unless the
    candidate fell behind its schedule by more than `rate_drop` where the baseline did not
    (then worse, BEHIND_SCHEDULE)."""
    names = {op.op for op in ops}
    for op in ops:
        if op.kind != "service" or op.op + RESPONSE_SUFFIX not in names:
            continue
        kept = {label: schedule_kept(side) for label, side in
                zip(labels, sides_of[op.op + RESPONSE_SUFFIX], strict=True)}
        op.schedule_kept = kept
        response = next(o for o in ops if o.op == op.op + RESPONSE_SUFFIX)
        for label in labels[1:]:
            change = op.changes[label]["rate"]
            if change.change is None:
                continue
            base, cand = kept[labels[0]], kept[label]
            behind = cand is not None and cand < 1 - rate_drop and \
                (base is None or base - cand > rate_drop)
            for paced in (op, response):   # the response op completes as often
                paced.changes[label]["rate"] = iv.Change(
                    change.change, verdict=iv.Verdict.WORSE if behind else iv.Verdict.PACED,
                    note=iv.BEHIND_SCHEDULE if behind else None, runs=change.runs)


def schedule_kept(response: _OpSide) -> float | None:
    """The share of the runs' time that a paced op's planned starts covered (its response op
    is binned by planned start): 1.0 when it kept its schedule to the end, 0.6 when its last
    op was planned 60% of the way through; the mean over runs."""
    shares = []
    for op, run in zip(response.ops, response.runs, strict=True):
        counts = op.block_count[run.warmup_blocks:]
        if counts.size == 0 or not counts.any():
            continue
        shares.append((int(np.flatnonzero(counts)[-1]) + 1) / counts.size)
    return float(np.mean(shares)) if shares else None


def _noise_profile(options: CompareOptions, variants: list[_VariantRuns],
                   loads: dict[str, interference.OutsideLoad | None]
                   ) -> tuple[NoiseProfile | None, str | None]:
    """The noise profile behind the priors: the one given, else the one calibrated for the
    baseline's shape on its host (RESULTS/noise-profiles), while every run compared is on that
    host and no busier than the calibration was."""
    if options.noise_profile is not None or not options.use_profiles:
        return options.noise_profile, None
    from .noiseprofiles import find_profile

    first = variants[0].runs[0]
    profile, problem = find_profile(first.path.parents[2], first.meta)
    if profile is None:
        return None, problem
    hosts = {r.meta.host or "" for v in variants for r in v.runs}
    if hosts != {profile.host}:
        return None, (f"noise profile {profile.source} not used: it is of {profile.host}, the "
                      f"runs are of {', '.join(sorted(hosts))}")
    for label, load in loads.items():
        if load is None or profile.outside_cpus is None:
            continue
        if load.mean_cpus > profile.outside_cpus + interference.BUSIER_SHARE * load.cpus:
            return None, (f"noise profile {profile.source} not used: other processes took "
                          f"{load.mean_cpus:.2f} CPUs during {label}'s runs, "
                          f"{profile.outside_cpus:.2f} during the calibration")
    return profile, None


def _adjustment(options: CompareOptions) -> str:
    named = (", ".join(f"{op}:{stat}" for op, stat in options.metrics) if options.metrics
             is not None else "/".join(DECIDING_STATS) + " of each op")
    return (f"Benjamini–Hochberg within each candidate over {named}; other rows: unadjusted "
            "intervals, no verdict")


def _notes(comparison: Comparison) -> list[str]:
    from .vm.notes import guest_note

    notes = []
    emulated = [info.label for info in comparison.variants if guest_note(info.environment)]
    if emulated:
        notes.append(f"{', '.join(emulated)}: {guest_note({'vm': {'hypervisor': 'tcg'}})}")
    for info in comparison.variants:
        if info.interval_sampled:
            notes.append(f"{info.label}: imported interval maxima (MMTests), not per-op "
                         "latencies: percentiles describe per-interval maxima")
        ops_source = [r for r in info.runs if r.duration_source != "run.json"]
        if ops_source:
            notes.append(f"{info.label}: {len(ops_source)} run(s) without duration_s in "
                         "run.json; rate uses the time of the last completion")
    return notes


def _where(comparison: Comparison, variants: list[_VariantRuns]) -> WhereSection | None:
    from . import where
    from .analysis.monitors import growth

    def change(op: OpComparison, label: str, stat: str) -> float | None:
        found = op.changes[label].get(stat)
        return found.change if found else None

    tail_changes = {
        label: {op.op: growth(change(op, label, "p99"), change(op, label, "mean"))
                for op in comparison.ops if op.kind == "service"}
        for label in comparison.candidates
    }
    try:
        return where.build(variants[0].runs, {v.label: v.runs for v in variants[1:]},
                           comparison.baseline, tail_changes)
    except Exception as exc:  # a monitor analysis bug must not hide the latency comparison
        comparison.where_error = (f"where did the time go: analysis failed "
                                  f"({type(exc).__name__}: {exc})")
        return None


def parse_percentiles(text: str) -> tuple[float, ...]:
    """--percentiles '50,99,99.99' -> (50.0, 99.0, 99.99)."""
    try:
        return parse_percents(text)
    except ValueError as exc:
        raise UsageError(f"--percentiles {text}: {exc}; give percentiles between 0 and 100 "
                         "separated by commas, e.g. 50,99,99.99") from None


def parse_percent(text: str, what: str) -> float:
    """'10%' or '10' -> 0.10."""
    raw = str(text).strip().removesuffix("%").strip()
    try:
        value = float(raw)
    except ValueError:
        raise UsageError(f"{what}: {text!r} is not a percentage (use e.g. 10%)") from None
    if not np.isfinite(value) or value < 0 or value > 10000:
        raise UsageError(f"{what}: {text!r} must be a percentage between 0 and 10000")
    return value / 100.0
