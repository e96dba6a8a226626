"""stallbench bisect --plan PLAN --metric OP:STAT [--resume] — the first bad one of a plan's
ordered variants (or, with --knee, the first whose change against the first crosses the
bound); with --git DIR --good REV --bad REV [--build CMD], of a kernel tree's commits."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from ..analysis.quantiles import row_stats
from ..bisect import DEFAULT_BOUND
from ..core import verbosity
from ..core.errors import ExitCode, UndecidedError, UsageError
from ..plan.plan import DEFAULT_MAX_ITERATIONS
from .flags import add_metric_argument, add_results_argument


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "bisect",
        description="The plan's variants in order: the first is good, the last is checked bad "
                    "(as `stallbench check` decides, rounds of the two added until decided), "
                    "then the first bad one is found in about log2(n) measured steps, each "
                    "comparing a variant with the last good one (--knee: with the first). A "
                    "step that cannot decide is a skip: the answer becomes a range. Every run "
                    "and verdict is kept in RESULTS/bisect.json; --resume goes on from there. "
                    "Ends with `first bad: NAME` or `first bad: between A and B` (exit 0); "
                    "exit 1 when the last variant is not bad, 125 when that cannot be decided.")
    parser.add_argument("--plan", type=Path, required=True, metavar="PLAN",
                        help="a TOML plan whose variants are in order (2 or more)")
    add_metric_argument(parser, "e.g. read:p99 (repeatable; default: the plan's metrics); STAT: "
                        + " ".join(s.key for s in row_stats()) + " or any percentile, e.g. p99.99")
    parser.add_argument("--max-regression", metavar="PCT",
                        help="largest tolerated change of a step, e.g. 10%% (default "
                             + DEFAULT_BOUND.replace("%", "%%") + "; "
                             "with --knee: 100%% is a doubling)")
    parser.add_argument("--knee", action="store_true", default=None,
                        help="compare every step with the first variant: the first one whose "
                             "change crosses the bound (e.g. the memory limit below which "
                             "read p99 doubles)")
    parser.add_argument("--max-rounds", type=int, metavar="N",
                        help="rounds of the two variants a step may add before it is a skip "
                             f"(default: the plan's max_iterations, else {DEFAULT_MAX_ITERATIONS})")
    git = parser.add_argument_group(
        "kernel commits",
        "--git: the plan's one variant runs with each commit's kernel, built in a clone "
        "--shared of DIR under RESULTS/kernels (DIR is only read) when the search first needs "
        "it. The commits are GOOD and `git rev-list --first-parent --reverse GOOD..BAD`: like "
        "`git bisect --first-parent`, a merge is one step (bisect its branch again to go "
        "inside). A build that fails is a skip, never bad.")
    git.add_argument("--git", type=Path, metavar="DIR", help="the kernel tree (a git repository)")
    git.add_argument("--good", metavar="REV", help="a commit whose kernel is good")
    git.add_argument("--bad", metavar="REV", help="a later commit whose kernel is bad")
    git.add_argument("--build", metavar="CMD",
                     help="shell command that builds the checked-out commit (cwd: the "
                          "checkout) out of tree into $KBUILD_OUTPUT, leaving "
                          "arch/x86/boot/bzImage there (modules may go under "
                          "$STALLBENCH_KERNEL_DIR/lib/modules); exit status not 0: a skip. "
                          "Default: make allnoconfig with the guest's settings "
                          "($STALLBENCH_GUEST_CONFIG, shipped), olddefconfig, make -j bzImage "
                          "(with ccache when installed), at nice 19")
    parser.add_argument("--resume", action="store_true",
                        help="go on with the bisect journaled in RESULTS/bisect.json")
    add_results_argument(parser)
    parser.add_argument("--no-progress", action="store_true", help="no live progress display")
    parser.add_argument("--format", choices=("text", "email"), default="text",
                        help="the answer's comparison as text, or as a mail (72 columns, "
                             "subject first; the steps then go to stderr)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..bisect import answerlines
    from ..bisect.search import NOT_BAD
    from ..bisect.state import Settings
    from ..bisect.steps import run_bisect
    from ..plan.planfile import load_plan
    from ..report import render

    if args.max_rounds is not None and not 1 <= args.max_rounds <= 10_000:
        raise UsageError("--max-rounds must be between 1 and 10000")
    if args.git is None and (args.good or args.bad or args.build):
        raise UsageError("--good, --bad and --build go with --git DIR (a kernel tree)")
    if args.git is not None and not (args.good and args.bad):
        raise UsageError("--git needs --good REV and --bad REV")
    if args.git is not None and args.knee:
        raise UsageError("--knee looks for a value of an ordered setting; with --git give "
                         "--good and --bad and leave --knee out")
    plan = load_plan(args.plan, kernel_given=args.git is not None)
    if args.results:
        plan.results = args.results
    plan.check_workloads()
    given = Settings(metrics=[str(m) for m in args.metric] if args.metric else None,
                     bound_text=args.max_regression, knee=args.knee,
                     max_rounds=args.max_rounds)
    builder = None
    if args.git is not None:
        from ..bisect import gitcommits, gitkernels
        from ..bisect.buildtools import check_build_tools

        commits = gitcommits.first_parent_line(args.git, args.good, args.bad)
        plan = gitcommits.git_plan(plan, commits, Path(plan.results))
        check_build_tools(args.build)
        gitkernels.check_before_build(plan)
        builder = gitkernels.KernelBuilder(args.git, Path(plan.results), commits, args.build,
                                          verbosity.info)
        verbosity.info(f"bisect over {len(commits)} commits ({commits[0].name}, the good one, "
                       f"to {commits[-1].name}) on the first-parent line")

    steps_to = sys.stderr if args.format == "email" else sys.stdout

    def on_step(step, names) -> None:
        print(answerlines.step_line(step), end="", flush=True, file=steps_to)

    try:
        result = run_bisect(plan, given, args.resume, on_step, verbosity.info,
                            progress=not args.no_progress, source=builder)
    except KeyboardInterrupt:           # between runs: the state holds every round so far
        result = None
    if result is None or result.answer is None:
        again = ["--plan", args.plan, "--resume",
                 *(["--results", args.results] if args.results else []),
                 *(["--git", args.git, "--good", args.good, "--bad", args.bad]
                   if args.git else []), *(["--build", args.build] if args.build else [])]
        print("stallbench: bisect interrupted; go on with: stallbench bisect "
              + " ".join(shlex.quote(str(a)) for a in again), file=sys.stderr)
        return ExitCode.INTERRUPTED
    described: list[str] = []
    if builder is not None:
        builder.finish()
        if result.answer.first_bad is not None:
            described = gitcommits.describe_answer(args.git, builder.commits,
                                                  result.answer.last_good,
                                                  result.answer.first_bad)
    answer = answerlines.answer_lines(result, described)
    if args.format == "email" and result.comparison is not None:
        from ..report.email import render as email
        last = answer.splitlines()[-1]
        lead = last if last.startswith("first bad:") else None
        print(email(result.comparison, answer.splitlines(), lead), end="")
    else:
        if result.comparison is not None:
            print(render(result.comparison, "text"), end="")
        print(answer, end="")
    if result.answer.first_bad is None:
        line = answerlines.no_answer(result.answer, result.names,
                                       result.settings.bound_text or "")
        if result.answer.kind == NOT_BAD:
            print(f"stallbench: {line}", file=sys.stderr)
            return ExitCode.FAILURE
        raise UndecidedError(line)
    return ExitCode.OK
