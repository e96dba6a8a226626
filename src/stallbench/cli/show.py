"""stallbench show RUN_OR_VARIANT — metadata and the per-op table of a run or a variant."""

from __future__ import annotations

import argparse

from ..core.errors import ExitCode
from .flags import add_source_arguments, results_dir
from .printing import print_summary


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "show", description="Metadata and per-op latency table of a run or a variant.")
    parser.add_argument("target", metavar="RUN_OR_VARIANT",
                        help="a variant name under RESULTS, or a variant or run directory")
    add_source_arguments(parser)
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print_summary(args.target, results_dir(args), args.workload, args.format)
    return ExitCode.OK
