"""Repeat until decided: `iterations = "auto"` keeps adding interleaved rounds (one run of every
variant) until the named metrics are decided for every candidate (better, worse or same) or
`max_iterations` rounds have run, and says which happened.

After each round the runs of this invocation (not older runs of the same names) are compared
with the same intervals as `stallbench compare` (analysis/intervals.py). Mel Gorman's ask of
MMTests: "repeat the test until more data is gathered and better confidence achieved".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..analysis.intervals import DECIDED, Verdict
from ..compare.comparison import build_comparison
from ..compare.gate import metric_change, metric_options
from ..compare.metrics import Metric, parse_metric
from ..compare.model import CompareOptions
from ..core.errors import UsageError
from ..results.runselect import Resolved, complete_runs


@dataclass
class Decision:
    decided: bool
    rounds: int
    verdicts: dict[str, str]        # "candidate op:stat" -> verdict

    def sentence(self, max_rounds: int) -> str:
        shown = ", ".join(f"{k} {v}" for k, v in self.verdicts.items())
        if self.decided:
            return f"iterations auto: decided after {self.rounds} round(s): {shown}"
        return (f"iterations auto: not decided after {self.rounds} round(s) (the maximum, "
                f"{max_rounds}): {shown}")


def parse_metrics(texts: list[str]) -> list[Metric]:
    if not texts:
        raise UsageError("iterations auto needs the metrics that decide it: give --metric "
                         "OP:STAT (plan key metrics = [\"read:p99\"])")
    return [parse_metric(text) for text in texts]


def decide(paths_by_variant: dict[str, list[Path]], metrics: list[Metric],
           rounds: int) -> Decision:
    """Compare the first variant's runs with each other variant's; decided when every metric
    of every candidate has a verdict in DECIDED."""
    resolved = []
    for name, paths in paths_by_variant.items():
        runs = complete_runs(paths)
        if not runs:
            return Decision(False, rounds, {f"{name}": "no complete run"})
        resolved.append(Resolved(name, runs, []))
    comparison = build_comparison(resolved[0], resolved[1:],
                                  metric_options(metrics, CompareOptions(explain=False)))
    verdicts: dict[str, str] = {}
    for candidate in comparison.candidates:
        for metric in metrics:
            _, change = metric_change(comparison, metric, candidate)
            verdicts[f"{candidate} {metric}"] = \
                change.verdict if change is not None else Verdict.NA
    return Decision(all(v in DECIDED for v in verdicts.values()), rounds, verdicts)
