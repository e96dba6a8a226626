"""Build a Comparison: load the runs of each variant and call analysis/ for every number.

The Comparison is a tree of dataclasses that the renderers in report/ print without computing
anything. Several iterations of a variant are pooled; intervals come from analysis.intervals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from .analysis import bands as bands_mod
from .analysis import histogram as hist
from .analysis import intervals as iv
from .analysis import stalls as stalls_mod
from .analysis.quantiles import (
    LATENCY_STATS,
    MIN_TAIL_SAMPLES,
    PERCENTILES,
    resolvable,
    spread,
    tail_samples,
)
from .errors import UsageError
from .store import OpArrays, Resolved, Run

RESPONSE_SUFFIX = " (response)"
SHIFT_PROBABILITIES = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.97, 0.98, 0.99, 0.995, 0.998, 0.999,
                       0.9995, 0.9999)
CPU_ROWS = (("user", "user_s"), ("system", "system_s"), ("elapsed", "elapsed_s"))


@dataclass
class CompareOptions:
    noise: float = 0.02  # changes smaller than this are never called better/worse
    interval_s: float = 1.0  # stalls-over-time interval
    stall_threshold_ns: int = 100_000_000  # an interval whose max exceeds this is a stall
    starved_rate_drop: float = 0.10  # rate fell by more than this -> starved
    resamples: int = iv.BOOTSTRAP_RESAMPLES
    seed: int = 0
    explain: bool = True  # call stallbench.where (monitor sections); check does not need it


@dataclass
class RunInfo:
    iteration: int | None
    path: str
    status: str
    duration_s: float
    duration_source: str  # "run.json" or "ops" (from the last completion) when run.json has none


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
    values: dict[str, float | None]  # LATENCY_STATS -> ns
    unresolved: dict[str, int]  # percentile -> samples at or beyond it (< 10)
    iteration_samples: list[int]
    iteration_p99_ns: list[float | None]
    iteration_p99_spread: float | None  # (max - min) / median of the per-iteration p99


@dataclass
class ShiftCurve:
    probabilities: list[float]
    change: list[float | None]
    low: list[float | None]
    high: list[float | None]


@dataclass
class StallSummary:
    """Stalls of one op in one variant, over all its iterations."""

    interval_ns: int
    threshold_ns: int
    timelines: list[dict[str, list]]  # per iteration: count, p99_ns, max_ns (None = no op)
    episodes: list[dict[str, Any]]  # iteration, start_ns, duration_ns, kind, worst_ns
    longest_stall: dict[str, Any]  # iteration, start_ns, duration_ns
    workers: list[dict[str, Any]]  # per iteration: counts {worker: n}, starved [workers]


@dataclass
class OpComparison:
    op: str
    kind: str  # "service" (latency as recorded) or "response" (completion - planned start)
    stats: dict[str, OpStats]  # variant label -> stats
    changes: dict[str, dict[str, iv.Change]]  # candidate -> stat ("rate", "p99", ...) -> change
    starved: dict[str, bool]  # candidate -> rate fell by more than the threshold
    slower_probability: dict[str, float | None]  # candidate -> P(candidate op slower)
    shift: dict[str, bands_mod.Shift | None]  # candidate -> distribution shift
    bands: dict[str, list[int]]  # variant -> count per log2 band
    shift_curve: dict[str, ShiftCurve]  # candidate -> shift function
    ccdf: dict[str, dict[str, list[float]]]  # variant -> {latency_ns, fraction_above}
    stalls: dict[str, StallSummary]


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
    where: dict[str, Any] | None = None
    problems: list[str] = field(default_factory=list)
    views: Any = None  # views.Views: heatmaps and blocked-time profiles for the pictures

    @property
    def labels(self) -> list[str]:
        return [self.baseline, *self.candidates]


# ----------------------------------------------------------------------------------------------


def _run_duration(run: Run, ops: dict[str, OpArrays]) -> tuple[float, str]:
    if run.duration_s > 0:
        return run.duration_s, "run.json"
    ends = [int((a.start_ns + a.latency_ns).max()) for a in ops.values() if a.latency_ns.size]
    return (max(ends) / 1e9 if ends else 0.0), "ops"


@dataclass
class _VariantRuns:
    label: str
    runs: list[Run]
    ops: list[dict[str, OpArrays]]
    durations: list[float]


def _load(resolved: Resolved) -> tuple[_VariantRuns, VariantInfo]:
    ops_per_run = [run.op_arrays() for run in resolved.runs]
    durations, infos = [], []
    for run, ops in zip(resolved.runs, ops_per_run, strict=True):
        duration, source = _run_duration(run, ops)
        durations.append(duration)
        infos.append(RunInfo(run.meta.get("iteration"), str(run.path), run.describe_status(),
                             duration, source))
    first = resolved.runs[0].meta
    info = VariantInfo(
        label=resolved.label,
        runs=infos,
        workload_summary=[r.meta.get("workload_summary") or {} for r in resolved.runs],
        interval_sampled=any(bool(r.meta.get("interval_sampled")) for r in resolved.runs),
        kernel=(first.get("kernel") or {}).get("release"),
        environment=first.get("environment") or {},
    )
    return _VariantRuns(resolved.label, resolved.runs, ops_per_run, durations), info


def _op_names(variants: list[_VariantRuns]) -> list[str]:
    names: list[str] = []
    for variant in variants:
        for run, ops in zip(variant.runs, variant.ops, strict=True):
            for name in [*run.meta.get("ops_declared", []), *ops.keys()]:
                if name not in names:
                    names.append(name)
    return names


def _response_arrays(arrays: OpArrays) -> OpArrays | None:
    if arrays.intended_ns is None or arrays.latency_ns.size == 0:
        return None
    response = arrays.start_ns + arrays.latency_ns - arrays.intended_ns
    return OpArrays(np.maximum(response, 0), arrays.intended_ns, arrays.worker, None)


def _empty() -> OpArrays:
    empty = np.empty(0, dtype=np.int64)
    return OpArrays(empty, empty.copy(), np.empty(0, dtype=np.int32), None)


@dataclass
class _OpSide:
    """Everything computed once per op per variant."""

    runs: list[OpArrays]
    durations: list[float]
    pooled: np.ndarray
    partitioned: np.ndarray
    histograms: np.ndarray  # (runs, N_BUCKETS)
    buckets: list[np.ndarray]  # per run: histogram bucket of each op
    stats: OpStats

    @property
    def position(self) -> np.ndarray:
        """Start time as a fraction of its run (for batch means)."""
        return np.concatenate([
            r.start_ns / (d * 1e9) if d > 0 else np.zeros(r.start_ns.size)
            for r, d in zip(self.runs, self.durations, strict=True)
        ]) if self.runs else np.empty(0)


def _side(runs: list[OpArrays], durations: list[float], probabilities: list[float]) -> _OpSide:
    pooled = np.concatenate([r.latency_ns for r in runs]) if runs else np.empty(0, np.int64)
    buckets = [hist.bucket_index(r.latency_ns) for r in runs]
    histograms = np.stack([hist.histogram(r.latency_ns, b)
                           for r, b in zip(runs, buckets, strict=True)])
    n = int(pooled.size)
    total_duration = float(sum(durations))
    rate = n / total_duration if total_duration > 0 else None
    iteration_p99: list[float | None] = []
    for r in runs:
        iteration_p99.append(float(np.quantile(r.latency_ns, 0.99))
                             if r.latency_ns.size and resolvable(r.latency_ns.size, 0.99)
                             else None)
    if n == 0:
        stats = OpStats(0, rate, {s: None for s in LATENCY_STATS}, {},
                        [int(r.latency_ns.size) for r in runs], iteration_p99, None)
        return _OpSide(runs, durations, pooled, pooled, histograms, buckets, stats)
    partitioned = np.partition(pooled, iv.quantile_ranks(n, probabilities))
    values: dict[str, float | None] = {"min": float(partitioned[0])}
    unresolved: dict[str, int] = {}
    estimates = iv.quantiles_with_interval(partitioned, [p for _, p in PERCENTILES])
    for (stat, p), (estimate, _, _) in zip(PERCENTILES, estimates, strict=True):
        values[stat] = estimate
        if not resolvable(n, p):
            unresolved[stat] = tail_samples(n, p)
    values["max"] = float(partitioned[-1])
    values["mean"] = float(pooled.mean(dtype=np.float64))
    stats = OpStats(n, rate, values, unresolved, [int(r.latency_ns.size) for r in runs],
                    iteration_p99, spread(iteration_p99))
    return _OpSide(runs, durations, pooled, partitioned, histograms, buckets, stats)


def _within_run_changes(base: _OpSide, cand: _OpSide,
                        probabilities: list[float]) -> tuple[dict[str, iv.Change], ShiftCurve]:
    changes: dict[str, iv.Change] = {}
    b_total, c_total = sum(base.durations) * 1e9, sum(cand.durations) * 1e9
    b_position, c_position = base.position, cand.position
    b_rate = iv.batch_rate_log_se(b_position * b_total, b_total) if base.pooled.size else None
    c_rate = iv.batch_rate_log_se(c_position * c_total, c_total) if cand.pooled.size else None
    if b_rate and c_rate:
        changes["rate"] = _change(*iv.combine_log_se(c_rate, b_rate))
    b_mean = iv.batch_mean_log_se(base.pooled, b_position * b_total, b_total)
    c_mean = iv.batch_mean_log_se(cand.pooled, c_position * c_total, c_total)
    if b_mean and c_mean:
        changes["mean"] = _change(*iv.combine_log_se(c_mean, b_mean))
    b_q = iv.quantiles_with_interval(base.partitioned, probabilities)
    c_q = iv.quantiles_with_interval(cand.partitioned, probabilities)
    combined = [iv.combine_log_intervals(c, b) for c, b in zip(c_q, b_q, strict=True)]
    by_p = dict(zip(probabilities, combined, strict=True))
    for stat, p in PERCENTILES:
        changes[stat] = _change(*by_p[p])
    return changes, _curve(probabilities, combined, base, cand)


def _between_runs_changes(base: _OpSide, cand: _OpSide, probabilities: list[float],
                          options: CompareOptions,
                          rng: np.random.Generator) -> tuple[dict[str, iv.Change], ShiftCurve]:
    used = np.flatnonzero(base.histograms.sum(axis=0) + cand.histograms.sum(axis=0))
    first, last = int(used[0]), int(used[-1]) + 1
    edges = hist.bucket_lower_edges()[first:last + 1]
    replicates = []
    for side in (base, cand):
        summary = iv.RunSummaries(
            counts=side.histograms[:, first:last],
            samples=np.array([r.latency_ns.size for r in side.runs], dtype=np.float64),
            sum_ns=np.array([r.latency_ns.sum(dtype=np.float64) for r in side.runs]),
            min_ns=np.array([r.latency_ns.min() if r.latency_ns.size else np.inf
                             for r in side.runs], dtype=np.float64),
            max_ns=np.array([r.latency_ns.max() if r.latency_ns.size else 0
                             for r in side.runs], dtype=np.float64),
            duration_s=np.array(side.durations, dtype=np.float64),
        )
        weights = iv.resample_weights(len(side.runs), options.resamples, rng)
        replicates.append(iv.bootstrap_log_statistics(summary, weights, probabilities, edges))
    rep_b, rep_c = replicates
    kb, kc = len(base.runs), len(cand.runs)

    def interval(estimate: float | None, rc: np.ndarray, rb: np.ndarray) -> iv.Change:
        if estimate is None:
            return iv.Change(None)
        bounds = iv.between_runs_interval(estimate, rc, kc, rb, kb)
        return _change(estimate, *(bounds or (None, None)))

    changes: dict[str, iv.Change] = {}
    bs, cs = base.stats, cand.stats
    changes["rate"] = interval(iv.ratio_change(cs.rate, bs.rate), rep_c["rate"], rep_b["rate"])
    for stat in ("min", "max", "mean"):
        changes[stat] = interval(iv.ratio_change(cs.values[stat], bs.values[stat]),
                                 rep_c[stat], rep_b[stat])
    curve_triples = []
    b_q = iv.quantiles_with_interval(base.partitioned, probabilities)
    c_q = iv.quantiles_with_interval(cand.partitioned, probabilities)
    for j, p in enumerate(probabilities):
        estimate = iv.ratio_change(c_q[j][0], b_q[j][0])
        change = interval(estimate, rep_c["quantiles"][:, j], rep_b["quantiles"][:, j])
        curve_triples.append((change.change, change.low, change.high))
        stat = next((s for s, q in PERCENTILES if q == p), None)
        if stat:
            changes[stat] = change
    return changes, _curve(probabilities, curve_triples, base, cand)


def _change(change: float | None, low: float | None = None,
            high: float | None = None) -> iv.Change:
    if change is None or not np.isfinite(change):
        return iv.Change(None)
    if low is None or high is None or not (np.isfinite(low) and np.isfinite(high)):
        return iv.Change(change)
    return iv.Change(change, low, high, iv.p_value_from_interval(change, low, high))


def _curve(probabilities: list[float], triples, base: _OpSide, cand: _OpSide) -> ShiftCurve:
    nb, nc = base.pooled.size, cand.pooled.size
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


def _stalls(side: _OpSide, others_active: list[np.ndarray], iterations: list[int | None],
            expected_workers: np.ndarray, options: CompareOptions) -> StallSummary:
    interval_ns = int(options.interval_s * 1e9)
    timelines, found, workers = [], [], []
    longest = {"iteration": None, "start_ns": 0, "duration_ns": 0}
    for r, buckets, duration, active, iteration in zip(side.runs, side.buckets, side.durations,
                                                       others_active, iterations, strict=True):
        intervals = len(active)
        line = stalls_mod.timeline(r.latency_ns, r.start_ns, interval_ns, intervals, buckets)
        timelines.append({
            "count": line.count.tolist(),
            "p99_ns": [None if np.isnan(v) else float(v) for v in line.p99_ns],
            "max_ns": [None if np.isnan(v) else float(v) for v in line.max_ns],
        })
        for episode in stalls_mod.episodes(line, active, options.stall_threshold_ns):
            found.append({"iteration": iteration, "start_ns": episode.start_ns,
                          "duration_ns": episode.duration_ns, "kind": episode.kind,
                          "worst_ns": episode.worst_ns})
        start, length = stalls_mod.longest_gap(r.latency_ns, r.start_ns, int(duration * 1e9))
        if length > longest["duration_ns"]:
            longest = {"iteration": iteration, "start_ns": start, "duration_ns": length}
        counted = stalls_mod.worker_counts(r.worker, expected_workers)
        workers.append({"iteration": iteration, "counts": counted.counts,
                        "starved": counted.starved})
    return StallSummary(interval_ns, options.stall_threshold_ns, timelines, found, longest,
                        workers)


def _activity(variant: _VariantRuns, options: CompareOptions) -> list[np.ndarray]:
    """Per run: (op -> intervals in which that op started anything) for the starved test."""
    interval_ns = int(options.interval_s * 1e9)
    per_run = []
    for ops, duration in zip(variant.ops, variant.durations, strict=True):
        intervals = max(int(np.ceil(duration * 1e9 / interval_ns)), 1)
        per_op = {}
        for name, arrays in ops.items():
            slots = np.clip(arrays.start_ns // interval_ns, 0, intervals - 1)
            per_op[name] = np.bincount(slots, minlength=intervals)[:intervals] > 0
        per_run.append((intervals, per_op))
    return per_run


def _others_active(activity, op: str) -> list[np.ndarray]:
    out = []
    for intervals, per_op in activity:
        active = np.zeros(intervals, dtype=bool)
        for name, mask in per_op.items():
            if name != op and not name.endswith(RESPONSE_SUFFIX):
                active |= mask
        out.append(active)
    return out


def _cpu_rows(variants: list[_VariantRuns], candidates: list[str]) -> list[CpuRow]:
    rows = []
    by_label = {v.label: v for v in variants}
    base = variants[0]
    for name, key in CPU_ROWS:
        per_variant: dict[str, list[float]] = {}
        for v in variants:
            per_variant[v.label] = [float(r.meta["rusage"][key]) for r in v.runs
                                    if isinstance(r.meta.get("rusage"), dict)
                                    and isinstance(r.meta["rusage"].get(key), (int, float))]
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


def _counters(variants: list[_VariantRuns]) -> dict[str, dict[str, dict[str, Any]]]:
    """First run's `counters` monitor table per variant: column -> {t_s, values, kind}.

    Columns that never decrease (and do increase) are taken for cumulative kernel counters and
    become per-second rates between samples; the others (gauges such as free pages) are kept
    as they are. The table does not say which is which, so this is a guess from the shape."""
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
            known = np.isfinite(values)
            if known.sum() < 2:
                continue
            tk, vk = t[known], values[known]
            steps, dt = np.diff(vk), np.diff(tk)
            # counters never decrease and do move; a flat column is a gauge that held still
            if (steps >= 0).all() and (steps > 0).any() and (dt > 0).all():
                columns[name] = {"t_s": ((tk[1:] + tk[:-1]) / 2).tolist(),
                                 "values": (steps / dt).tolist(), "kind": "per second"}
            else:
                columns[name] = {"t_s": tk.tolist(), "values": vk.tolist(), "kind": "value"}
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
    loaded = [_load(r) for r in (baseline, *candidates)]
    variants = [v for v, _ in loaded]
    infos = [i for _, i in loaded]
    workloads = sorted({run.workload for v in variants for run in v.runs})
    if len(workloads) > 1:
        raise UsageError(f"the variants hold different workloads ({', '.join(workloads)}): "
                         "pick one with --workload")
    base = variants[0]
    cand_labels = labels[1:]
    method = {label: (iv.METHOD_BETWEEN_RUNS if len(base.runs) >= 2 and len(v.runs) >= 2
                      else iv.METHOD_WITHIN_RUN)
              for label, v in zip(cand_labels, variants[1:], strict=True)}
    probabilities = sorted(set(SHIFT_PROBABILITIES) | {p for _, p in PERCENTILES})
    activity = [_activity(v, options) for v in variants]
    names = _op_names(variants)
    op_list: list[tuple[str, str, list[list[OpArrays]]]] = []
    for name in names:
        per_variant = [[ops.get(name) or _empty() for ops in v.ops] for v in variants]
        op_list.append((name, "service", per_variant))
        responses = [[_response_arrays(a) for a in runs] for runs in per_variant]
        if any(r is not None for runs in responses for r in runs):
            op_list.append((name + RESPONSE_SUFFIX, "response",
                            [[r if r is not None else _empty() for r in runs]
                             for runs in responses]))

    ops: list[OpComparison] = []
    for index, (name, kind, per_variant) in enumerate(op_list):
        sides = [_side(runs, v.durations, probabilities)
                 for runs, v in zip(per_variant, variants, strict=True)]
        workers_seen = np.unique(np.concatenate(
            [stalls_mod.present_workers(r.worker) for side in sides for r in side.runs]))
        result = OpComparison(name, kind, {}, {}, {}, {}, {}, {}, {}, {}, {})
        for v, side, act in zip(variants, sides, activity, strict=True):
            result.stats[v.label] = side.stats
            result.bands[v.label] = bands_from_side(side).tolist()
            result.ccdf[v.label] = _ccdf(side.histograms.sum(axis=0))
            result.stalls[v.label] = _stalls(
                side, _others_active(act, name.removesuffix(RESPONSE_SUFFIX)),
                [r.meta.get("iteration") for r in v.runs], workers_seen, options)
        for ci, (label, side) in enumerate(zip(cand_labels, sides[1:], strict=True), start=1):
            result.changes[label], result.shift_curve[label], result.starved[label] = \
                _compare_op(sides[0], side, method[label], probabilities, options,
                            np.random.default_rng((options.seed, index, ci)))
            result.slower_probability[label] = hist.superiority(
                side.histograms.sum(axis=0), sides[0].histograms.sum(axis=0))
            result.shift[label] = bands_mod.distribution_shift(
                np.asarray(result.bands[base.label]), np.asarray(result.bands[label]),
                name.removesuffix(RESPONSE_SUFFIX))
        ops.append(result)

    cpu = _cpu_rows(variants, cand_labels)
    _adjust(ops, cpu, options)
    comparison = Comparison(
        workload=workloads[0], baseline=base.label, candidates=cand_labels, variants=infos,
        method=method, options=options, ops=ops, cpu=cpu,
        adjustment="Benjamini–Hochberg over all rows with an interval",
        counters=_counters(variants),
        problems=[p for r in (baseline, *candidates) for p in r.problems],
    )
    comparison.notes = _notes(comparison)
    comparison.where = _where(comparison, variants) if options.explain else None
    from . import views  # heatmaps and blocked-time profiles, computed when a report draws
    comparison.views = views.build(variants) if options.explain else None
    return comparison


def bands_from_side(side: _OpSide) -> np.ndarray:
    """Log2 bands from the log-linear histogram: bucket // SUB_BUCKETS is the power of two."""
    counts = side.histograms.sum(axis=0).reshape(-1, hist.SUB_BUCKETS).sum(axis=1)
    out = np.zeros(bands_mod.N_BANDS, dtype=np.int64)
    out[:min(len(counts), bands_mod.N_BANDS)] = counts[:bands_mod.N_BANDS]
    out[-1] += counts[bands_mod.N_BANDS:].sum()
    return out


