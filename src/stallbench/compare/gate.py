"""The regression gate of `stallbench check` (and of `--iterations auto`): each metric's change
judged against the bound from the interval the comparison (comparison.py) computed."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..analysis import intervals as iv
from ..analysis.quantiles import (
    DEFAULT_PERCENTS,
    MIN_TAIL_SAMPLES,
    RATE,
    row_stats,
    stat_named,
)
from ..core.errors import ExitCode, UsageError
from .changes import NO_SAMPLES
from .model import CompareOptions, Comparison, OpComparison
from .verdicts import BEHIND_SCHEDULE, MACHINE_BUSIER, NOT_STATIONARY, TOO_WIDE, why

# why a row is unclear (verdicts.why) -> why check cannot decide that metric
_DISTRUSTED = {
    NOT_STATIONARY: "the runs mix two regimes (see the comparison's NOT STATIONARY line)",
    MACHINE_BUSIER: "one side's runs had more outside load (see MACHINE BUSIER)",
    TOO_WIDE: "the interval would be wider than ×10 either way (more runs per variant, or "
              "a noise profile from `stallbench calibrate`, would narrow it)",
}


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
    bound: float = 0.0  # the change the metric may not pass (negative for the rate)


def parse_metric(text: str) -> Metric:
    """'read:p99' -> Metric('read', 'p99'), 'read:p99.99' -> Metric('read', 'p9999'); the op
    name may itself contain ':'."""
    op, sep, name = text.rpartition(":")
    try:
        stat = stat_named(name) if sep and op else None
    except ValueError:
        stat = None
    if stat is None:
        raise UsageError(f"--metric {text!r}: use OP:STAT with STAT one of "
                         f"{' '.join(s.key for s in row_stats())} or any percentile such as "
                         "p99.99 (e.g. read:p99)")
    return Metric(op, stat.key)


def metric_percents(metrics: list[Metric], shown: tuple[float, ...] | None = None
                    ) -> tuple[float, ...]:
    """The percentiles shown (default: DEFAULT_PERCENTS) and those the metrics name: what the
    comparison must hold."""
    named = {round(stat.probability * 100, 10) for m in metrics
             if (stat := stat_named(m.stat)).probability is not None}
    return tuple(sorted({float(p) for p in (*(shown or DEFAULT_PERCENTS), *named)}))


def gate_options(metrics: list[Metric], noise: float | None = None) -> CompareOptions:
    """The comparison `check` judges: the metrics named are the ones that decide (their own
    false-discovery budget and distrust rules), their percentiles computed, no where section.
    Benchmarks build it here too, so that what they count as `check` is what check does."""
    options = CompareOptions(explain=False, percentiles=metric_percents(metrics),
                             metrics=tuple((m.op, m.stat) for m in metrics), default_rows=False)
    if noise is not None:
        options.noise = noise
    return options


def metric_options(metrics: list[Metric], options: CompareOptions | None = None
                   ) -> CompareOptions:
    """A comparison to read that shows the metrics asked for (compare --metric, bisect's last
    comparison, the one after --iterations auto) with their verdicts, as check judges them in
    their own budget, beside the rows that decide by default."""
    options = options or CompareOptions()
    return dataclasses.replace(options, percentiles=metric_percents(metrics, options.percentiles),
                               metrics=tuple((m.op, m.stat) for m in metrics))


def check_metric_ops(comparison: Comparison, metrics: list[Metric]) -> None:
    """A metric whose op is not in the runs is bad input (UsageError), as in check."""
    for metric in metrics:
        metric_change(comparison, metric, comparison.candidates[0])


def gate(comparison: Comparison, metrics: list[Metric], max_regression: float) -> list[GateResult]:
    """Judge each metric of the first candidate against the bound: a regression only when the
    whole 95% interval lies beyond it, ok only when the whole interval lies within it."""
    candidate = comparison.candidates[0]
    results = []
    for metric in metrics:
        op, change = metric_change(comparison, metric, candidate)
        result = _judge(metric, change, op, comparison, candidate, max_regression)
        result.bound = -max_regression if stat_named(metric.stat).higher_is_better \
            else max_regression
        results.append(result)
    return results


def metric_change(comparison: Comparison, metric: Metric, candidate: str
                  ) -> tuple[OpComparison, iv.Change | None]:
    """The metric's op and its change in the candidate; an op not in the runs is bad input."""
    by_name = {op.op: op for op in comparison.ops}
    op = by_name.get(metric.op)
    if op is None:
        raise UsageError(f"--metric {metric.op}:{metric.stat}: no op {metric.op!r} in these "
                         f"runs (ops: {', '.join(by_name) or 'none'})")
    return op, op.changes[candidate].get(metric.stat)


def _judge(metric: Metric, change: iv.Change | None, op: OpComparison, comparison: Comparison,
           candidate: str, bound: float) -> GateResult:
    if comparison.problems:
        return GateResult(metric, change, "undecided",
                          f"runs left out: {comparison.problems[0]}")
    reason = why(change) if change is not None else None
    if change is not None and change.verdict == iv.Verdict.UNCLEAR and reason in _DISTRUSTED:
        return GateResult(metric, change, "undecided", _DISTRUSTED[reason])
    if reason == BEHIND_SCHEDULE:
        return GateResult(metric, change, "regression", "fell behind its schedule")
    if change is not None and change.verdict == iv.Verdict.PACED and change.change is not None:
        # the workload's schedule sets a paced rate: the estimate is judged as it is
        if change.change < -bound:
            return GateResult(metric, change, "regression", "paced rate fell beyond the bound")
        return GateResult(metric, change, "ok", "kept its schedule")
    if change is None or change.change is None:
        base, cand = op.stats[comparison.baseline], op.stats[candidate]
        if metric.stat == RATE.key and change is not None and change.note == NO_SAMPLES:
            if cand.samples == 0 and base.samples > 0:
                return GateResult(metric, change, "regression", "no samples in the candidate")
        reason = (change.note if change and change.note else "no estimate")
        if base.samples == 0 or cand.samples == 0:
            reason = NO_SAMPLES
        elif metric.stat in base.unresolved or metric.stat in cand.unresolved:
            needed = base.needed.get(metric.stat) or cand.needed.get(metric.stat)
            reason = (f"not resolvable: fewer than {MIN_TAIL_SAMPLES} samples at or beyond "
                      f"{metric.stat} (it needs ≥ {needed:,} ops per variant)")
        return GateResult(metric, change, "undecided", reason)
    if change.low is None or change.high is None:
        return GateResult(metric, change, "undecided",
                          change.note or "no interval for this statistic")
    if stat_named(metric.stat).higher_is_better:
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
        return ExitCode.FAILURE
    if "undecided" in outcomes:
        return ExitCode.UNDECIDED
    return ExitCode.OK
