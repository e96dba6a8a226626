"""stallbench compare BASELINE CANDIDATE... — the comparison report."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..analysis.quantiles import DEFAULT_PERCENTS
from ..core.errors import ExitCode, UsageError
from ..core.terminal import COLOR_HELP, COLOR_MODES
from ..report import BRIEF, FORMATS, SECTIONS
from .flags import (
    BASELINE_HELP,
    ExamplesFormatter,
    add_common,
    add_metric_argument,
    bundle_opened,
    parse_sections,
    resolve_all,
)
from .printing import print_summary

EXAMPLES = """examples:
  stallbench compare vanilla patched                 # the headline first, then every table
  stallbench compare vanilla patched --brief         # the headline alone
  stallbench compare vanilla patched --sections headline,tables
  stallbench compare vanilla patched --format json   # every number, latencies in ns
  stallbench compare vanilla patched --format html --output report.html
  stallbench compare vanilla patched --format email  # to mail: 72 columns, subject first
  stallbench compare vanilla patched --results b.tar.gz   # a bundle (stallbench export)
  stallbench compare vanilla                         # one variant: its summary"""


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "compare", help="compare variants: percentiles with intervals, shift, stalls",
        description="Compare a baseline with one or more candidates (variant names under "
                    "RESULTS, or paths to variant or run directories). With only a baseline: "
                    "its summary, as `stallbench show` prints it. The report opens with the "
                    "headline: per candidate the changes called, starved ops and the first "
                    "cause of each regression.",
        epilog=EXAMPLES, formatter_class=ExamplesFormatter)
    parser.add_argument("baseline", metavar="BASELINE", nargs="?", help=BASELINE_HELP)
    parser.add_argument("candidates", metavar="CANDIDATE", nargs="*",
                        help="a variant to compare with the baseline (a name under RESULTS or "
                             "a path); none: the baseline's summary")
    add_common(parser)
    parser.add_argument("--format", choices=FORMATS, default="text")
    parser.add_argument("--output", type=Path,
                        help="write the report here instead of stdout ('-': stdout)")
    parser.add_argument("--brief", action="store_true",
                        help="only the headline (--sections " + ",".join(BRIEF) + ")")
    parser.add_argument("--sections", metavar="LIST",
                        help="the report's parts to show, in their order: "
                             + ",".join(SECTIONS) + " (default: all)")
    parser.add_argument("--color", choices=COLOR_MODES, default="auto", help=COLOR_HELP)
    parser.add_argument("--plots", type=Path, metavar="DIR",
                        help="also write the plots as PNG and SVG into DIR")
    parser.add_argument("--percentiles", metavar="LIST",
                        help="percentiles of the tables and the JSON, e.g. 50,99,99.99 "
                             "(default " + ",".join(f"{p:g}" for p in DEFAULT_PERCENTS)
                             + "); one is a number where at least 10 ops lie at or beyond it")
    add_metric_argument(parser, "a metric asked for (repeatable), e.g. read:mean: its row shows "
                                "its verdict, judged as `check` judges it (its own "
                                "false-discovery budget), beside the rows that decide by default")
    parser.add_argument("--allow-incomplete", action="store_true",
                        help="use runs that did not finish (they are flagged)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    with bundle_opened(args):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    if args.baseline is None:
        raise UsageError("give a BASELINE variant and the CANDIDATEs to compare with it (names "
                         "under RESULTS or paths; `stallbench list` shows them), e.g. "
                         "`stallbench compare vanilla patched`")
    sections = parse_sections(args.sections, args.brief, args.format)
    if not args.candidates:
        print_summary(args.baseline, args.results, args.workload)
        print(f"stallbench: a comparison needs two variants; this is {args.baseline} alone "
              "(give a CANDIDATE to compare it with)", file=sys.stderr)
        return ExitCode.OK
    from ..compare.comparison import build_comparison
    from ..compare.gate import check_metric_ops, metric_options
    from ..compare.model import CompareOptions
    from ..core.units import parse_percent
    from ..report import render
    from .flags import parse_percentiles

    options = CompareOptions(noise=parse_percent(args.noise, "--noise"),
                             percentiles=parse_percentiles(args.percentiles)
                             if args.percentiles is not None else None)
    metrics = args.metric or []
    if metrics:
        options = metric_options(metrics, options)
    baseline, candidates = resolve_all(args, args.allow_incomplete)
    comparison = build_comparison(baseline, candidates, options)
    check_metric_ops(comparison, metrics)
    plots = None
    if args.plots or (args.format == "html" and "where" in sections):
        from ..report import plots as plots_mod
        plots = plots_mod.render_plots(comparison, ("png", "svg") if args.plots else ("png",))
        if args.plots:
            try:
                plots_mod.write_plots(plots, args.plots)
            except OSError as exc:
                raise UsageError(f"--plots {args.plots}: cannot write ({exc.strerror})") from exc
    to_stdout = not args.output or args.output == Path("-")
    if args.format == "html":
        from ..report import htmlout
        text = htmlout.render(comparison, plots, sections)
    else:
        from ..core.terminal import use_color
        text = render(comparison, args.format, sections=sections,
                      color=to_stdout and use_color(args.color, sys.stdout))
    if not to_stdout:
        try:
            args.output.write_text(text)
        except OSError as exc:
            raise UsageError(f"--output {args.output}: cannot write ({exc.strerror})") from exc
    else:
        sys.stdout.write(text)
    return ExitCode.OK