def compare_samples(base_runs: list[OpArrays], base_durations: list[float],
                    cand_runs: list[OpArrays], cand_durations: list[float],
                    options: CompareOptions | None = None,
                    rng: np.random.Generator | None = None) -> dict[str, iv.Change]:
    """Changes of every statistic of one op (before the multiple-comparison adjustment),
    with the method build_comparison would pick for these numbers of runs."""
    options = options or CompareOptions()
    probabilities = sorted({p for _, p in PERCENTILES})
    base = _side(base_runs, base_durations, probabilities)
    cand = _side(cand_runs, cand_durations, probabilities)
    method = iv.METHOD_BETWEEN_RUNS if len(base_runs) >= 2 and len(cand_runs) >= 2 \
        else iv.METHOD_WITHIN_RUN
    changes, _, _ = _compare_op(base, cand, method, probabilities, options,
                                rng or np.random.default_rng(options.seed))
    return changes


def _compare_op(base: _OpSide, cand: _OpSide, method: str, probabilities: list[float],
                options: CompareOptions, rng: np.random.Generator):
    nb, nc = base.stats.samples, cand.stats.samples
    if nb == 0 or nc == 0:
        changes = {stat: iv.Change(None, note="no samples") for stat in LATENCY_STATS}
        rate_change = iv.ratio_change(cand.stats.rate, base.stats.rate)
        changes["rate"] = iv.Change(rate_change, note="no samples")
        if nc == 0 and nb >= MIN_TAIL_SAMPLES:
            changes["rate"].verdict = "worse"
        starved = nc == 0 and nb > 0
        return changes, ShiftCurve([], [], [], []), starved
    if method == iv.METHOD_BETWEEN_RUNS:
        changes, curve = _between_runs_changes(base, cand, probabilities, options, rng)
    else:
        changes, curve = _within_run_changes(base, cand, probabilities)
    for stat in ("min", "max"):
        changes.setdefault(stat, iv.Change(iv.ratio_change(cand.stats.values[stat],
                                                           base.stats.values[stat]),
                                           note="no interval"))
    changes.setdefault("rate", iv.Change(iv.ratio_change(cand.stats.rate, base.stats.rate)))
    changes.setdefault("mean", iv.Change(iv.ratio_change(cand.stats.values["mean"],
                                                         base.stats.values["mean"])))
    for stat, _ in PERCENTILES:
        if stat in base.stats.unresolved or stat in cand.stats.unresolved:
            changes[stat] = iv.Change(None, note="not resolvable")
    rate = changes["rate"].change
    starved = rate is not None and rate < -options.starved_rate_drop
    return changes, curve, starved


