"""`stallbench run WORKLOAD [options]` and `stallbench run --plan FILE`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..core import verbosity
from ..core.errors import ExitCode, UsageError
from ..core.options import add_arguments, parse_values, values_from_args
from ..plan.plan import RUN_FIELDS, Plan
from ..results.rundirs import RESULTS_HELP
from ..results.runmeta import Status
from ..settings.variant import VARIANT_FIELDS, flag_of, variant_from_flags
from ..workloads import available_workloads, get_workload
from .flags import add_metric_argument, add_results_argument, results_dir
from .printing import print_comparison


def register(subparsers) -> None:
    parser = subparsers.add_parser("run", description="Run a workload and record every operation.")
    parser.add_argument("--plan", type=Path, help="a TOML plan with several variants")
    parser.add_argument("--hosts", metavar="INVENTORY",
                        help="run the plan on these hosts through Ansible: an inventory file "
                             "or user@host,... (see README: fleet)")
    add_results_argument(parser)
    parser.add_argument("--no-progress", action="store_true", help="no live progress display")
    parser.add_argument("--iterations", dest="plan_iterations", metavar="auto",
                        help="with --plan: 'auto' adds interleaved rounds until --metric is "
                             "decided (better, worse or same) for every candidate")
    parser.add_argument("--max-iterations", type=int, metavar="N",
                        help="with --iterations auto: at most N rounds (10)")
    add_metric_argument(parser, "with --iterations auto: a metric that decides (repeatable)")
    # with --plan (given before any workload name): the plan key's flag, declared once in plan.py
    add_arguments(parser, [f for f in RUN_FIELDS if f.name == "duet"])
    workloads = parser.add_subparsers(dest="workload", metavar="WORKLOAD",
                                      parser_class=type(parser))
    for name in available_workloads():
        try:
            cls = get_workload(name)
        except UsageError:
            continue
        sub = workloads.add_parser(name, help=cls.help, description=cls.help)
        _add_variant_arguments(sub)
        cls.add_arguments(sub)
    parser.set_defaults(func=run)


def _add_variant_arguments(parser: argparse.ArgumentParser) -> None:
    """The run and variant flags, made from the tables in plan.py and variant.py."""
    group = parser.add_argument_group("run and variant options")
    name, *settings = VARIANT_FIELDS
    add_arguments(group, [name])
    # SUPPRESS: given before the workload name, the run parser's value must survive
    group.add_argument("--results", type=Path, default=argparse.SUPPRESS,
                       help=RESULTS_HELP)
    add_arguments(group, RUN_FIELDS)
    group.add_argument("--no-progress", action="store_true", default=argparse.SUPPRESS,
                       help="no live progress display")
    add_arguments(group, settings)


def plan_from_args(args: argparse.Namespace) -> Plan:
    """Flags of `stallbench run WORKLOAD ...` -> a one-variant Plan."""
    cls = get_workload(args.workload)
    return Plan(
        workload=args.workload,
        workload_options=values_from_args(args, cls.option_fields()),
        variants=[variant_from_flags(values_from_args(args, VARIANT_FIELDS))],
        results=results_dir(args),
        **parse_values(RUN_FIELDS, values_from_args(args, RUN_FIELDS), flag_of),
    )


def _until_decided(args: argparse.Namespace, plan: Plan) -> None:
    """--iterations auto [--max-iterations N] [--metric OP:STAT] over a plan's own keys."""
    if args.plan_iterations is not None and args.plan_iterations != "auto":
        raise UsageError(f"--iterations {args.plan_iterations!r} with --plan: only 'auto' "
                         "(the plan file sets a number)")
    auto = args.plan_iterations == "auto" or plan.until_decided is not None
    if not auto:
        if args.max_iterations or args.metric:
            raise UsageError("--max-iterations and --metric go with --iterations auto")
        return
    if args.metric:
        plan.until_decided = [str(metric) for metric in args.metric]    # the plan's text
    elif plan.until_decided is None:
        raise UsageError("--iterations auto needs --metric OP:STAT (e.g. --metric read:p99)")
    if args.max_iterations is not None:
        if not 1 <= args.max_iterations <= 10_000:
            raise UsageError("--max-iterations must be between 1 and 10000")
        plan.iterations = args.max_iterations
    elif plan.until_decided is not None and args.plan_iterations == "auto" \
            and plan.iterations == 1:
        plan.iterations = 10


def run(args: argparse.Namespace) -> int:
    if args.plan:
        if args.workload:
            raise UsageError("give either --plan FILE or a WORKLOAD, not both")
        from ..plan.planfile import load_plan

        plan = load_plan(args.plan)
        if args.results:
            plan.results = args.results
        if getattr(args, "duet", None):
            plan.duet = True
        _until_decided(args, plan)
        if plan.duet:
            from ..run.duet import check_plan
            check_plan(plan, hosts=args.hosts)
        if args.hosts or plan.hosts or any(v.hosts for v in plan.variants):
            from .fleet import run_fleet_plan
            return run_fleet_plan(plan, args.hosts)
    elif args.hosts:
        raise UsageError("--hosts goes with --plan FILE: write the variants in a plan")
    elif args.workload:
        if args.plan_iterations or args.max_iterations or args.metric:
            raise UsageError("--iterations auto compares variants: use it with --plan "
                             "(stallbench run --plan PLAN --iterations auto --metric OP:STAT)")
        plan = plan_from_args(args)
    else:
        raise UsageError("name a workload (" + ", ".join(available_workloads())
                         + ") or give --plan FILE")
    plan.check_workloads()
    from ..run.runner import run_plan

    outcomes = run_plan(plan, progress=not args.no_progress, log=verbosity.info)
    names = list(dict.fromkeys(v.name for v in plan.variants))
    # a variant without a complete run (its kernel did not boot, ...) was reported above
    names = [n for n in names
             if any(o.variant == n and o.status == Status.COMPLETE for o in outcomes)]
    if len(names) > 1:
        from ..run.duet import decide_hint

        print_comparison(names[0], names[1:], plan.results, workload=plan.workload,
                         metrics=plan.until_decided,
                         decide_hint=decide_hint(plan) if not plan.duet else None)
    else:
        for outcome in outcomes:
            print(f"{outcome.path}: {outcome.status}"
                  + (f" ({outcome.reason})" if outcome.reason else ""))
    statuses = {o.status for o in outcomes}
    if Status.INTERRUPTED in statuses:
        return ExitCode.INTERRUPTED
    if Status.FAILED in statuses:
        print("stallbench: some runs failed; see run.json of each", file=sys.stderr)
        return ExitCode.FAILURE
    return ExitCode.OK
