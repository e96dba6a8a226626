"""`stallbench import KIND PATH --variant NAME`: read a foreign log into a run directory."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..core.errors import ExitCode
from ..importers import IMPORTERS
from .flags import add_results_argument


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "import",
        description="Read a log written by another tool into RESULTS/<variant>/<workload>/<n>/ "
                    "so that compare, check and show treat it like a stallbench run.")
    parser.add_argument("kind", choices=list(IMPORTERS), metavar="KIND",
                        help="one of: " + ", ".join(IMPORTERS))
    parser.add_argument("path", type=Path, metavar="PATH",
                        help="the log file (fio, pgbench: or a directory of logs)")
    parser.add_argument("--variant", required=True, help="the variant name to file it under")
    add_results_argument(parser)
    parser.add_argument("--workload", default=None,
                        help="workload name to file it under (default: mmtests-pgioperf, "
                             "command, fio or pgbench)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..importers import import_log
    from ..results.rundirs import default_results_dir
    from ..results.store import load_run

    results = args.results or default_results_dir()
    run_dir = import_log(args.kind, args.path, args.variant, results, args.workload)
    meta = load_run(run_dir).meta
    counts = ", ".join(f"{op} {n}" for op, n in sorted(meta.samples.items()))
    print(f"{run_dir}: {counts}")
    for note in meta.notes:
        print(f"  note: {note}")
    return ExitCode.OK
