"""stallbench reproduce RESULTS [--results NEW] — a recorded result run again here and compared
with the record."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..core import verbosity
from ..core.errors import ExitCode, UndecidedError
from .flags import BUNDLE_HELP, ExamplesFormatter, add_workload_argument

EXAMPLES = """examples:
  stallbench reproduce results                        # again here, into results.reproduced
  stallbench reproduce b.tar.gz --results again       # a bundle someone sent
  stallbench compare base cand --results again        # the new runs' whole report"""


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "reproduce",
        description="Run a recorded result again on this machine: the plan each run recorded "
                    "(run.json plan.text, since 0.6.0) runs the recorded variants again, with "
                    "their iterations, into a new results tree; then the variants are compared "
                    "as they were (the plan's first the baseline) and each change that decides "
                    "is set then against now: 'reproduced', 'did not come back', 'undecided "
                    "now' or 'called now only'. Refused in one line before anything runs when "
                    "the tree has no plan's text, a kernel file's sha256 changed or a tool is "
                    "missing. Exit 0 when every change called then came back, 1 when one did "
                    "not (or a new one was called), 125 when some came back undecided.",
        epilog=EXAMPLES, formatter_class=ExamplesFormatter)
    parser.add_argument("source", metavar="RESULTS",
                        help="the recorded results directory" + BUNDLE_HELP)
    parser.add_argument("--results", type=Path, metavar="NEW",
                        help="where the new runs go (default: RESULTS.reproduced beside it, "
                             "-2, -3 ... where taken); empty or without these variants")
    add_workload_argument(parser)
    parser.add_argument("--no-progress", action="store_true", help="no live progress display")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..compare.agreement import exit_code
    from ..report.reproduce import lines
    from ..reproduce.rerun import default_new, reproduce
    from ..results.bundle import results_tree

    source = Path(args.source)
    new = args.results or default_new(source)
    with results_tree(source) as tree:
        done = reproduce(tree, source, new, args.workload, not args.no_progress,
                         verbosity.info)
    names = done.recipe.recorded.variants
    for problem in done.failed:
        print(f"stallbench: {problem}", file=sys.stderr)
    print(f"reproduce: {done.runs} complete run(s) of {', '.join(names)} in {new}")
    if done.found is None or done.then is None:
        print("reproduce: one variant, or a variant without a complete run now: no change to "
              f"compare; `stallbench compare {' '.join(names)} --results {new}`")
        return ExitCode.FAILURE if done.failed or len(names) > 1 else ExitCode.OK
    for line in lines(done.found, done.then.baseline, done.then.candidates):
        print(line)
    print(f"the new runs' report: stallbench compare {' '.join(names)} --results {new}")
    code = exit_code(done.found)
    if code == ExitCode.UNDECIDED:
        raise UndecidedError("a change called then is undecided now: more iterations "
                             "(iterations in the plan) would say")
    return code
