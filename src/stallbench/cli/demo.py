"""`stallbench demo`: a short A/B comparison on this machine, then the comparison."""

from __future__ import annotations

import argparse
import sys

from ..core import verbosity
from ..core.errors import ExitCode
from ..plan.demo import DEMO_DATA_SIZE, DEMO_DURATION_S, DEMO_MEMORY_LIMIT, demo_plan
from .flags import add_results_argument, results_dir
from .printing import print_comparison


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "demo",
        description=f"Run a short A/B comparison on this machine and print it. As root: "
                    f"pgioperf ({DEMO_DATA_SIZE} data file) as is against the same in a "
                    f"{DEMO_MEMORY_LIMIT >> 20} MiB memory cgroup; otherwise pgioperf with 2 "
                    f"against 8 random readers. {DEMO_DURATION_S:.0f} s per variant; the runs "
                    "and the plan (demo.toml) stay under RESULTS/demo-<time>/ for compare, "
                    "show and run --plan.")
    add_results_argument(parser)
    parser.add_argument("--no-progress", action="store_true", help="no live progress display")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..results.runmeta import Status
    from ..run.runner import run_plan

    plan, story = demo_plan(results_dir(args))
    print(f"stallbench demo: {story}; {plan.duration_s:.0f} s each; results in {plan.results}",
          file=sys.stderr)
    outcomes = run_plan(plan, progress=not args.no_progress, log=verbosity.info)
    if any(o.status != Status.COMPLETE for o in outcomes):
        interrupted = any(o.status == Status.INTERRUPTED for o in outcomes)
        return ExitCode.INTERRUPTED if interrupted else ExitCode.FAILURE
    from ..run.duet import decide_hint

    names = [v.name for v in plan.variants]
    print_comparison(names[0], names[1:], plan.results, workload=plan.workload,
                     decide_hint=decide_hint(plan))
    return ExitCode.OK
