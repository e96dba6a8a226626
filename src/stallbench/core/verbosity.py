"""How much the command line says on stderr: -q (warnings and errors only), default, -v (also
what it is doing, and a traceback on an unexpected error). Set once by cli.main."""

from __future__ import annotations

import sys

QUIET, NORMAL, VERBOSE = -1, 0, 1
level = NORMAL


def set_level(quiet: int, verbose: int) -> None:
    global level
    level = QUIET if quiet else (VERBOSE if verbose else NORMAL)


def info(text: str) -> None:
    """A progress or result line (not a warning): hidden by -q."""
    if level >= NORMAL:
        print(text, file=sys.stderr, flush=True)


def debug(text: str) -> None:
    if level >= VERBOSE:
        print(text, file=sys.stderr, flush=True)