def _adjust(ops: list[OpComparison], cpu: list[CpuRow], options: CompareOptions) -> None:
    """Benjamini–Hochberg over every change that has an interval; then the verdict words."""
    rows: list[tuple[iv.Change, bool]] = []
    for op in ops:
        for changes in op.changes.values():
            for stat, change in changes.items():
                rows.append((change, stat == "rate"))
    for row in cpu:
        for change in row.changes.values():
            rows.append((change, False))
    with_p = [change for change, _ in rows if change.p_value is not None]
    for change, adjusted in zip(with_p, iv.benjamini_hochberg([c.p_value for c in with_p]),
                                strict=True):
        change.p_adjusted = adjusted
    for change, higher_is_better in rows:
        if change.verdict == "n/a":
            change.verdict = iv.verdict(change, higher_is_better, options.noise)


def _notes(comparison: Comparison) -> list[str]:
    notes = []
    for info in comparison.variants:
        if info.interval_sampled:
            notes.append(f"{info.label}: imported interval maxima (MMTests), not per-op "
                         "latencies: percentiles describe per-interval maxima")
        ops_source = [r for r in info.runs if r.duration_source != "run.json"]
        if ops_source:
            notes.append(f"{info.label}: {len(ops_source)} run(s) without duration_s in "
                         "run.json; rate uses the time of the last completion")
    return notes


