"""stallbench query "SQL" — DuckDB over the results tree: views runs, summaries and ops, each
with variant, host, kernel and date (compare/query.py says what each holds)."""

from __future__ import annotations

import argparse
import sys

from .flags import add_results_argument, results_dir


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "query", description="SQL (DuckDB, the optional extra [query]) over the results "
                             "directory. Views: runs (a row per run: path, variant, "
                             "workload, iteration, status, host, kernel, date, end, "
                             "duration_s, plan_hash, commit, others_cpus), summaries (a row "
                             "per run and op: samples, rate, min_ns, p50_ns, ..., max_ns, "
                             "mean_ns) and ops (every operation: op, worker, start_ns, "
                             "latency_ns, intended_ns), each with the run's variant, "
                             "workload, iteration, host, kernel and date. Read only.")
    parser.add_argument("sql", metavar="SQL")
    add_results_argument(parser)
    parser.add_argument("--format", choices=("text", "csv", "json"), default="text")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..compare.query import run_query
    from ..core.errors import UsageError
    from ..report.listing import rows_csv, rows_json, rows_section
    from ..report.text import section_lines

    root = results_dir(args)
    if not root.is_dir():
        raise UsageError(f"query: {root}: no such results directory (--results DIR)")
    names, rows = run_query(root, args.sql)
    if args.format == "csv":
        sys.stdout.write(rows_csv(names, rows))
    elif args.format == "json":
        sys.stdout.write(rows_json(names, rows))
    else:
        lines = section_lines(rows_section(names, rows), 10_000)
        sys.stdout.write("\n".join(line.rstrip() for line in lines).rstrip() + "\n")
    return 0
