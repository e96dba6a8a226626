"""perf, the program, as the profile and perfstat monitors run it: whether it can run here,
whether the machine has a PMU, and one perf attached to the workload's processes.

perf is started when the workload's processes wait at its start gate (RunContext.on_start), on
every process of the run's ProcessSet (`-p`: perf follows the threads and children they make
later), with its events disabled (`-D -1`); the monitor then enables them through perf's control
FIFO and waits for perf's acknowledgement, so the first op is counted and the workload waits
for nothing longer than that (fio and pgbench, which have no start gate, call on_start once
their program is started: perf misses their first moments). Like every program stallbench starts,
perf is journaled (`kill`, by pid and start time) before it runs (core/startgate.py), dies with
stallbench where it was started from the main thread (PR_SET_PDEATHSIG), is not in the
workload's cgroup or ProcessSet, and is stopped with SIGINT (perf then writes what it holds)
when the workload ends (RunContext.on_end) or the run unwinds (the monitor's stop()).
Its files (data, output, FIFOs, log) are in a scratch folder of the run directory, journaled
(`rmtree`) before it is made and removed when the monitor stops.
"""

from __future__ import annotations

import ctypes
import functools
import os
import select
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..core.context import RunContext
from ..core.journal import Entry, process_start_time
from ..core.signals import held_while_starting
from ..core.startgate import StartGate
from .base import Monitor

PERF = "perf"
ACK_TIMEOUT_S = 60.0          # perf reads /proc and the symbol tables first (slow under TCG)
STOP_TIMEOUT_S = 30.0         # after SIGINT, perf writes its data and exits
PARANOID = "/proc/sys/kernel/perf_event_paranoid"
PR_SET_PDEATHSIG = 1


def perf_binary() -> str | None:
    return shutil.which(PERF)


def unavailable() -> str | None:
    """Why perf cannot sample or count the workload's kernel and user frames here, in one
    line naming the fix; None when it can."""
    if perf_binary() is None:
        return "perf is not installed (Debian: apt install linux-perf)"
    try:
        paranoid = int(Path(PARANOID).read_text())
    except (OSError, ValueError):
        return f"this kernel has no perf events ({PARANOID} missing: CONFIG_PERF_EVENTS)"
    if os.geteuid() != 0 and paranoid > 1:
        return (f"kernel.perf_event_paranoid is {paranoid}: the kernel's frames and counters "
                "need root or a value of 1 or less")
    return None


