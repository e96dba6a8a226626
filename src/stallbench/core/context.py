"""What the runner hands to environments, workloads and monitors.

Layers stay independent: a workload sees only its directory, its duration, a recorder spool and
`child_setup`; a monitor sees only the processes, the cgroup, the devices and the journal.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .journal import Journal


class ProcessSet:
    """The workload's processes: pids registered by the workload, plus all their descendants."""

    def __init__(self) -> None:
        self._roots: set[int] = set()
        self._lock = threading.Lock()

    def add(self, pid: int) -> None:
        with self._lock:
            self._roots.add(pid)

    def roots(self) -> list[int]:
        with self._lock:
            return sorted(self._roots)

    def pids(self) -> list[int]:
        """Registered pids still alive and every descendant, found through /proc children."""
        seen: set[int] = set()
        stack = self.roots()
        while stack:
            pid = stack.pop()
            if pid in seen or not os.path.exists(f"/proc/{pid}"):
                continue
            seen.add(pid)
            stack.extend(_children(pid))
        return sorted(seen)

    def tids(self) -> list[tuple[int, int]]:
        """(pid, tid) of every thread of every process in the set."""
        result = []
        for pid in self.pids():
            try:
                result.extend((pid, int(t)) for t in os.listdir(f"/proc/{pid}/task"))
            except OSError:
                continue
        return result


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    kids.extend(int(x) for x in f.read().split())
            except OSError:
                continue
    except OSError:
        pass
    return kids


@dataclass
class EnvState:
    """What the environment set up for one run (env/ builds it; see env/__init__.py)."""

    workdir: Path                                   # where the workload keeps its files
    child_setup: Callable[[], None] = lambda: None  # run in each workload child after fork
    cgroup: dict[str, Any] | None = None            # {"version": 1|2, "path": "/sys/fs/cgroup/..."}
    devices: list[str] = field(default_factory=list)  # block devices under workdir: ["loop3"]
    memory_limit: int | None = None                 # bytes, when a memory cgroup limits the run
    metadata: dict[str, Any] = field(default_factory=dict)  # -> run.json["environment"]


@dataclass
class RunContext:
    """One run, as seen by workloads and monitors."""

    run_dir: Path
    env: EnvState
    duration_s: float
    journal: Journal | None
    processes: ProcessSet = field(default_factory=ProcessSet)
    t0_ns: int = 0        # CLOCK_MONOTONIC at run start; every t_ns/start_ns is relative to it
    stop: threading.Event = field(default_factory=threading.Event)
    notes: list[str] = field(default_factory=list)
    log: Callable[[str], None] = field(default=lambda text: print(text, file=sys.stderr,
                                                                  flush=True))
    # observers of the workload (monitors) that must act at its edges, without the workload
    # knowing them: see workload_starting() and workload_ended()
    on_start: list[Callable[[], None]] = field(default_factory=list)
    on_end: list[Callable[[], None]] = field(default_factory=list)

    @property
    def workdir(self) -> Path:
        return self.env.workdir

    def start_clock(self) -> None:
        self.t0_ns = time.monotonic_ns()

    def since_start_ns(self) -> int:
        return time.monotonic_ns() - self.t0_ns

    def workload_starting(self) -> None:
        """Called by a workload once its processes are registered and held at its start gate,
        just before it lets them go: a tracer attaches to them here, so that it sees the first
        op (polling for them would miss the first milliseconds). Once, like workload_ended."""
        hooks, self.on_start = self.on_start, []
        for hook in hooks:
            hook()

    def workload_ended(self) -> None:
        """Called by the runner as soon as the workload returned: sampling stops here, with
        the last op, not when each monitor's (possibly slow) stop() comes. Once: a second
        call finds no hooks."""
        hooks, self.on_end = self.on_end, []
        for hook in hooks:
            hook()
