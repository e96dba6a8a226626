"""Workload `command`: any program, its system calls timed (one op per system call name).

`stallbench run command [--syscalls read,pread64] [--tracer auto|tracefs|strace] -- CMD ARGS`

Two tracers:
- tracefs (root; default when available): a private instance under
  /sys/kernel/tracing/instances with the syscalls:sys_enter_X / sys_exit_X events, filtered to
  the program's process tree with set_event_pid and the event-fork option, clock `mono` (so
  timestamps are the run's CLOCK_MONOTONIC). The program never stops; the cost is the event
  recording in the kernel (well under a µs per call). Text timestamps have µs resolution.
- strace -f -T -ttt (anyone): ptrace stops the program twice per call, which adds several µs to
  every call and slows system-call-heavy programs many times over; noted in run.json.

The program is started before the tracer is switched on and held at a gate (a pipe read in the
child before exec) so that nothing it does after exec is missed. The program runs until it exits
or ctx.duration_s passes (then it is sent SIGTERM, and SIGKILL 10 s later).

This module also holds the helpers the other external-program workloads (fio, pgbench) use:
starting a child in the variant's cgroup, waiting for it with its rusage, clock mapping.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import journal as journal_mod
from ..context import RunContext
from ..errors import UsageError
from ..importers.common import Samples
from ..importers.strace import StraceParser
from ..journal import Entry
from ..options import REMAINDER, option
from ..tracefs import TracefsInstance, find_tracefs, mount_tracefs, tracefs_supported
from .base import ProgressFn, Workload, WorkloadResult


# -- options: the one declaration of command's flags, plan keys, defaults and checks -----------
@dataclass
class CommandOptions:
    syscalls: Any = option(None, metavar="LIST",
                           help="comma-separated system calls to time (default: all)")
    tracer: str = option("auto", choices=("auto", "tracefs", "strace"),
                         help="tracefs (root, low overhead) or strace; auto picks tracefs when "
                              "it can")
    argv: Any = option(None, kind=REMAINDER, metavar="-- CMD ARGS", help="the command to run")
# ------------------------------------------------------------------------------------------------

STOP_GRACE_S = 10.0
STRACE_NOTE = ("timed with strace -f -T (ptrace): every system call pays strace's overhead (two "
               "stops of the traced process, typically several µs per call, far more for "
               "system-call-heavy programs); latencies have µs resolution")
TRACEFS_NOTE = ("timed with tracefs syscall enter/exit events (clock mono), filtered to the "
                "program's process tree: low overhead, µs resolution")


# ----------------------------------------------------------------------------------------------
# helpers shared with the fio and pgbench workloads


def clock_offset_ns() -> int:
    """time.time_ns() - time.monotonic_ns(), from the tightest of a few paired readings."""
    best = None
    offset = 0
    for _ in range(5):
        a = time.monotonic_ns()
        wall = time.time_ns()
        b = time.monotonic_ns()
        if best is None or b - a < best:
            best = b - a
            offset = wall - (a + b) // 2
    return offset


def child_preexec(ctx: RunContext, user: tuple[int, int] | None = None) -> Callable[[], None]:
    """preexec_fn: join the variant's cgroup, optionally drop to (uid, gid)."""
    setup = ctx.env.child_setup

    def preexec() -> None:
        setup()
        if user is not None:
            os.setgroups([])
            os.setgid(user[1])
            os.setuid(user[0])

    return preexec


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


def start_child(ctx: RunContext, argv: list[str], *, cwd: Path | None = None,
                stdout: Any = subprocess.DEVNULL, stderr: Any = subprocess.DEVNULL,
                user: tuple[int, int] | None = None, gate_fd: int | None = None,
                env: dict[str, str] | None = None) -> tuple[subprocess.Popen, Any]:
    """Start a workload process in its own session, registered with the ProcessSet and the
    journal (so `stallbench cleanup` kills it after a crash). Returns (process, journal entry)."""
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv, cwd=cwd, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL,
            start_new_session=True, preexec_fn=child_preexec(ctx, user),
            pass_fds=(gate_fd,) if gate_fd is not None else (), env=env)
    except FileNotFoundError as exc:
        raise UsageError(f"cannot run {argv[0]!r}: not found; install it or fix PATH") from exc
    except PermissionError as exc:
        raise UsageError(f"cannot run {argv[0]!r}: permission denied") from exc
    proc.started_monotonic = started  # type: ignore[attr-defined]
    ctx.processes.add(proc.pid)
    entry = None
    if ctx.journal is not None:
        # the generic "kill" kind: `stallbench cleanup` knows it without importing this module
        entry = ctx.journal.push("kill", pid=proc.pid,
                                 start_time=journal_mod.process_start_time(proc.pid))
    return proc, entry


