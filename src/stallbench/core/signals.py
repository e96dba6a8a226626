"""Ctrl-C and SIGTERM held back while a child process starts.

Python runs a signal's handler between two bytecodes, and subprocess.Popen is Python code: a
KeyboardInterrupt raised inside it after the fork leaves a child nobody knows about (a losetup
that attaches, or a mount that mounts, after the undo looked). Blocking the signal in the kernel
does not help once it has arrived: its Python handler still runs at the next bytecode. So the
handlers themselves are swapped for ones that only take note, and each noted signal is raised
again, to the handler that was there before, once the child's Popen object exists.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def held_while_starting() -> Iterator[None]:
    """Defer SIGINT/SIGTERM for the block (only the main thread runs handlers; elsewhere a
    no-op). Put the block inside the `try` that stops the child, so the re-raised signal finds
    the child known."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    noted: list[int] = []
    previous: dict[int, object] = {}
    try:
        for signum in STOP_SIGNALS:
            previous[signum] = signal.signal(signum, lambda n, _frame: noted.append(n))
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in dict.fromkeys(noted):
            signal.raise_signal(signum)


@contextmanager
def terminate_unwinds(signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGHUP)
                      ) -> Iterator[None]:
    """SIGTERM and SIGHUP raise KeyboardInterrupt in the block, so its `finally` clauses run
    (a temporary folder is removed) as after Ctrl-C; only where a signal has its default
    action and in the main thread (a caller that handles one keeps its handler)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def unwind(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous: dict[int, object] = {}
    try:
        for signum in signals:
            if signal.getsignal(signum) is signal.SIG_DFL:
                previous[signum] = signal.signal(signum, unwind)
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
