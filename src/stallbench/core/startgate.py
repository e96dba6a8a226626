"""A child program that starts its work only once its parent has journaled it.

Popen returns once the child has exec'd, and from then on the child may run, and be seen running,
before the parent has saved the journal entry that lets `stallbench cleanup` stop it: a kill -9
of the parent in that window leaves the program running with no journal naming it (a kernel
build in tests/bisect/test_bisect_git.py, under the suite's load). So the program is exec'd by a
shell that first reads one line from a pipe on its standard input: the parent writes the line
once the entry is saved; if the parent dies (or fails) before, the pipe's write end closes and
the shell exits without running the program. The pid, process group and start time the entry
names are the shell's, which exec keeps for the program; the program's standard input is
/dev/null.
"""

from __future__ import annotations

import contextlib
import os


class StartGate:
    """Use: `argv = gate.command(argv)`, Popen(argv, stdin=gate.stdin, ...), `gate.started()`
    right after Popen, `gate.open()` once the journal holds the child; `gate.close()` in a
    finally (a gate never opened keeps the program from running)."""

    def __init__(self) -> None:
        self.stdin, self._write = os.pipe()

    @staticmethod
    def command(argv: list[str]) -> list[str]:
        return ["/bin/sh", "-c", 'read -r go && exec "$@" < /dev/null', "sh", *argv]

    def started(self) -> None:
        """The child holds the read end now: the parent's copy goes, so that the child sees
        the end of the pipe when the parent is gone."""
        self._close_read()

    def open(self) -> None:
        os.write(self._write, b"go\n")
        self.close()

    def close(self) -> None:
        self._close_read()
        if self._write >= 0:
            with contextlib.suppress(OSError):
                os.close(self._write)
            self._write = -1

    def _close_read(self) -> None:
        if self.stdin >= 0:
            with contextlib.suppress(OSError):
                os.close(self.stdin)
            self.stdin = -1
