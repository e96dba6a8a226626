"""delay: per-task delay accounting over the taskstats generic-netlink interface, pure Python.

Every interval each workload thread is queried with TASKSTATS_CMD_GET (taskstats.py); in
addition a second socket registers for the exit records of all CPUs so that a thread's final
totals are kept even when it exits between two samples.

kernel.task_delayacct is switched on for the run and restored when the last delay monitor on the
machine is done (delayacct.py).

Table `delay`: t_ns, pid, tid, comm, born_in_run (the task started after the monitor, so its
totals all belong to the run), exited (row is the exit record), and per delay kind the count and
total in ns: cpu, blkio, swapin, freepages (direct reclaim), thrashing, compact, wpcopy, irq;
and `<kind>_max_ns`, the task's longest single delay of that kind so far (taskstats v16+, at the
end of struct taskstats; null on older kernels); and the task's I/O accounting `io_read_char`,
`io_write_char`, `io_read_syscalls`, `io_write_syscalls`, `io_read_bytes`, `io_write_bytes`
(bytes it read from the block layer: what tells a page-cache read from a device read); and
`oncpu_ns`, the task's time on a CPU (cpu_run_virtual_total: the scheduler's sum_exec_runtime,
what /proc/PID/task/TID/schedstat shows first), which bounds its block I/O waits
(analysis/where/delays.py: a task waiting for the device is off a CPU) and is each op's CPU side
(analysis/where/oncpu.py); `utime_ns` and `stime_ns` (ac_utime, ac_stime: tick-sampled), which
split that time into user space and the kernel.
Version 15 put max/min between the older fields, which moves every later field; v16 moved them
to the end, so a v15 kernel is refused with that reason rather than misread. run.json's
`totals_ns` (delay accrued during the run per kind, summed over tasks) and `max_ns` (the longest
single delay of each kind) are computed by analysis/montables.py from this table.
"""

from __future__ import annotations

import os
import struct
import threading
import time
from typing import Any

from ..analysis import monitornames, montables
from ..analysis.delaykinds import DELAY_KIND_NAMES
from ..core.context import RunContext
from ..core.journal import Journal
from ._sampling import RowStore, join_sampling, read_text, spill_dir
from .base import COUNTER, GAUGE, KEY, RUN_TIME, Column, Monitor, MonitorResult, TableSchema
from .delayacct import DELAYACCT_SYSCTL, DelayacctClaim, delayacct_dir, release_delayacct
from .taskstats import (
    BROKEN_LAYOUT_VERSION,
    CPU_SPLIT_AT,
    IO_FIELDS,
    TaskstatsSocket,
    decode_stats,
    max_unavailable,
)


def _online_cpus() -> str:
    return (read_text("/sys/devices/system/cpu/online") or f"0-{os.cpu_count() - 1}").strip()


def _start_ticks(pid: int, tid: int) -> int | None:
    text = read_text(f"/proc/{pid}/task/{tid}/stat")
    if not text:
        return None
    return int(text.rsplit(")", 1)[1].split()[19])


