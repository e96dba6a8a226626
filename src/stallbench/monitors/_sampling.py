"""Shared machinery for the sampling monitors: a thread that calls `sample()` every interval."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ..context import RunContext


class SamplerThread:
    """Calls `sample(t_ns)` at start, every `interval_s`, and once more at stop.

    Sampling is aligned to a fixed schedule (no drift); a slow sample skips missed ticks
    instead of bunching them. Exceptions in `sample` are kept, not raised, so that a monitor
    never crashes the run; `errors` holds the first few.
    """

    def __init__(self, ctx: RunContext, interval_s: float, sample: Callable[[int], None],
                 name: str):
        self._ctx = ctx
        self._interval_ns = max(1, int(interval_s * 1e9))
        self._sample = sample
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"stallbench-{name}",
                                        daemon=True)
        self.errors: list[str] = []
        self.samples = 0

    def start(self) -> None:
        self._call()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        self._call()

    def _call(self) -> None:
        try:
            self._sample(self._ctx.since_start_ns())
            self.samples += 1
        except Exception as exc:  # noqa: BLE001 - a monitor must never crash the run
            if len(self.errors) < 5:
                self.errors.append(f"{type(exc).__name__}: {exc}")

    def _loop(self) -> None:
        next_ns = time.monotonic_ns() + self._interval_ns
        while not self._stop.wait(max(0.0, (next_ns - time.monotonic_ns()) / 1e9)):
            self._call()
            now = time.monotonic_ns()
            next_ns += self._interval_ns
            if next_ns <= now:
                next_ns = now + self._interval_ns - (now - next_ns) % self._interval_ns


def read_text(path: str) -> str | None:
    """A /proc or /sys file's text, or None when it is gone or unreadable."""
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None
