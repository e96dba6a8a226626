"""Command line: one module per command, each with `register(subparsers)`; no logic here."""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback

from .. import __version__, verbosity
from ..errors import UndecidedError, UsageError

COMMANDS = ("run", "compare", "check", "importcmd", "show", "export", "cleanup", "demo")


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad usage as one line and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="stallbench",
                     description="Find I/O latency regressions and explain them.")
    parser.add_argument("--version", action="version", version=f"stallbench {__version__}")
    _verbosity_flags(parser, 0)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        try:
            module = importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.endswith(f".{name}"):
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
        parser = build_parser()
        args = parser.parse_args(argv)
        verbosity.set_level(args.quiet, args.verbose)
        if args.quiet and hasattr(args, "no_progress"):
            args.no_progress = True
        if not getattr(args, "func", None):
            parser.print_help(sys.stderr)
            return 2
        return int(args.func(args) or 0)
    except UsageError as exc:
        print(f"stallbench: {exc}", file=sys.stderr)
        return 2
    except UndecidedError as exc:
        print(f"stallbench: cannot decide: {exc}", file=sys.stderr)
        return 125
    except KeyboardInterrupt:
        print("stallbench: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as exc:  # the machine, not the input: still one line, never a traceback
        if verbosity.level >= verbosity.VERBOSE:
            traceback.print_exc()
        where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        print(f"stallbench: {exc.strerror or exc}{where}", file=sys.stderr)
        return 2


def run_main() -> None:
    sys.exit(main())