class DelayMonitor(Monitor):
    name = monitornames.DELAY

    def __init__(self, interval_s: float = 1.0):
        self.interval_s = interval_s
        self._rows = RowStore(schema=DELAY.arrow())
        self._known: dict[int, tuple[int, bool]] = {}   # tid -> (pid, born_in_run)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._journal_entry = None
        self._journal: Journal | None = None
        self._errors: list[str] = []
        self._query: TaskstatsSocket | None = None
        self._exits: TaskstatsSocket | None = None
        self._ctx: RunContext | None = None
        self._boot_ticks_at_start = 0
        self._claim: DelayacctClaim | None = None
        self._version: int | None = None

    @classmethod
    def unavailable(cls, ctx: RunContext) -> str | None:
        if os.geteuid() != 0:
            return "taskstats needs root (CAP_NET_ADMIN) and switching kernel.task_delayacct"
        if not os.path.exists(DELAYACCT_SYSCTL):
            return "kernel without delay accounting (no kernel.task_delayacct sysctl)"
        try:
            sock = TaskstatsSocket()
            try:
                raw = sock.get(os.getpid())
            finally:
                sock.close()
        except (OSError, KeyError) as exc:
            return f"taskstats generic-netlink family not available ({exc})"
        if raw is not None and struct.unpack_from("H", raw, 0)[0] == BROKEN_LAYOUT_VERSION:
            return ("taskstats version 15 (its max/min fields moved every later field; fixed "
                    "in version 16): not decoded, update the kernel")
        return None

    def start(self, ctx: RunContext) -> None:
        self._ctx = ctx
        self._journal = ctx.journal
        self._rows = RowStore(schema=DELAY.arrow(), spill_dir=spill_dir(ctx), name=self.name)
        self._claim = DelayacctClaim(delayacct_dir())
        if self._journal is not None:
            self._journal_entry = self._journal.push(
                "delayacct", dir=str(self._claim.directory), claim=self._claim.id)
        try:
            self._claim.acquire()
        except BaseException:
            self._claim = None
            if self._journal is not None and self._journal_entry is not None:
                self._journal.forget(self._journal_entry)
                self._journal_entry = None
            raise
        ticks_per_s = os.sysconf("SC_CLK_TCK")
        self._boot_ticks_at_start = int(time.clock_gettime(time.CLOCK_BOOTTIME) * ticks_per_s)
        self._query = TaskstatsSocket()
        try:
            self._exits = TaskstatsSocket()
            self._exits.register_exits(_online_cpus())
        except OSError as exc:
            self._errors.append(f"exit records unavailable: {exc}")
            self._exits = None
        self._sample()
        self._thread = threading.Thread(target=self._loop, name="stallbench-delay", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def _sample(self) -> None:
        assert self._ctx is not None and self._query is not None
        try:
            t_ns = self._ctx.since_start_ns()
            self._collect_exits(t_ns)
            for pid, tid in self._ctx.processes.tids():
                if tid not in self._known:
                    ticks = _start_ticks(pid, tid)
                    born = ticks is not None and ticks >= self._boot_ticks_at_start
                    self._known[tid] = (pid, born)
                raw = self._query.get(tid)
                if raw is not None:
                    self._add_row(t_ns, raw, exited=False)
        except Exception as exc:  # noqa: BLE001 - never crash the run
            if len(self._errors) < 5:
                self._errors.append(f"{type(exc).__name__}: {exc}")

    def _collect_exits(self, t_ns: int) -> None:
        if self._exits is None:
            return
        roots = set(self._ctx.processes.roots()) if self._ctx else set()
        for raw in self._exits.read_exit_records():
            stats = decode_stats(raw)
            tid = stats["tid"]
            if tid not in self._known and stats["tgid"] in roots | {
                    p for p, _ in self._known.values()}:
                # a thread of a known process that lived shorter than one interval
                self._known[tid] = (stats["tgid"], True)
            if tid in self._known:
                self._add_row(t_ns, raw, exited=True, stats=stats)

    def _add_row(self, t_ns: int, raw: bytes, exited: bool,
                 stats: dict[str, Any] | None = None) -> None:
        stats = stats or decode_stats(raw)
        tid = stats["tid"]
        pid, born = self._known.get(tid, (stats["tgid"] or tid, True))
        row = {"t_ns": t_ns, "pid": pid, "tid": tid, "comm": stats["comm"],
               "born_in_run": born, "exited": exited}
        row.update({k: v for k, v in stats.items()
                    if k.endswith(("_count", "_ns")) or k.startswith("io_")})
        self._version = stats["version"]
        self._rows.append(row)

    def stop(self) -> MonitorResult:
        self._stop.set()
        try:
            join_sampling(self._thread)
            if self._query is not None:
                self._sample()
                time.sleep(0.05)  # exit records of the last threads arrive asynchronously
                if self._ctx is not None:
                    self._collect_exits(self._ctx.since_start_ns())
        finally:
            for sock in (self._query, self._exits):
                if sock is not None:
                    sock.close()
            self._restore_sysctl()
        table = self._rows.table()
        self._rows.discard()
        status: dict[str, Any] = {"workload_pids": self._ctx.processes.roots() if self._ctx else [],
                                  "tasks": len(self._known), "samples": len(self._rows),
                                  "taskstats_version": self._version}
        reason = max_unavailable(self._version)
        if reason is not None:
            status["max_unavailable"] = reason
        if self._errors:
            status["errors"] = self._errors
        return MonitorResult(tables={"delay": table}, status=status, schemas={"delay": DELAY})

    def _restore_sysctl(self) -> None:
        if self._claim is None:
            return
        self._claim.drop()
        if self._journal is not None and self._journal_entry is not None:
            self._journal.undo(self._journal_entry)
            self._journal_entry = None
        else:
            release_delayacct(self._claim.directory)
        self._claim = None


DELAY = TableSchema(
    "delay",
    (RUN_TIME, Column("pid", KEY, "id", "int32"),
     Column("tid", KEY, "id", "int32"), Column("comm", KEY, "text", "string"),
     Column("born_in_run", KEY, "flag", "bool"), Column("exited", KEY, "flag", "bool"),
     *(Column(f"{kind}_{what}", COUNTER, unit) for kind in DELAY_KIND_NAMES
       for what, unit in (("count", "delays"), ("ns", "ns"))),
     # the task's longest single delay so far (v16+): a running maximum
     *(Column(f"{kind}_max_ns", GAUGE, "ns") for kind in DELAY_KIND_NAMES),
     Column("oncpu_ns", COUNTER, "ns"),
     *(Column(f"{name}_ns", COUNTER, "ns") for name in CPU_SPLIT_AT),
     *(Column(f"io_{name}", COUNTER, "calls" if name.endswith("syscalls") else "bytes")
       for name in IO_FIELDS)),
    totals=montables.delay_run_totals)


MONITORS = {DelayMonitor.name: DelayMonitor}
