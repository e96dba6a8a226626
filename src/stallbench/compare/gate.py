"""The regression gate of `stallbench check` (and of bisect's steps): the comparison the metrics
(compare/metrics.py) are judged in, its percentiles among them, and each metric's outcome
against the bound, which the policy gives (compare/verdicts/ gate_metric) from the row the
comparison finished."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..analysis import intervals as iv
from ..analysis.quantiles import DEFAULT_PERCENTS
from ..core.errors import UsageError
from ..results.runselect import Resolved
from .comparison import build_comparison
from .metrics import Metric
from .model import CompareOptions, Comparison, OpComparison
from .verdicts import EXIT_CODE, GateOutcome, gate_metric, overall


@dataclass
class GateResult:
    metric: Metric
    change: iv.Change | None
    outcome: GateOutcome      # the policy's (verdicts.gate_metric)
    reason: str
    bound: float = 0.0  # the change the metric may not pass (negative for the rate)


def metric_percents(metrics: list[Metric], shown: tuple[float, ...] | None = None
                    ) -> tuple[float, ...]:
    """The percentiles shown (default: DEFAULT_PERCENTS) and those the metrics name: what the
    comparison must hold."""
    named = {round(m.statistic.probability * 100, 10) for m in metrics
             if m.statistic.probability is not None}
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


def judge_metrics(baseline: Resolved, candidates: list[Resolved], metrics: list[Metric],
                  max_regression: float, noise: float | None = None
                  ) -> tuple[Comparison, list[GateResult]]:
    """`check`: the comparison the metrics are judged in (gate_options) and each metric's
    result against the bound (gate)."""
    comparison = build_comparison(baseline, candidates, gate_options(metrics, noise))
    return comparison, gate(comparison, metrics, max_regression)


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
        outcome, reason = gate_metric(metric.stat, change, op.stats[comparison.baseline],
                                      op.stats[candidate], comparison.problems, max_regression)
        results.append(GateResult(metric, change, outcome, reason,
                                  -max_regression if metric.statistic.higher_is_better
                                  else max_regression))
    return results


def metric_change(comparison: Comparison, metric: Metric, candidate: str
                  ) -> tuple[OpComparison, iv.Change | None]:
    """The metric's op and its change in the candidate; an op not in the runs is bad input."""
    by_name = {op.op: op for op in comparison.ops}
    op = by_name.get(metric.op)
    if op is None:
        raise UsageError(f"--metric {metric}: no op {metric.op!r} in these "
                         f"runs (ops: {', '.join(by_name) or 'none'})")
    return op, op.changes[candidate].get(metric.stat)


def gate_outcome(results: list[GateResult]) -> GateOutcome:
    return overall(r.outcome for r in results)


def gate_exit_code(results: list[GateResult]) -> int:
    return EXIT_CODE[gate_outcome(results)]
