"""stallbench series VARIANT... [--by order|kernel|date|KEY] — one table per op across many
variants, the change points along them, exit status as `check` for the new ones."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..analysis.quantiles import row_stats
from ..compare import DEFAULT_NOISE
from ..core.errors import ExitCode, UndecidedError, UsageError
from .flags import add_metric_argument, add_source_arguments, bundle_opened

FORMATS = ("text", "json", "csv", "markdown", "html", "email")
AXES_HELP = "order (as given), kernel (uname -r as versions), date (the runs' UTC day) or KEY"


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "series",
        description="The runs of one workload shape as points along an axis: one table per op "
                    "with the points as columns (each statistic's value and its change "
                    "against the first point or --baseline, * where the 95%% interval "
                    "excludes 0), then the change points: where a statistic's level shifts "
                    "beyond its runs' noise (compare's two-level intervals). Exit as `check`: "
                    "0, 1 when a new change point is a regression beyond --max-regression, "
                    "125 when that cannot be decided.")
    parser.add_argument("variants", metavar="VARIANT", nargs="+",
                        help="variant names under RESULTS or paths to variant or run "
                             "directories")
    parser.add_argument("--by", default="order", metavar="AXIS",
                        help=f"the axis: {AXES_HELP}, a plan key (memory) or workload option "
                             "(record_size) the runs record (default %(default)s)")
    add_metric_argument(parser, "the statistics whose change points count, and rows of their "
                                "tables (repeatable; default: p50, p99 and rate of each op); "
                                "STAT: " + " ".join(s.key for s in row_stats() if s.key not in (
                                    "min", "max")) + " or any percentile")
    parser.add_argument("--baseline", metavar="POINT",
                        help="the point the changes in the tables are against (default: "
                             "the first)")
    parser.add_argument("--since", metavar="DATE|POINT",
                        help="only change points after this point (a variant or point label) "
                             "or on or after this date (YYYY-MM-DD) count for the exit status")
    parser.add_argument("--max-regression", metavar="PCT", default="0%",
                        help="a new change point is a regression (exit 1) when its whole "
                             "interval lies beyond this, e.g. 10%% (default %(default)s)")
    parser.add_argument("--noise", default=f"{DEFAULT_NOISE:.0%}",
                        help="smallest change that is a change point (default %(default)s)")
    parser.add_argument("--format", choices=FORMATS, default="text")
    parser.add_argument("--output", type=Path,
                        help="write the report here instead of stdout ('-': stdout)")
    parser.add_argument("--plots", type=Path, metavar="DIR",
                        help="also write each op's statistics along the axis (PNG and SVG)")
    parser.add_argument("--bisect", action="store_true",
                        help="run `stallbench bisect --git` over the first new regression "
                             "whose two sides ran kernels built from commits (without it: "
                             "the command is printed)")
    add_source_arguments(parser, bundles=True)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    with bundle_opened(args):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from ..compare.series import SeriesOptions, build_series, check_since, gate_series
    from ..core.units import parse_percent
    from ..results.runselect import prepare_summaries, resolve_runs

    if len(set(args.variants)) != len(args.variants):
        raise UsageError(f"series: a variant named twice ({' '.join(args.variants)})")
    metrics = tuple((m.op, m.stat) for m in args.metric or [])
    options = SeriesOptions(results=args.results, by=args.by, baseline=args.baseline,
                            metrics=metrics or None, since=args.since,
                            noise=parse_percent(args.noise, "--noise"))
    bound = parse_percent(args.max_regression, "--max-regression")
    prepare_summaries(args.variants, args.results)
    resolved = [resolve_runs(spec, args.results, args.workload) for spec in args.variants]
    for problem in (p for r in resolved for p in r.problems):
        print(f"stallbench: {problem}", file=sys.stderr)
    series = build_series(resolved, options)
    check_since(series.points, args.since)
    _write(args, _render(series, args.format))
    if args.plots:
        from ..report.plots import write_plots
        from ..report.seriesplots import render_series_plots
        try:
            write_plots(render_series_plots(series), args.plots)
        except OSError as exc:
            raise UsageError(f"--plots {args.plots}: cannot write ({exc.strerror})") from exc
    if args.bisect:
        return _bisect(series, args)
    code, reasons = gate_series(series, bound)
    for reason in reasons:
        print(f"stallbench: {reason}", file=sys.stderr)
    if code == ExitCode.UNDECIDED:
        raise UndecidedError(reasons[0])
    return code


def _render(series, fmt: str) -> str:
    if fmt == "json":
        from ..report.seriesdata import render_json
        return render_json(series)
    if fmt == "csv":
        from ..report.seriesdata import render_csv
        return render_csv(series)
    if fmt == "email":
        from ..report.email import render_series
        return render_series(series)
    from ..report.series import render
    return render(series, fmt)


def _write(args: argparse.Namespace, text: str) -> None:
    if args.output and args.output != Path("-"):
        try:
            args.output.write_text(text)
        except OSError as exc:
            raise UsageError(f"--output {args.output}: cannot write ({exc.strerror})") from exc
    else:
        sys.stdout.write(text)


def _bisect(series, args: argparse.Namespace) -> int:
    """`stallbench bisect --git` over the first new regression between two commits."""
    from ..report.series import bisect_argv
    from . import main

    found = [c for c in series.change_points if c.new and c.bisect and c.verdict == "worse"]
    if not found:
        raise UsageError("--bisect: no new regression between two kernels built from commits "
                         "(run.json plan.commit, as `bisect --git` records it)")
    argv = bisect_argv(found[0])[1:]
    if args.results:
        argv += ["--results", str(args.results)]
    print(f"stallbench: running {' '.join(['stallbench', *argv])}", file=sys.stderr)
    return main(argv)
