"""Exceptions that the command line turns into exit codes, and the exit codes."""

from enum import IntEnum


class ExitCode(IntEnum):
    """Every exit status of `stallbench`, declared once: the command line returns these, the man
    page's EXIT STATUS (cli/docs.py) and the fleet's reading of a host's exit are made from them."""

    OK = 0
    FAILURE = 1         # check: a regression; run: a run failed; bisect: the last is not bad
    USAGE = 2           # UsageError: bad input, missing privilege or tool
    UNDECIDED = 125     # UndecidedError: `check` cannot decide (git bisect's "skip")
    INTERRUPTED = 130   # SIGINT/SIGTERM: what was recorded is kept


class UsageError(Exception):
    """Bad input: usage, configuration, missing privilege or tool. Exit code 2.

    The message is one line that says what is wrong and how to fix it.
    """


class RunDataError(UsageError):
    """A run directory is missing, incomplete, damaged or from a newer schema."""


class UndecidedError(Exception):
    """`check` cannot decide (too few samples, incomplete run). Exit code 125."""
