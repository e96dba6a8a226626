"""Argument helpers shared by several commands."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..store import default_results_dir


def add_results_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--results", type=Path, default=None,
                        help="results directory (default: $STALLBENCH_RESULTS or ./results)")


def results_dir(args: argparse.Namespace) -> Path:
    return args.results if getattr(args, "results", None) else default_results_dir()
