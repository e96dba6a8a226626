"""Argument helpers shared by several commands."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..core.errors import UsageError
from ..results.rundirs import RESULTS_HELP, default_results_dir


def add_results_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--results", type=Path, default=None,
                        help=RESULTS_HELP)


def add_workload_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workload", help="pick one workload when a variant holds several")


def add_source_arguments(parser: argparse.ArgumentParser) -> None:
    """--results and --workload: where the runs a command reads are."""
    add_results_argument(parser)
    add_workload_argument(parser)


def results_dir(args: argparse.Namespace) -> Path:
    return args.results if getattr(args, "results", None) else default_results_dir()


def print_comparison(baseline: str, candidates: list[str], results: Path,
                     workload: str | None = None, metrics: list[str] | None = None) -> None:
    """Print the text comparison of variants just run (after `run --plan` and `demo`), with
    the verdicts of the metrics asked for (`--iterations auto --metric`)."""
    from ..compare.comparison import build_comparison
    from ..compare.gate import metric_options, parse_metric
    from ..compare.model import CompareOptions
    from ..report import render
    from ..results.runselect import resolve_runs

    base = resolve_runs(baseline, results, workload)
    others = [resolve_runs(name, results, workload) for name in candidates]
    options = metric_options([parse_metric(m) for m in metrics]) if metrics \
        else CompareOptions()
    print(render(build_comparison(base, others, options), "text"), end="")


def parse_percentiles(text: str) -> tuple[float, ...]:
    """--percentiles '50,99,99.99' -> (50.0, 99.0, 99.99)."""
    from ..analysis.quantiles import parse_percents

    try:
        return parse_percents(text)
    except ValueError as exc:
        raise UsageError(f"--percentiles {text}: {exc}; give percentiles between 0 and 100 "
                         "separated by commas, e.g. 50,99,99.99") from None