@functools.cache
def has_pmu() -> bool:
    """Whether the CPU's hardware cycles event counts here (`perf stat -e cycles true`: a VM
    without a virtual PMU, and a TCG guest, say `<not supported>`)."""
    binary = perf_binary()
    if binary is None:
        return False
    try:
        done = subprocess.run([binary, "stat", "-x,", "-e", "cycles", "true"],
                              capture_output=True, text=True, timeout=30,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return False
    for line in done.stderr.splitlines():
        fields = line.split(",")
        if len(fields) > 2 and fields[2].startswith("cycles"):
            return fields[0].strip().isdigit()
    return False


def _pdeathsig() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class Scratch:
    """The monitor's folder of the run directory (journaled before it is made)."""

    def __init__(self, ctx: RunContext, name: str):
        self.path = Path(ctx.run_dir) / f".stallbench-{name}"
        self._ctx = ctx
        self._entry = ctx.journal.push("rmtree", path=str(self.path.resolve())) \
            if ctx.journal is not None else None
        self.path.mkdir()

    def remove(self) -> None:
        if self._entry is not None and self._ctx.journal is not None:
            self._ctx.journal.undo(self._entry)
            self._entry = None
        else:
            shutil.rmtree(self.path, ignore_errors=True)


def _start(ctx: RunContext, argv: list[str], log: Path, stdout: int | None = None
           ) -> tuple[subprocess.Popen, Entry | None]:
    """perf started once journaled: its own session, never the workload's cgroup."""
    gate = StartGate()
    proc = None
    entry = None
    main = threading.current_thread() is threading.main_thread()
    try:
        with open(log, "ab") as err, held_while_starting():
            proc = subprocess.Popen(gate.command(argv), stdin=gate.stdin,
                                    stdout=subprocess.DEVNULL if stdout is None else stdout,
                                    stderr=err, start_new_session=True,
                                    preexec_fn=_pdeathsig if main else None)
            gate.started()
            if ctx.journal is not None:
                entry = ctx.journal.push("kill", pid=proc.pid, what="perf",
                                         start_time=process_start_time(proc.pid))
        gate.open()
    except BaseException:
        gate.close()
        if proc is not None:
            proc.kill()
            proc.wait()
            if entry is not None and ctx.journal is not None:
                ctx.journal.forget(entry)
        raise
    return proc, entry


def _log_tail(log: Path, lines: int = 3) -> str:
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return ""
    kept = [line.strip() for line in text.splitlines() if line.strip()
            and not line.startswith("Events ")]
    return "; ".join(kept[-lines:])


class AttachedPerf:
    """One perf (`perf record` or `perf stat`) on the workload's processes, counting from the
    moment attach() returns until stop()."""

    def __init__(self, ctx: RunContext, scratch: Scratch, args: Callable[[list[int]], list[str]],
                 what: str):
        """`args(pids)`: perf's arguments after the program name for these pids."""
        self._ctx = ctx
        self._scratch = scratch
        self._args = args
        self.what = what
        self.log = scratch.path / f"{what}.log"
        self.errors: list[str] = []
        self.pids: list[int] = []
        self.tids: list[tuple[int, int]] = []
        self.attached_ns: int | None = None
        self.stopped_ns: int | None = None
        self._proc: subprocess.Popen | None = None
        self._entry: Entry | None = None
        self._lock = threading.Lock()
        self._done = False

    def watch(self) -> None:
        """Attach at the workload's start gate; stop with the workload's last op."""
        self._ctx.on_start.append(self.attach)
        self._ctx.on_end.append(self.stop)

    def attach(self) -> None:
        with self._lock:
            if self._done or self._proc is not None:
                return
            for attempt in (1, 2):
                try:
                    self._attach_locked(attempt)
                    return
                except Exception as exc:  # noqa: BLE001 - a monitor never stops the run
                    self._kill_locked()
                    self._proc = None
                    # a process that exited between the listing and perf's attaching makes
                    # perf refuse the whole list: once more, with the processes there now
                    if attempt == 1 and self._ctx.processes.pids() != self.pids:
                        continue
                    self.errors.append(f"{self.what} did not start: {exc}")
                    self._done = True
                    return

    def _attach_locked(self, attempt: int) -> None:
        self.tids = self._ctx.processes.tids()
        self.pids = sorted({pid for pid, _tid in self.tids})
        if not self.pids:
            raise RuntimeError("the workload's processes were gone before perf started")
        binary = perf_binary() or PERF
        ctl = self._scratch.path / f"{self.what}-{attempt}.ctl"
        ack = self._scratch.path / f"{self.what}-{attempt}.ack"
        for fifo in (ctl, ack):
            os.mkfifo(fifo, 0o600)
        # both ends held by us (O_RDWR): neither open blocks, whenever perf opens its own
        ctl_fd = os.open(ctl, os.O_RDWR | os.O_CLOEXEC)
        ack_fd = os.open(ack, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            argv = [binary, *self._args(self.pids), "-D", "-1", "--control",
                    f"fifo:{ctl},{ack}"]
            self._proc, self._entry = _start(self._ctx, argv, self.log)
            os.write(ctl_fd, b"enable\n")
            self._wait_ack(ack_fd)
            self.attached_ns = time.monotonic_ns() - self._ctx.t0_ns
        finally:
            os.close(ctl_fd)
            os.close(ack_fd)

    def _wait_ack(self, fd: int) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + ACK_TIMEOUT_S
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.05)
            if ready and b"ack" in os.read(fd, 64):
                return
            if self._proc.poll() is not None:
                raise RuntimeError(f"perf exited ({self._proc.returncode}): "
                                   f"{_log_tail(self.log) or 'no message'}")
        raise RuntimeError(f"perf did not start counting within {ACK_TIMEOUT_S:g} s")

    def stop(self) -> None:
        """Stop perf (SIGINT: it writes what it holds and exits); later calls do nothing."""
        with self._lock:
            if self._done:
                return
            self._done = True
            if self._proc is None:
                return
            if self._proc.poll() is None:
                self._proc.send_signal(signal.SIGINT)
            try:
                self._proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.errors.append(f"perf did not exit within {STOP_TIMEOUT_S:g} s of SIGINT: "
                                   "killed, its data may be incomplete")
                self._kill_locked()
            self.stopped_ns = time.monotonic_ns() - self._ctx.t0_ns
            self._forget()

    def _kill_locked(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self._forget()

    def _forget(self) -> None:
        if self._entry is not None and self._ctx.journal is not None:
            self._ctx.journal.forget(self._entry)
        self._entry = None

    @property
    def counted(self) -> bool:
        return self.attached_ns is not None


def run_lines(ctx: RunContext, scratch: Scratch, argv: list[str], what: str,
              timeout_s: float = 600.0) -> Iterator[str]:
    """A perf command run to its end (journaled, its own session), its standard output line by
    line; RuntimeError when it fails or takes longer than timeout_s."""
    log = scratch.path / f"{what}.log"
    proc, entry = _start(ctx, [perf_binary() or PERF, *argv], log, stdout=subprocess.PIPE)
    timer = threading.Timer(timeout_s, proc.kill)
    timer.start()
    try:
        assert proc.stdout is not None
        for raw in proc.stdout:
            yield raw.decode(errors="replace")
        code = proc.wait()
        if timer.finished.is_set() and code != 0:
            raise RuntimeError(f"perf {argv[0]} took longer than {timeout_s:g} s")
        if code != 0:
            raise RuntimeError(f"perf {argv[0]} failed ({code}): {_log_tail(log)}")
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        if entry is not None and ctx.journal is not None:
            ctx.journal.forget(entry)


def log_tail(scratch: Scratch, what: str) -> str:
    return _log_tail(scratch.path / f"{what}.log")


class PerfMonitor(Monitor):
    """What the profile and perfstat monitors share: perf's availability, the scratch folder
    and one perf attached at the start gate (start() calls attach_perf with its arguments)."""

    def __init__(self) -> None:
        self._ctx: RunContext | None = None
        self._scratch: Scratch | None = None
        self._perf: AttachedPerf | None = None

    @classmethod
    def unavailable(cls, ctx: RunContext) -> str | None:
        return unavailable()

    def attach_perf(self, ctx: RunContext, args: Callable[[Path], list[str]], what: str) -> None:
        """Attach `perf ARGS -p PIDS` at the start gate; args(scratch folder) -> ARGS."""
        self._ctx = ctx
        self._scratch = Scratch(ctx, self.name)
        arguments = args(self._scratch.path)
        self._perf = AttachedPerf(ctx, self._scratch,
                                  lambda pids: [*arguments, "-p", ",".join(map(str, pids))],
                                  what)
        self._perf.watch()

    def base_status(self) -> dict[str, Any]:
        assert self._ctx is not None
        return {"workload_pids": self._ctx.processes.roots()}


def rows_table(rows: Sequence[tuple], schema: pa.Schema) -> pa.Table:
    """Rows of tuples, in the schema's column order, as a table of that schema."""
    columns = list(zip(*rows, strict=True)) if rows else [[] for _ in schema]
    return pa.table({field.name: pa.array(values, field.type)
                     for field, values in zip(schema, columns, strict=True)}, schema=schema)
