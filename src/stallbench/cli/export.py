"""stallbench export RUN_OR_VARIANT --format perfetto|csv|folded|hdr — take a run elsewhere;
stallbench export RESULTS --format bundle — take a whole results tree elsewhere."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..core import verbosity
from ..core.errors import ExitCode, UsageError
from ..core.units import parse_duration
from ..exporters import DEFAULT_MAX_EVENTS, FOLDED_STACKS, FORMATS
from ..results.runselect import resolve_runs
from .flags import add_source_arguments


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "export", help="export a run or variant: Perfetto trace, CSV, folded stacks, HdrHistogram",
        description="Export a run or a variant for other tools: a trace for the Perfetto UI and "
                    "chrome://tracing (perfetto), every op as CSV (csv), blocked or on-CPU stacks "
                    "for flame graphs (folded, --stacks, --diff, --svg), HdrHistogram interval "
                    "logs (hdr); or a whole results tree as one archive another engineer can open "
                    "(bundle: the plans, run.json files, summaries, monitor tables, kernel "
                    "configs and the report as text, email and HTML; compare, check, series and "
                    "reproduce take it as --results FILE).")
    parser.add_argument("target", metavar="RUN_OR_VARIANT",
                        help="a variant name under RESULTS, or a variant or run directory; "
                             "bundle: a results directory")
    parser.add_argument("--format", choices=FORMATS, required=True)
    parser.add_argument("--output", type=Path, metavar="FILE",
                        help="write here instead of stdout ('-': stdout)")
    add_source_arguments(parser)
    parser.add_argument("--allow-incomplete", action="store_true",
                        help="also export runs that did not finish")
    trace = parser.add_argument_group("perfetto")
    span = trace.add_mutually_exclusive_group()
    span.add_argument("--window", metavar="START-END",
                      help="only this part of the run, times since its start (e.g. 2s-2.5s)")
    span.add_argument("--around-slow", type=int, metavar="N",
                      help="only windows of 100 ms around the N slowest ops")
    trace.add_argument("--max-events", type=int, default=None, metavar="N",
                       help=f"at most N slices (default {DEFAULT_MAX_EVENTS}): the shortest ops, "
                            "syscalls and block requests are left out first, never a reclaim, "
                            "throttle or D-state interval nor one of the --around-slow ops")
    stacks = parser.add_argument_group("folded")
    stacks.add_argument("--diff", metavar="OTHER",
                        help="differential folded stacks: RUN_OR_VARIANT (first) vs OTHER")
    stacks.add_argument("--svg", action="store_true", help="a flame graph as SVG instead")
    stacks.add_argument("--stacks", choices=FOLDED_STACKS, default=None,
                        help="where the tasks blocked (blocked: the trace or stacks monitor, "
                             "the default) or ran on a CPU (on-cpu: the profile monitor)")
    hdr = parser.add_argument_group("hdr")
    hdr.add_argument("--interval", default="1s", help="histogram interval (default %(default)s)")
    bundle = parser.add_argument_group("bundle")
    bundle.add_argument("--ops", action="store_true",
                        help="also put every run's ops.parquet in (their size is said either "
                             "way); default: the summaries stand for them")
    parser.set_defaults(func=run)


def parse_window(text: str) -> tuple[int, int]:
    start, sep, end = text.partition("-")
    if not sep:
        raise UsageError(f"--window {text!r}: give START-END, e.g. 2s-2.5s")
    lo = 0.0 if start.strip() in ("", "0") else parse_duration(start.strip(), "--window start")
    hi = parse_duration(end.strip(), "--window end")
    if hi <= lo:
        raise UsageError(f"--window {text!r}: the end must come after the start")
    return int(lo * 1e9), int(hi * 1e9)


def _refuse(args: argparse.Namespace) -> None:
    for flag, value, fmt in (("--window", args.window, "perfetto"),
                             ("--around-slow", args.around_slow, "perfetto"),
                             ("--max-events", args.max_events, "perfetto"),
                             ("--diff", args.diff, "folded"), ("--svg", args.svg, "folded"),
                             ("--stacks", args.stacks, "folded"),
                             ("--interval", args.interval != "1s", "hdr"),
                             ("--ops", args.ops, "bundle")):
        if value and args.format != fmt:
            raise UsageError(f"{flag} goes with --format {fmt}, not --format {args.format}")
    if args.around_slow is not None and args.around_slow < 1:
        raise UsageError("--around-slow: give a number of ops, 1 or more")
    if args.max_events is not None and args.max_events < 1:
        raise UsageError("--max-events: give a number of events, 1 or more")
    if args.around_slow and args.max_events and args.around_slow > args.max_events:
        raise UsageError(f"--around-slow {args.around_slow} keeps more ops than --max-events "
                         f"{args.max_events} allows: give --max-events {args.around_slow} or "
                         "more")


def _resolve(spec: str, args: argparse.Namespace):
    resolved = resolve_runs(spec, args.results, args.workload, args.allow_incomplete)
    for problem in resolved.problems:
        print(f"stallbench: {problem}", file=sys.stderr)
    return resolved


def run(args: argparse.Namespace) -> int:
    _refuse(args)
    if args.format == "bundle":
        return _bundle(args)
    window = parse_window(args.window) if args.window else None
    interval = parse_duration(args.interval, "--interval") if args.format == "hdr" else 1.0
    resolved = _resolve(args.target, args)
    other = _resolve(args.diff, args) if args.diff else None
    for run in resolved.runs + (other.runs if other else []):
        verbosity.debug(f"stallbench: reading {run.path}")
    if window is not None:
        from ..exporters import perfetto
        perfetto.check_window(resolved.runs, window, args.window)
    binary = args.format == "csv"
    target = None if args.output == Path("-") else args.output
    tmp = target.with_name(f".{target.name}.tmp") if target else None
    try:
        stream = (open(tmp, "wb" if binary else "w") if tmp else  # noqa: SIM115
                  (sys.stdout.buffer if binary else sys.stdout))
    except OSError as exc:
        raise UsageError(f"--output {target}: cannot write ({exc.strerror})") from exc
    try:
        message = _export(args, resolved, other, stream, window, interval)
        if tmp:
            stream.close()
            os.replace(tmp, target)
    except BaseException:
        if tmp:
            stream.close()
            tmp.unlink(missing_ok=True)
        raise
    verbosity.info(f"stallbench: {message}" + (f" -> {target}" if target else ""))
    return ExitCode.OK


def _export(args, resolved, other, stream, window, interval) -> str:
    runs = resolved.runs
    if args.format == "perfetto":
        from ..exporters import perfetto
        summary = perfetto.write(runs, stream, window, args.around_slow,
                                 args.max_events or perfetto.DEFAULT_MAX_EVENTS)
        for note in summary.notes:
            print(f"stallbench: {note}", file=sys.stderr)
        if summary.windows:
            verbosity.debug("stallbench: windows " + ", ".join(
                f"{lo / 1e9:.3f}-{hi / 1e9:.3f} s" for lo, hi in summary.windows))
        ops = sum(summary.ops.values())
        return (f"{ops:,} op slices, {sum(summary.intervals.values()):,} kernel intervals, "
                f"{summary.samples:,} on-CPU samples, {summary.counters:,} counter samples "
                f"from {len(runs)} run(s)")
    if args.format == "csv":
        from ..exporters import csvout
        return f"{csvout.write(runs, stream):,} ops from {len(runs)} run(s)"
    if args.format == "hdr":
        from ..exporters import hdr
        counts = hdr.write(runs, stream, interval)
        return f"{sum(counts.values()):,} ops of {len(counts)} op(s) in {interval:g} s intervals"
    from ..exporters import folded
    stacks = args.stacks or folded.BLOCKED
    words = "on-CPU" if stacks == folded.ON_CPU else "blocked"
    if other is not None:
        a, b = folded.write_diff(resolved.label, runs, other.label, other.runs, stream,
                                 args.svg, stacks)
        return (f"differential {words} stacks {a.label} ({a.total:,}) vs {b.label} "
                f"({b.total:,}), {a.unit}")
    profile = folded.write(resolved.label, runs, stream, args.svg, stacks)
    return f"{len(profile.counts):,} {words} stacks, {profile.total:,} {profile.unit}"


def _bundle(args: argparse.Namespace) -> int:
    from ..analysis.display import format_size
    from ..exporters import bundle

    target = Path(args.target)
    if args.output == Path("-"):
        raise UsageError("--format bundle writes a file: give --output FILE.tar.gz")
    output = args.output or Path(f"{target.resolve().name}.tar.gz")
    if not output.name.endswith((".tar.gz", ".tgz")):
        raise UsageError(f"--output {output}: a bundle is a .tar.gz; name it so")
    try:
        summary = bundle.write(target, output, with_ops=args.ops, workload=args.workload)
    except OSError as exc:
        raise UsageError(f"--output {output}: cannot write ({exc.strerror})") from exc
    ops = (f"ops.parquet in ({format_size(summary.ops_bytes)})" if summary.ops_included else
           f"ops.parquet left out ({format_size(summary.ops_bytes)}; --ops puts them in)")
    print(f"{output}: {summary.runs} run(s) of {summary.variants} variant(s), "
          f"{summary.plans} plan(s), {summary.kernels} kernel config(s), "
          f"{len(summary.reports)} report(s); {format_size(summary.bytes)}; {ops}")
    for problem in summary.left_out:
        print(f"stallbench: left out: {problem}", file=sys.stderr)
    return ExitCode.OK