def _where(comparison: Comparison, variants: list[_VariantRuns]) -> dict[str, Any] | None:
    try:
        from . import where  # provided by the monitors engineer
    except ImportError:
        return None
    tail_changes = {
        label: {op.op: op.changes[label]["p99"].change for op in comparison.ops
                if op.kind == "service"}
        for label in comparison.candidates
    }
    try:
        return where.explain(variants[0].runs, {v.label: v.runs for v in variants[1:]},
                             comparison.baseline, tail_changes)
    except Exception as exc:  # a monitor analysis bug must not hide the latency comparison
        return {"error": f"where did the time go: analysis failed ({type(exc).__name__}: {exc})"}


# ----------------------------------------------------------------------------------------------
# the regression gate (stallbench check)

GATE_STATS = ("min", "p50", "p90", "p95", "p99", "p999", "max", "mean", "rate")


@dataclass
class Metric:
    op: str
    stat: str


@dataclass
class GateResult:
    metric: Metric
    change: iv.Change | None
    outcome: str  # "ok" | "regression" | "undecided"
    reason: str


def parse_metric(text: str) -> Metric:
    """'read:p99' -> Metric('read', 'p99'); the op name may itself contain ':'."""
    op, sep, stat = text.rpartition(":")
    stat = {"p99.9": "p999", "p99_9": "p999"}.get(stat, stat)
    if not sep or not op or stat not in GATE_STATS:
        raise UsageError(f"--metric {text!r}: use OP:STAT with STAT one of "
                         f"{' '.join(GATE_STATS)} (e.g. read:p99)")
    return Metric(op, stat)


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


