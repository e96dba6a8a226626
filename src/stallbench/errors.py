"""Exceptions that the command line turns into exit codes."""


class UsageError(Exception):
    """Bad input: usage, configuration, missing privilege or tool. Exit code 2.

    The message is one line that says what is wrong and how to fix it.
    """


class RunDataError(UsageError):
    """A run directory is missing, incomplete, damaged or from a newer schema."""


class UndecidedError(Exception):
    """`check` cannot decide (too few samples, incomplete run). Exit code 125."""
