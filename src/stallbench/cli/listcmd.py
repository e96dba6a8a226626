"""stallbench list [--results DIR] — what a results tree holds: per variant and workload its
runs, their status, kernels, hosts, dates and plans (run.json only; nothing is written)."""

from __future__ import annotations

import argparse
import sys

from .flags import add_results_argument, results_dir


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "list", description="What the results directory holds: one line per variant and "
                            "workload with its runs, their status, kernels, hosts, dates "
                            "(UTC) and plan hashes, read from run.json alone.")
    add_results_argument(parser)
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..core.errors import UsageError
    from ..report.listing import list_json, list_section
    from ..report.text import section_lines
    from ..results.catalog import entries, run_facts

    root = results_dir(args)
    if not root.is_dir():
        raise UsageError(f"list: {root}: no such results directory (--results DIR)")
    facts, problems = run_facts(root)
    found = entries(facts)
    if args.format == "json":
        sys.stdout.write(list_json(found, problems))
    else:
        lines = section_lines(list_section(str(root), found, problems), 10_000)
        sys.stdout.write("\n".join(line.rstrip() for line in lines).rstrip() + "\n")
    return 0
