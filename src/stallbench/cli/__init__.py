"""Command line: one module per command, each with `register(subparsers)`; no logic here.

Only the module of the command given is imported (some import numpy, pyarrow and scipy): the
listing of `stallbench --help` comes from COMMANDS, so help, usage errors and `cleanup` start
fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback

from ..core import verbosity
from ..core.errors import ExitCode, UndecidedError, UsageError
from ..core.unusedimports import keep_unused_modules_out
from ..core.version import __version__

# command name -> (module, one-line help for the listing)
COMMANDS = {
    "run": ("run", "run a workload under one variant, or a plan"),
    "compare": ("compare", "compare variants: percentiles with intervals, shift, stalls"),
    "check": ("check", "exit 0/1/125: did a metric regress beyond a bound?"),
    "bisect": ("bisect", "the first bad one of a plan's ordered variants, in ~log2(n) steps"),
    "calibrate": ("calibrate", "A/A runs of a plan's baseline: this host's noise profile"),
    "import": ("importcmd",
               "import a foreign log (mmtests-pgioperf, strace, fio, pgbench) as a run"),
    "series": ("series", "many variants in one table, the change points along them"),
    "reproduce": ("reproduce", "run a recorded result again here and compare with the record"),
    "list": ("listcmd", "what the results directory holds: variants, runs, kernels, hosts"),
    "query": ("query", "SQL over the results directory (DuckDB): runs, summaries, ops"),
    "show": ("show", "metadata and per-op table of a run or variant"),
    "export": ("export", "export a run or variant: Perfetto trace, CSV, folded stacks, "
                         "HdrHistogram"),
    "cleanup": ("cleanup",
                "undo what killed runs left behind (mounts, loop devices, cgroups, ...)"),
    "demo": ("demo", "run a short A/B comparison and show it"),
    "deploy": ("deploy", "install this controller's stallbench on every host of an inventory"),
    "completion": ("completion", "print the bash, zsh or fish completion script"),
}


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad usage as one line and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        command = self.prog.removeprefix("stallbench").strip()   # main() prints "stallbench: "
        raise UsageError(f"{command}: {message}" if command else message)


class _Commands(argparse._SubParsersAction):
    """The listing's help line of each command comes from COMMANDS (one place)."""

    def add_parser(self, name: str, **kwargs):  # type: ignore[override]
        if name in COMMANDS:
            kwargs["help"] = COMMANDS[name][1]
        return super().add_parser(name, **kwargs)


def _command_in(argv: list[str]) -> str | None:
    """The command word: the first argument not an option (the top level has only flags)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; with `argv`, only the command it names is built in full (the others are
    names in the listing), so that heavy modules load only for the command that needs them."""
    parser = _Parser(prog="stallbench",
                     description="Find I/O latency regressions and explain them.")
    parser.add_argument("--version", action="version", version=f"stallbench {__version__}")
    _verbosity_flags(parser, 0)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser,
                                action=_Commands)
    wanted = None if argv is None else _command_in(argv)
    for name, (module_name, _) in COMMANDS.items():
        if argv is not None and name != wanted:
            sub.add_parser(name)
            continue
        try:
            module = importlib.import_module(f".{module_name}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.endswith(f".{module_name}"):
                continue  # command not built yet
            raise
        module.register(sub)
    for command in _nested(parser):
        _verbosity_flags(command, argparse.SUPPRESS)  # also after the command's name
    return parser


def _nested(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += [sub, *_nested(sub)]
    return found


def _verbosity_flags(parser: argparse.ArgumentParser, default) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("-q", "--quiet", action="count", default=default,
                       help="only warnings and errors on stderr (no progress display)")
    group.add_argument("-v", "--verbose", action="count", default=default,
                       help="say more on stderr, with a traceback on an unexpected error")


def main(argv: list[str] | None = None) -> int:
    try:
        argv = sys.argv[1:] if argv is None else list(argv)
        parser = build_parser(argv)
        args = parser.parse_args(argv)
        verbosity.set_level(args.quiet, args.verbose)
        if args.quiet and hasattr(args, "no_progress"):
            args.no_progress = True
        del args.quiet, args.verbose    # not options of the command (run passes its rest on)
        if not getattr(args, "func", None):
            parser.print_help(sys.stderr)
            return ExitCode.USAGE
        return int(args.func(args) or 0)
    except UsageError as exc:
        print(f"stallbench: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    except UndecidedError as exc:
        print(f"stallbench: cannot decide: {exc}", file=sys.stderr)
        return ExitCode.UNDECIDED
    except KeyboardInterrupt:
        print("stallbench: interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except BrokenPipeError:
        return ExitCode.OK
    except OSError as exc:  # the machine, not the input: still one line, never a traceback
        if verbosity.level >= verbosity.VERBOSE:
            traceback.print_exc()
        where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        print(f"stallbench: {exc.strerror or exc}{where}", file=sys.stderr)
        return ExitCode.USAGE


def run_main() -> None:
    """The `stallbench` command's process (main() alone leaves the caller's imports be)."""
    keep_unused_modules_out()
    sys.exit(main())