def gate(comparison: Comparison, metrics: list[Metric], max_regression: float) -> list[GateResult]:
    """Judge each metric of the first candidate against the bound: a regression only when the
    whole 95% interval lies beyond it, ok only when the whole interval lies within it."""
    candidate = comparison.candidates[0]
    by_name = {op.op: op for op in comparison.ops}
    results = []
    for metric in metrics:
        op = by_name.get(metric.op)
        if op is None:
            raise UsageError(f"--metric {metric.op}:{metric.stat}: no op {metric.op!r} in these "
                             f"runs (ops: {', '.join(by_name) or 'none'})")
        change = op.changes[candidate].get(metric.stat)
        results.append(_judge(metric, change, op, comparison, candidate, max_regression))
    return results


def _judge(metric: Metric, change: iv.Change | None, op: OpComparison, comparison: Comparison,
           candidate: str, bound: float) -> GateResult:
    if comparison.problems:
        return GateResult(metric, change, "undecided",
                          f"runs left out: {comparison.problems[0]}")
    if change is None or change.change is None:
        base, cand = op.stats[comparison.baseline], op.stats[candidate]
        if metric.stat == "rate" and change is not None and change.note == "no samples":
            if cand.samples == 0 and base.samples > 0:
                return GateResult(metric, change, "regression", "no samples in the candidate")
        reason = (change.note if change and change.note else "no estimate")
        if base.samples == 0 or cand.samples == 0:
            reason = "no samples"
        elif metric.stat in base.unresolved or metric.stat in cand.unresolved:
            reason = (f"not resolvable: fewer than {MIN_TAIL_SAMPLES} samples at or beyond "
                      f"{metric.stat}")
        return GateResult(metric, change, "undecided", reason)
    if change.low is None or change.high is None:
        return GateResult(metric, change, "undecided",
                          change.note or "no interval for this statistic")
    if metric.stat == "rate":
        if change.high < -bound:
            return GateResult(metric, change, "regression", "rate fell beyond the bound")
        if change.low >= -bound:
            return GateResult(metric, change, "ok", "within the bound")
    else:
        if change.low > bound:
            return GateResult(metric, change, "regression", "grew beyond the bound")
        if change.high <= bound:
            return GateResult(metric, change, "ok", "within the bound")
    return GateResult(metric, change, "undecided", "the interval straddles the bound")


def gate_exit_code(results: list[GateResult]) -> int:
    outcomes = {r.outcome for r in results}
    if "regression" in outcomes:
        return 1
    if "undecided" in outcomes:
        return 125
    return 0


# ----------------------------------------------------------------------------------------------
# one run or variant (stallbench show)


@dataclass
class RunsSummary:
    label: str
    variant: VariantInfo
    metas: list[dict[str, Any]]
    ops: dict[str, OpStats]


def summarize_runs(resolved: Resolved) -> RunsSummary:
    variant, info = _load(resolved)
    probabilities = [p for _, p in PERCENTILES]
    ops = {}
    for name in _op_names([variant]):
        runs = [o.get(name) or _empty() for o in variant.ops]
        ops[name] = _side(runs, variant.durations, probabilities).stats
        responses = [_response_arrays(a) for a in runs]
        if any(r is not None for r in responses):
            ops[name + RESPONSE_SUFFIX] = _side([r if r is not None else _empty()
                                                 for r in responses],
                                                variant.durations, probabilities).stats
    return RunsSummary(resolved.label, info, [r.meta for r in resolved.runs], ops)
