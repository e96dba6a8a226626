"""stallbench check BASELINE CANDIDATE --metric OP:STAT --max-regression PCT — a gate for CI
and `git bisect run`: exit 0 no regression, 1 regression, 125 cannot decide."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from ..analysis.quantiles import row_stats
from ..core.errors import ExitCode, UndecidedError, UsageError
from .flags import (
    BASELINE_HELP,
    ExamplesFormatter,
    add_common,
    add_metric_argument,
    bundle_opened,
    resolve_all,
)

EXAMPLES = """examples:
  stallbench check good cand --metric read:p99 --max-regression 10%
  stallbench check good cand --metric read:p99 --metric read:rate --max-regression 10% \\
      --format json --junit check.xml      # for CI; $GITHUB_STEP_SUMMARY gets the headline"""


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "check", help="exit 0/1/125: did a metric regress beyond a bound?",
        description="Exit 0 when no metric regressed beyond the bound (its whole 95% interval "
                    "lies within it), 1 when one did (its whole interval lies beyond it), 125 "
                    "when that cannot be decided (too few samples, an incomplete run, an "
                    "interval that straddles the bound). Where $GITHUB_STEP_SUMMARY is set, "
                    "the headline and the verdicts are appended to it as markdown.",
        epilog=EXAMPLES, formatter_class=ExamplesFormatter)
    parser.add_argument("baseline", metavar="BASELINE", help=BASELINE_HELP)
    parser.add_argument("candidate", metavar="CANDIDATE",
                        help="the variant judged against the baseline (a name under RESULTS "
                             "or a path)")
    add_metric_argument(parser, "e.g. read:p99 (repeatable); STAT: "
                        + " ".join(s.key for s in row_stats()) + " or any percentile, e.g. p99.99",
                        required=True)
    parser.add_argument("--max-regression", required=True, metavar="PCT",
                        help="largest tolerated regression, e.g. 10%%")
    parser.add_argument("--format", choices=("text", "json"), default="text",
                        help="text: a line per metric; json: the verdicts as "
                             "schemas/check.schema.json describes them")
    parser.add_argument("--junit", type=Path, metavar="FILE",
                        help="also write JUnit XML there: a testcase per metric, a regression "
                             "failed, an undecided one skipped")
    add_common(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    with bundle_opened(args):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from ..compare.gate import gate_exit_code, judge_metrics
    from ..core.units import parse_percent
    from ..report import check as check_report

    bound = parse_percent(args.max_regression, "--max-regression")
    args.candidates = [args.candidate]
    baseline, candidates = resolve_all(args, allow_incomplete=True, split=False)
    incomplete = [f"{run.path}: {run.describe_status()}" for r in (baseline, *candidates)
                  for run in r.runs if not run.complete]
    if incomplete:
        raise UndecidedError(f"incomplete run {incomplete[0]}")
    comparison, results = judge_metrics(baseline, candidates, args.metric, bound,
                                        parse_percent(args.noise, "--noise"))
    code = gate_exit_code(results)
    if args.format == "json":
        document = check_report.to_dict(results, comparison, bound, code)
        print(json.dumps(document, indent=1))
    else:
        print(check_report.render(results), end="")
    outputs = [(args.junit, check_report.junit_xml(results, comparison), "w")] \
        if args.junit else []
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        outputs.append((Path(os.environ["GITHUB_STEP_SUMMARY"]),
                        check_report.step_summary(results, comparison), "a"))
    for path, text, mode in outputs:
        try:
            with open(path, mode, encoding="utf-8") as f:
                f.write(text)
        except OSError as exc:
            raise UsageError(f"{path}: cannot write ({exc.strerror})") from exc
    if code == ExitCode.UNDECIDED:
        raise UndecidedError(check_report.undecided(results))
    return code
