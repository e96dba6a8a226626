"""stallbench check BASELINE CANDIDATE --metric OP:STAT --max-regression PCT — a gate for CI
and `git bisect run`: exit 0 no regression, 1 regression, 125 cannot decide."""

from __future__ import annotations

import argparse

from ..analysis.quantiles import row_stats
from ..core.errors import ExitCode, UndecidedError
from .compare import add_common, resolve_all


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "check", help="exit 0/1/125: did a metric regress beyond a bound?",
        description="Exit 0 when no metric regressed beyond the bound (its whole 95% interval "
                    "lies within it), 1 when one did (its whole interval lies beyond it), 125 "
                    "when that cannot be decided (too few samples, an incomplete run, an "
                    "interval that straddles the bound).")
    parser.add_argument("baseline", metavar="BASELINE")
    parser.add_argument("candidate", metavar="CANDIDATE")
    parser.add_argument("--metric", action="append", required=True, metavar="OP:STAT",
                        help="e.g. read:p99 (repeatable); STAT: "
                             + " ".join(s.key for s in row_stats())
                             + " or any percentile, e.g. p99.99")
    parser.add_argument("--max-regression", required=True, metavar="PCT",
                        help="largest tolerated regression, e.g. 10%%")
    add_common(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..compare.comparison import build_comparison
    from ..compare.gate import gate, gate_exit_code, gate_options, parse_metric
    from ..core.units import parse_percent
    from ..report import check as check_report

    metrics = [parse_metric(m) for m in args.metric]
    bound = parse_percent(args.max_regression, "--max-regression")
    args.candidates = [args.candidate]
    baseline, candidates = resolve_all(args, allow_incomplete=True, split=False)
    incomplete = [f"{run.path}: {run.describe_status()}" for r in (baseline, *candidates)
                  for run in r.runs if not run.complete]
    if incomplete:
        raise UndecidedError(f"incomplete run {incomplete[0]}")
    options = gate_options(metrics, parse_percent(args.noise, "--noise"))
    comparison = build_comparison(baseline, candidates, options)
    results = gate(comparison, metrics, bound)
    print(check_report.render(results), end="")
    code = gate_exit_code(results)
    if code == ExitCode.UNDECIDED:
        raise UndecidedError(check_report.undecided(results))
    return code
