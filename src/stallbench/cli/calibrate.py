"""stallbench calibrate PLAN — A/A runs of the plan's baseline, saved as this host's noise
profile for the workload's shape (analysis/noise.py); later comparisons of that shape on this
host use it as their run-to-run prior and name it. With --duet: A/A duets (the baseline against
itself, duet.py), saved as the duet profile that paired comparisons of that shape use."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from ..core.errors import ExitCode, UsageError
from .flags import add_results_argument

DEFAULT_RUNS = 8


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "calibrate", description="Run the plan's first variant (its baseline) RUNS times as "
        "variant calibrate-NAME and save how much those identical runs differ as this host's "
        "noise profile for the workload (RESULTS/noise-profiles/HOST/). Comparisons of runs "
        "of the same shape on this host then use it instead of the assumed spread of A/A runs "
        "elsewhere, so single runs can be judged. Run it on a machine as quiet as the "
        "comparisons will have.")
    parser.add_argument("plan", metavar="PLAN", type=Path)
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS,
                        help=f"A/A runs, or duet rounds with --duet (default {DEFAULT_RUNS}; "
                        "at least 3)")
    parser.add_argument("--duet", action="store_true",
                        help="A/A duets: the baseline against itself at the same time, each "
                        "side on its own CPUs (as `run --duet`); the profile is the prior of "
                        "paired comparisons (`compare` of duet runs)")
    add_results_argument(parser)
    parser.add_argument("--no-progress", action="store_true", help="no live progress display")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..analysis.noise import MIN_CALIBRATION_RUNS
    from ..core import verbosity
    from ..plan.planfile import load_plan

    if not MIN_CALIBRATION_RUNS <= args.runs <= 1000:
        raise UsageError(f"calibrate --runs {args.runs}: give between {MIN_CALIBRATION_RUNS} "
                         "and 1000 runs")
    plan = load_plan(args.plan)
    if args.results:
        plan.results = args.results
    if plan.hosts or any(v.hosts for v in plan.variants):
        raise UsageError("calibrate runs on this host: give a plan without hosts (calibrate "
                         "each host of a fleet on that host)")
    baseline = plan.variants[0]
    variant = dataclasses.replace(baseline, name=f"calibrate-{baseline.name}")
    sides = [variant]
    if args.duet:
        sides.append(dataclasses.replace(baseline, name=f"calibrate-{baseline.name}-twin"))
    plan = dataclasses.replace(plan, variants=sides, iterations=args.runs,
                               until_decided=None, duet=bool(args.duet))
    if args.duet:
        from ..run.duet import check_plan
        check_plan(plan)

    from ..compare.calibration import duet_profile_from_runs, profile_from_runs
    from ..report.noise import render_profile
    from ..results.noiseprofiles import save_profile
    from ..results.runmeta import Status
    from ..results.runselect import Resolved
    from ..results.store import load_run
    from ..run.runner import run_plan

    outcomes = run_plan(plan, progress=not args.no_progress, log=verbosity.info)
    if any(o.status == Status.INTERRUPTED for o in outcomes):
        print("stallbench: calibrate interrupted; no profile saved")
        return ExitCode.INTERRUPTED
    def runs_of(side: str) -> Resolved:
        return Resolved(side, [load_run(o.path) for o in outcomes
                               if o.status == Status.COMPLETE and o.variant == side], [])

    profile = duet_profile_from_runs(runs_of(sides[0].name), runs_of(sides[1].name)) \
        if args.duet else profile_from_runs(runs_of(variant.name))
    profile.variant = baseline.name
    path = save_profile(plan.results, profile)
    print(render_profile(profile, path), end="")
    return ExitCode.OK
