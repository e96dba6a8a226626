"""One run to make, as a round hands it on: the plan, the variant and its workload, the monitors,
the signals' handler, how it is shown and logged, and its place in the round (a duet's seat, the
round's record). run_one (runner.py), run_in_guest (vmhost.py) and the steps after them take
it whole; and Interrupt, the handler of SIGINT and SIGTERM for the rounds of a plan."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..plan.plan import Plan, VariantSettings
from ..workloads import Workload
from .duet import DuetSeat


@dataclass(frozen=True)
class RunJob:
    plan: Plan
    variant: VariantSettings
    workload: Workload
    monitors: list[str]
    interrupt: Interrupt
    label: str                          # "free randread 1/3": the progress line's, the log's
    log: Callable[[str], None]
    show_progress: bool = False
    seat: DuetSeat | None = None        # a duet's: the round and this side's CPUs
    round_record: dict[str, int] | None = None   # run.json round_order


class Interrupt:
    """SIGINT/SIGTERM handling: during the timed run, the first signal asks the workload to
    stop (what was recorded is kept); outside it, or on a second signal, KeyboardInterrupt
    unwinds through the context managers, which undo every change."""

    def __init__(self) -> None:
        self.stop_events: list[threading.Event] = []   # one per run in its timed phase
        self.signalled: str | None = None
        self.deferring = 0
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Interrupt:
        for signum in (signal.SIGINT, signal.SIGTERM):
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum: int, frame: Any) -> None:
        self.signalled = signal.Signals(signum).name
        live = [event for event in self.stop_events if not event.is_set()]
        if live:                    # (a duet: every side in its timed phase stops)
            for event in live:
                event.set()
            return
        if self.deferring:
            return
        raise KeyboardInterrupt(self.signalled)

    @contextmanager
    def deferred(self) -> Iterator[None]:
        """While monitors stop and the results are written, a signal is only noted: unwinding
        there would lose every op recorded (kill -9 still leaves them to `stallbench cleanup`)."""
        self.deferring += 1
        try:
            yield
        finally:
            self.deferring -= 1

    @contextmanager
    def stoppable(self, event: threading.Event) -> Iterator[None]:
        self.stop_events.append(event)
        try:
            yield
        finally:
            self.stop_events.remove(event)
