"""System-call tracers of the command workload: a private tracefs instance (TracefsSyscalls) or
strace, and the start gate that holds the program before exec until tracing is on.

- tracefs (root; default when available): a private instance under
  /sys/kernel/tracing/instances with the syscalls:sys_enter_X / sys_exit_X events, filtered to
  the program's process tree with set_event_pid and the event-fork option, clock `mono` (so
  timestamps are the run's CLOCK_MONOTONIC). The program never stops; the cost is the event
  recording in the kernel (well under a µs per call). Text timestamps have µs resolution.
- strace -f -T -ttt (anyone): ptrace stops the program twice per call, which adds several µs to
  every call and slows system-call-heavy programs many times over; noted in run.json. Its output
  is read by logformats/strace.py.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import threading
import time
from pathlib import Path

from ..core.context import RunContext
from ..core.errors import UsageError
from ..core.journal import Entry
from ..core.tracefs import TracefsInstance, find_tracefs, mount_tracefs, tracefs_supported
from ..logformats.samples import Samples

STRACE_NOTE = ("timed with strace -f -T (ptrace): every system call pays strace's overhead (two "
               "stops of the traced process, typically several µs per call, far more for "
               "system-call-heavy programs); latencies have µs resolution")
TRACEFS_NOTE = ("timed with tracefs syscall enter/exit events (clock mono), filtered to the "
                "program's process tree: low overhead, µs resolution")


# Popen waits until its child has exec'd, so the gate must be in the exec'd program: a Python
# that waits for one byte on fd N and then execs the command (its only traced calls are the end
# of that read, which has no traced start and is dropped, and the execve).
_GATE = ("import os, sys; fd = int(sys.argv[1]); os.set_inheritable(fd, False); "
         "os.read(fd, 1); os.execv(sys.argv[2], sys.argv[2:])")


def gated_argv(argv: list[str], gate_fd: int) -> list[str]:
    resolved = shutil.which(argv[0]) or argv[0]
    return [sys.executable, "-c", _GATE, str(gate_fd), resolved, *argv[1:]]


def wait_at_gate(pid: int, gate_fd: int, timeout_s: float = 30.0) -> None:
    """Wait until the gate process sleeps in read(gate_fd): from then on, tracing it records
    nothing of Python's start-up."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            fields = Path(f"/proc/{pid}/syscall").read_text().split()
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return  # gone: the caller sees it exit
        if len(fields) > 1 and fields[0] != "running" and int(fields[1], 16) == gate_fd \
                and state == "S":
            return
        time.sleep(0.002)
    raise RuntimeError(f"the command's start gate (pid {pid}) did not block within {timeout_s} s")


def strace_argv(log: Path, syscalls: list[str] | None) -> list[str]:
    """strace's command line, up to the "--" before the program."""
    argv = ["strace", "-f", "-T", "-ttt", "-qq", "-o", str(log)]
    if syscalls:
        argv += ["-e", "trace=" + ",".join(syscalls)]
    return argv


_TRACE_LINE_RE = re.compile(
    r"^\s*(?P<comm>.*?)-(?P<tid>\d+)\s+(?:\(\s*[-\d]+\)\s+)?\[(?P<cpu>\d+)\]\s+"
    r"(?:\S+\s+)?(?P<ts>\d+)\.(?P<us>\d{6}):\s+sys_(?P<name>\w+?)(?P<exit> -> |\()"
)


def tracefs_unavailable() -> str | None:
    """Why the tracefs path cannot work here, or None. An unmounted tracefs is fine: the run
    mounts it (journaled) and unmounts it afterwards."""
    if os.geteuid() != 0:
        return "not root"
    root = find_tracefs()
    if root is None:
        return None if tracefs_supported() else "the kernel has no tracefs"
    return _missing_tracefs_features(root)


def _missing_tracefs_features(root: str) -> str | None:
    if not os.path.isdir(f"{root}/events/syscalls"):
        return "the kernel has no syscalls trace events (CONFIG_FTRACE_SYSCALLS)"
    if not os.path.exists(f"{root}/options/event-fork"):
        return "tracefs has no event-fork option"
    return None


class TracefsSyscalls:
    """A private tracefs instance recording syscall enter/exit of one process tree."""

    def __init__(self, ctx: RunContext, syscalls: list[str] | None):
        self.ctx = ctx
        self.syscalls = syscalls
        self.instance: TracefsInstance | None = None
        self.samples = Samples("mono")
        self.pending: dict[tuple[int, str], int] = {}
        self.unmatched_exits = 0
        self._buffer = b""
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._done = threading.Event()
        self._mount_entry: Entry | None = None

    def setup(self, pid: int) -> None:
        root, self._mount_entry = mount_tracefs(self.ctx.journal)
        missing = _missing_tracefs_features(root)
        if missing is None and self.syscalls:
            missing = next((f"no system call {name!r} in {root}/events/syscalls"
                            for name in self.syscalls
                            if not os.path.isdir(f"{root}/events/syscalls/sys_enter_{name}")),
                           None)
        if missing:
            raise UsageError(f"command: {missing}; use --tracer strace")
        instance_name = f"stallbench-command-{os.getpid()}-{time.time_ns()}"
        self.instance = instance = TracefsInstance(root, instance_name, self.ctx.journal, 16384)
        instance.set_option("event-fork", "1")
        instance.add_pids([pid])
        if self.syscalls is None:
            instance.enable("syscalls")
        else:
            for name in self.syscalls:
                instance.enable(f"syscalls/sys_enter_{name}")
                instance.enable(f"syscalls/sys_exit_{name}")
        instance.open_pipe()
        self._thread = threading.Thread(target=self._reader, name="tracefs-reader", daemon=True)
        self._thread.start()
        instance.on()

    def _reader(self) -> None:
        assert self.instance is not None
        while not self._done.is_set():
            self.instance.wait_readable(0.2)
            self._drain()

    def _drain(self) -> None:
        assert self.instance is not None
        chunk = self.instance.drain()
        if not chunk:
            return
        with self._lock:
            lines = (self._buffer + chunk).split(b"\n")
            self._buffer = lines.pop()
            for line in lines:
                self._parse(line.decode("utf-8", "replace"))

    def _parse(self, line: str) -> None:
        match = _TRACE_LINE_RE.match(line)
        if match is None:
            return
        tid = int(match["tid"])
        name = match["name"]
        when = int(match["ts"]) * 1_000_000_000 + int(match["us"]) * 1_000
        if match["exit"] == "(":
            self.pending[(tid, name)] = when
            return
        start = self.pending.pop((tid, name), None)
        if start is None:
            self.unmatched_exits += 1
            return
        self.samples.add(name, tid, start - self.ctx.t0_ns, when - start)

    def progress(self, since: int) -> dict[str, tuple[int, int]]:
        with self._lock:
            return self.samples.progress(since)

    def finish(self) -> list[str]:
        """Stop recording, read what is left, remove the instance; returns notes."""
        instance = self.instance
        if instance is None:
            return []
        notes = []
        instance.off()
        self._done.set()
        if self._thread is not None:
            self._thread.join()
        self._drain()
        lost = instance.lost_events()
        if lost:
            notes.append(f"tracefs lost {lost} events (ring buffer overrun): counts are "
                         "incomplete")
        if self.pending:
            notes.append(f"{len(self.pending)} system call(s) had not returned when tracing "
                         "stopped: not counted")
        instance.remove()
        self.instance = None
        if self._mount_entry is not None and self.ctx.journal is not None:
            self.ctx.journal.undo(self._mount_entry)      # we mounted tracefs: unmount it
            self._mount_entry = None
        return notes
