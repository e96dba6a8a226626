"""`stallbench cleanup`: undo what killed stallbench runs left behind."""

from __future__ import annotations

import argparse

from ..core.errors import ExitCode


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "cleanup",
        description="Undo the changes of stallbench runs that died (e.g. kill -9): mounts, loop "
                    "devices, images, cgroups, sysctls, huge pages, I/O schedulers. Runs still "
                    "in progress are left alone. Exit 1 when a change could not be undone "
                    "(each is named; one that failed stays in its journal for the next "
                    "cleanup).")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..core.journal import cleanup_stale
    from ..env.leftovers import cleanup_orphans

    lines: list[str] = []

    def log(line: str) -> None:
        lines.append(line)
        print(line, flush=True)

    errors = cleanup_stale(log=log, undo_kinds=_undo_kinds)
    errors += cleanup_orphans(log=log)
    if not lines:
        print("nothing to clean up")
    elif errors:
        print(f"{errors} change(s) could not be undone; see above")
        return ExitCode.FAILURE
    return ExitCode.OK


def _undo_kinds() -> dict:
    from ..run.undo import undo_kinds  # only for a journal with entries: it imports env/ etc.

    return undo_kinds()