def signal_group(proc: subprocess.Popen, sig: int) -> None:
    """Signal the process group the child leads (it was started in its own session)."""
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def wait_child(proc: subprocess.Popen, stop: threading.Event, *, deadline_ns: int | None = None,
               on_stop: Callable[[], None] | None = None, tick: Callable[[], None] | None = None,
               grace_s: float = STOP_GRACE_S) -> tuple[str | None, dict[str, float]]:
    """Wait for a child with wait4 (for its rusage), calling tick() about once a second.

    On ctx.stop or at the deadline: on_stop() (default SIGTERM to its group), then SIGKILL after
    grace_s. Returns (why it was stopped: None | "stop" | "deadline", rusage)."""
    stopped_why: str | None = None
    kill_at = None
    next_tick = time.monotonic() + 1.0
    started = getattr(proc, "started_monotonic", time.monotonic())
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            rusage = {"user_s": usage.ru_utime, "system_s": usage.ru_stime,
                      "elapsed_s": time.monotonic() - started}
            return stopped_why, rusage
        now = time.monotonic()
        if stopped_why is None and (stop.is_set() or (deadline_ns is not None
                                                      and time.monotonic_ns() >= deadline_ns)):
            stopped_why = "stop" if stop.is_set() else "deadline"
            (on_stop or (lambda: signal_group(proc, signal.SIGTERM)))()
            kill_at = now + grace_s
        if kill_at is not None and now >= kill_at:
            signal_group(proc, signal.SIGKILL)
            kill_at = None
        if tick is not None and now >= next_tick:
            tick()
            next_tick = now + 1.0
        time.sleep(0.05)


def progress_from_samples(samples: Samples, since: int) -> dict[str, tuple[int, int]]:
    """{op: (total count, max latency among samples[since:])} for the live display."""
    import numpy as np

    counts = samples.counts()
    codes = np.frombuffer(samples.op_codes, dtype=np.int32)[since:]
    latency = np.frombuffer(samples.latency_ns, dtype=np.int64)[since:]
    result = {}
    for code, name in enumerate(samples.op_names):
        recent = latency[codes == code]
        result[name] = (counts.get(name, 0), int(recent.max()) if len(recent) else 0)
    return result


# ----------------------------------------------------------------------------------------------
# tracefs


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
            return progress_from_samples(self.samples, since)

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


# ----------------------------------------------------------------------------------------------
# the workload


