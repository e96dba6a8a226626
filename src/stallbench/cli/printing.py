"""What several commands print the same way: the comparison of variants just run (`run
--plan`, `demo`) and the summary of one run or variant (`show`, `compare X` alone)."""

from __future__ import annotations

import sys
from pathlib import Path

from ..compare.metrics import parse_metric


def print_comparison(baseline: str, candidates: list[str], results: Path,
                     workload: str | None = None, metrics: list[str] | None = None,
                     decide_hint: str | None = None) -> None:
    """Print the text comparison of variants just run (after `run --plan` and `demo`), with
    the verdicts of the metrics asked for (`--iterations auto --metric`) and, where one run a
    side decides little, the line saying what would (run/duet.py decide_hint)."""
    import dataclasses

    from ..compare.comparison import build_comparison
    from ..compare.gate import metric_options
    from ..compare.model import CompareOptions
    from ..core.terminal import use_color
    from ..report import render
    from ..results.runselect import resolve_runs

    base = resolve_runs(baseline, results, workload)
    others = [resolve_runs(name, results, workload) for name in candidates]
    options = metric_options([parse_metric(m) for m in metrics]) if metrics \
        else CompareOptions()
    comparison = dataclasses.replace(build_comparison(base, others, options),
                                     decide_hint=decide_hint)
    print(render(comparison, "text", color=use_color("auto", sys.stdout)), end="")


def print_summary(target: str, results, workload: str | None, fmt: str = "text") -> None:
    """The summary of one run or variant (also `compare X` with one variant)."""
    from ..compare.show import summarize_runs
    from ..report.show import render_json, render_text
    from ..results.runselect import resolve_runs

    resolved = resolve_runs(target, results, workload, allow_incomplete=True)
    for problem in resolved.problems:
        print(f"stallbench: {problem}", file=sys.stderr)
    summary = summarize_runs(resolved)
    sys.stdout.write(render_json(summary) if fmt == "json" else render_text(summary))
