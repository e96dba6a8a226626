"""Loading the runs of a comparison: each variant's run summaries (summary.parquet, never raw
ops) and, per op, each side's pooled statistics and per-run statistics (OpSide), which the
intervals (changes.py), `show` (show.py) and `calibrate` (calibration.py) share."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..analysis import histogram as hist
from ..analysis import intervals as iv
from ..analysis import summary as sm
from ..analysis.quantiles import (
    latency_stats,
    needed_samples,
    percentiles,
    resolvable,
    spread,
    tail_samples,
)
from ..analysis.summary import RESPONSE_SUFFIX
from ..results.runselect import Resolved
from ..results.store import Run
from .model import OpStats, RunInfo, VariantInfo
from .provenance import provenance_of


@dataclass
class VariantRuns:
    label: str
    runs: list[Run]
    summaries: list[sm.RunSummary]
    durations: list[float]  # seconds after the warm-up, per run (RunSummary.measured_ns)


def measured_seconds(summaries: list[sm.RunSummary]) -> list[float]:
    """Each run's measured span after the warm-up: the one duration every rate divides by."""
    return [summary.measured_ns / 1e9 for summary in summaries]


def load_variant(resolved: Resolved) -> tuple[VariantRuns, VariantInfo]:
    summaries = [run.summary() for run in resolved.runs]
    infos = [RunInfo(run.meta.iteration, str(run.path), run.describe_status(),
                     (s.end_ns - s.start_ns) / 1e9, s.start_ns / 1e9, s.end_ns / 1e9,
                     (s.warmup_blocks - s.start_ns // s.block_ns) * s.block_ns / 1e9, s.block_ns,
                     s.transient.outcome if s.transient else None,
                     " ".join(filter(None, (s.transient.op, s.transient.stat)))
                     if s.transient and s.transient.op else None)
             for run, s in zip(resolved.runs, summaries, strict=True)]
    first = resolved.runs[0].meta
    info = VariantInfo(
        label=resolved.label,
        runs=infos,
        workload_summary=[r.meta.workload_summary or {} for r in resolved.runs],
        interval_sampled=any(bool(r.meta.interval_sampled) for r in resolved.runs),
        kernel=first.kernel.get("release"),
        environment=first.environment,
        provenance=provenance_of(resolved.runs),
    )
    return VariantRuns(resolved.label, resolved.runs, summaries, measured_seconds(summaries)), \
        info


def op_names(variants: list[VariantRuns]) -> list[str]:
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


@dataclass
class OpSide:
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

    def schedule_kept(self) -> float | None:
        """Of a paced op's response op (binned by planned start): the share of the runs' time
        its planned starts covered, 1.0 when it kept its schedule to the end, 0.6 when its last
        op was planned 60% of the way through; the mean over runs (None: no ops)."""
        shares = []
        for op, run in zip(self.ops, self.runs, strict=True):
            counts = op.block_count[run.warmup_blocks:]
            if counts.size == 0 or not counts.any():
                continue
            shares.append((int(np.flatnonzero(counts)[-1]) + 1) / counts.size)
        return float(np.mean(shares)) if shares else None


def op_side(name: str, variant: VariantRuns, percents: tuple[float, ...] | None = None
            ) -> OpSide:
    ops = [summary.ops.get(name) or sm.OpSummary.empty(summary.blocks)
           for summary in variant.summaries]
    histogram = np.sum([op.histogram for op in ops], axis=0) if ops else \
        np.zeros(hist.N_BUCKETS, np.int64)
    totals = [sm.op_totals(op, run.warmup_blocks)
              for op, run in zip(ops, variant.summaries, strict=True)]
    n = int(sum(t.samples for t in totals))
    total_duration = float(sum(variant.durations))
    rate = n / total_duration if total_duration > 0 else None
    iteration_p99: list[float | None] = []
    for op, t in zip(ops, totals, strict=True):
        iteration_p99.append(hist.quantiles(op.histogram, [0.99])[0]
                             if t.samples and resolvable(t.samples, 0.99) else None)
    iteration_samples = [int(t.samples) for t in totals]
    warmup = int(sum(op.warmup_samples for op in ops))
    wanted = percentiles(percents)
    if n == 0:
        stats = OpStats(0, rate, {s.key: None for s in latency_stats(percents)}, {},
                        iteration_samples,
                        iteration_p99, None, warmup)
        return OpSide(ops, variant.summaries, variant.durations, histogram, stats)
    values: dict[str, float | None] = {
        "min": float(min(t.min_ns for t in totals if t.samples)),
        "max": float(max(t.max_ns for t in totals if t.samples)),
        "mean": float(sum(t.sum_ns for t in totals)) / n,
    }
    unresolved: dict[str, int] = {}
    needed: dict[str, int] = {}
    for stat, estimate in zip(wanted, hist.quantiles(histogram, [s.probability for s in wanted]),
                              strict=True):
        values[stat.key] = estimate
        if not resolvable(n, stat.probability):
            unresolved[stat.key] = tail_samples(n, stat.probability)
            needed[stat.key] = needed_samples(stat.probability)
    values = {stat.key: values[stat.key] for stat in latency_stats(percents)}
    stats = OpStats(n, rate, values, unresolved, iteration_samples, iteration_p99,
                    spread(iteration_p99), warmup, needed)
    return OpSide(ops, variant.summaries, variant.durations, histogram, stats)