class CommandWorkload(Workload):
    Options = CommandOptions
    name = "command"
    ops = ()
    help = "run any command and time its system calls (tracefs as root, else strace)"

    def __init__(self, argv: list[str], syscalls: list[str] | None, tracer: str):
        self.argv = argv
        self.syscalls = syscalls
        self.tracer = tracer
        if syscalls:
            # the asked-for calls are this run's ops: one that never completes still shows
            self.ops = tuple(syscalls)
        self.exit_code: int | None = None
        self._clock_offset = 0

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> CommandWorkload:
        opts = cls.parse_options(options)
        argv = opts.argv or []
        if isinstance(argv, str):
            argv = shlex.split(argv)
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            raise UsageError("command: argv must be a list of strings or a command line")
        if argv and argv[0] == "--":
            argv = argv[1:]
        if not argv:
            raise UsageError("command: give the command to run after '--', e.g. "
                             "stallbench run command -- dd if=FILE of=/dev/null")
        if shutil.which(argv[0]) is None:
            raise UsageError(f"command: {argv[0]!r} not found (not executable or not on PATH)")
        syscalls = opts.syscalls
        if isinstance(syscalls, str):
            syscalls = [s.strip() for s in syscalls.split(",") if s.strip()]
        if syscalls is not None:
            if not isinstance(syscalls, list) or not syscalls:
                raise UsageError("command: --syscalls takes a comma-separated list, "
                                 "e.g. read,pread64")
            for name in syscalls:
                if not isinstance(name, str) or not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
                    raise UsageError(f"command: {name!r} is not a system call name")
        tracer = opts.tracer or "auto"
        if tracer not in ("auto", "tracefs", "strace"):
            raise UsageError("command: --tracer must be auto, tracefs or strace")
        if tracer == "tracefs":
            reason = tracefs_unavailable()
            if reason:
                raise UsageError(f"command: --tracer tracefs is not possible ({reason}); "
                                 "use --tracer strace")
        if tracer == "auto":
            tracer = "strace" if tracefs_unavailable() else "tracefs"
        if tracer == "strace" and shutil.which("strace") is None:
            raise UsageError("command: strace is not installed (apt install strace), and "
                             "tracefs needs root")
        root = find_tracefs()
        if tracer == "tracefs" and syscalls and root is not None:
            for name in syscalls:
                if not os.path.isdir(f"{root}/events/syscalls/sys_enter_{name}"):
                    raise UsageError(f"command: no system call {name!r} in "
                                     f"{root}/events/syscalls")
        return cls(list(argv), syscalls, tracer)

    def params(self) -> dict[str, Any]:
        return {"argv": self.argv, "syscalls": self.syscalls, "tracer": self.tracer}

    def prepare(self, ctx: RunContext) -> None:
        pass

    def run(self, ctx: RunContext, progress: ProgressFn) -> WorkloadResult:
        if self.tracer == "tracefs":
            samples, notes, stopped, rusage = self._run_tracefs(ctx, progress)
            shift_ns = 0        # already on the run clock
        else:
            samples, notes, stopped, rusage = self._run_strace(ctx, progress)
            # strace -ttt prints wall-clock time: put it on the run's monotonic clock
            shift_ns = self._clock_offset + ctx.t0_ns
        ctx.notes.extend(notes)
        status, reason = "complete", None
        if stopped == "stop":
            status, reason = "interrupted", "stopped before the command finished"
        elif stopped == "deadline":
            ctx.notes.append(f"the command was still running after {ctx.duration_s:g} s and "
                             "was stopped (SIGTERM)")
        elif self.exit_code:
            status, reason = "failed", f"the command exited with status {self.exit_code}"
        extra = {"exit_code": self.exit_code, "tracer": self.tracer,
                 "stopped": stopped, "counts": samples.counts()}
        return WorkloadResult(batches=samples.batches(shift_ns), counted=samples.counts(),
                              rusage=rusage, extra=extra, status=status, reason=reason)

    def _run_tracefs(self, ctx: RunContext, progress: ProgressFn):
        gate_r, gate_w = os.pipe()
        gate_fd = gate_r
        tracer = TracefsSyscalls(ctx, self.syscalls)
        notes = [TRACEFS_NOTE]
        try:
            proc, entry = start_child(ctx, gated_argv(self.argv, gate_r), cwd=ctx.workdir,
                                      stdout=subprocess.DEVNULL, gate_fd=gate_r)
            try:
                os.close(gate_r)
                gate_r = -1
                wait_at_gate(proc.pid, gate_fd)
                tracer.setup(proc.pid)
                os.write(gate_w, b"g")
                since = 0

                def tick() -> None:
                    nonlocal since
                    progress(tracer.progress(since))
                    since = len(tracer.samples)

                stopped, rusage = wait_child(
                    proc, ctx.stop, deadline_ns=ctx.t0_ns + int(ctx.duration_s * 1e9), tick=tick)
                self.exit_code = proc.returncode
            finally:
                signal_group(proc, signal.SIGKILL)
                if proc.returncode is None:
                    proc.wait()
                if entry is not None:
                    ctx.journal.forget(entry)
        finally:
            if gate_r >= 0:
                os.close(gate_r)
            os.close(gate_w)
            notes.extend(tracer.finish())
        return tracer.samples, notes, stopped, rusage

    def _run_strace(self, ctx: RunContext, progress: ProgressFn):
        log = ctx.run_dir / "strace.log"
        argv = ["strace", "-f", "-T", "-ttt", "-qq", "-o", str(log)]
        if self.syscalls:
            argv += ["-e", "trace=" + ",".join(self.syscalls)]
        offset = clock_offset_ns()
        parser = StraceParser(log, set(self.syscalls) if self.syscalls else None)
        tail = LineTail(log)

        def feed(final: bool = False) -> None:
            for lineno, line in tail.lines(final):
                parser.feed(lineno, line)

        since = 0

        def tick() -> None:
            nonlocal since
            feed()
            if parser.samples is not None:
                progress(progress_from_samples(parser.samples, since))
                since = len(parser.samples)

        proc, entry = start_child(ctx, argv + ["--", *self.argv], cwd=ctx.workdir,
                                  stdout=subprocess.DEVNULL)
        try:
            stopped, rusage = wait_child(
                proc, ctx.stop, deadline_ns=ctx.t0_ns + int(ctx.duration_s * 1e9), tick=tick)
        finally:
            signal_group(proc, signal.SIGKILL)
            if proc.returncode is None:
                proc.wait()
            if entry is not None:
                ctx.journal.forget(entry)
        self.exit_code = proc.returncode
        feed(final=True)
        samples = parser.samples or Samples("epoch")
        self._clock_offset = offset
        log.unlink(missing_ok=True)
        return samples, [STRACE_NOTE, *parser.notes()], stopped, rusage


class LineTail:
    """Complete lines appended to a file since the last call; the last partial line waits
    until `final` (the writer has exited)."""

    def __init__(self, path: Path):
        self.path = path
        self.f = None
        self.partial = ""
        self.lineno = 0

    def lines(self, final: bool = False) -> list[tuple[int, str]]:
        if self.f is None:
            try:
                self.f = open(self.path, encoding="utf-8", errors="replace", newline="")
            except FileNotFoundError:
                return []
        data = self.partial + self.f.read()
        parts = data.split("\n")
        self.partial = "" if final else parts.pop()
        result = []
        for part in parts:
            self.lineno += 1
            result.append((self.lineno, part.rstrip("\r")))
        if final:
            self.f.close()
        return result


WORKLOAD = CommandWorkload
