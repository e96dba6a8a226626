"""trace / trace-full: tracepoints of the workload's threads in stallbench's own tracefs instance.

Never touches the global buffer: an instance instances/stallbench-<pid>-<n> is created (and
recorded in the journal before that, so `stallbench cleanup` removes it after kill -9); tracefs
is mounted if it is not (also journaled). Events, filtered to the workload's threads through
set_event_pid (kept up to date as threads appear; event-fork follows children):

- vmscan: mm_vmscan_direct_reclaim_begin/end, mm_vmscan_memcg_reclaim_begin/end,
  mm_vmscan_throttled (today's congestion_wait);
- writeback: balance_dirty_pages;
- sched: sched_switch, with a kernel stack trace when a thread goes to sleep in D state, and
  sched_wakeup, which closes the D interval (the switch back in closes it when no wake-up was
  recorded; on this kernel idle->task switches are not reported under set_event_pid, wake-ups
  are).

trace-full adds raw_syscalls sys_enter/sys_exit of the workload (named from the kernel's
syscall table for this architecture, syscalls.py) and, in a second instance that
is not filtered by pid (completions run in interrupt context), block_rq_issue/complete of the
workload's devices. It perturbs the run: the report says so.

set_event_pid keeps a sched_switch when either side is traced, so the task switched away from
(and its D state) may be anyone's: at parse time only rows of the workload's tasks (the tids
added, the children the kernel followed, by tid or tgid) are kept, for every event of the main
instance. Block requests (trace-full) are per device: they are issued and completed by whoever
runs at the time, so they are kept for the workload's devices whatever the task.

The buffer is drained from trace_pipe during the run (raw bytes kept, parsed at stop so that the
run is not slowed by parsing), up to a cap (max_held_bytes, at most 1/16 of the memory available
at the start: parsing at stop needs about six times the text): past it the events are still
read from the kernel's buffer, counted and dropped; the status says how many and from when, and
so does a note of the run. Table `trace` (or `trace_full`) is a list of intervals:
t_ns (start, since run start), duration_ns, tid, comm, category (reclaim, throttle, dstate,
block, syscall), kind, stack (dstate: folded, leaf last), device, detail.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pyarrow as pa

from ..analysis import monitornames, montables
from ..analysis.display import format_size
from ..core.context import RunContext
from ..core.syscalls import header_for, names_unavailable, syscall_names
from ..core.tracefs import TracefsInstance, find_tracefs, mount_tracefs, tracefs_supported
from ..env.sysmem import meminfo
from ..logformats.ftrace import (
    cut_at_event,
    event_count,
    first_event_ns,
    parse_block_trace,
    parse_trace,
)
from ._sampling import join_sampling, read_text
from .base import KEY, RUN_TIME, VALUE, Column, Monitor, MonitorResult, TableSchema

# the stalls a task takes in memory reclaim and throttling, each one event or a begin/end pair
# in the task's own context (so set_event_pid filters them): the reclaim monitor's whole set
STALL_EVENTS = (
    "vmscan/mm_vmscan_direct_reclaim_begin", "vmscan/mm_vmscan_direct_reclaim_end",
    "vmscan/mm_vmscan_memcg_reclaim_begin", "vmscan/mm_vmscan_memcg_reclaim_end",
    "vmscan/mm_vmscan_throttled", "writeback/balance_dirty_pages",
)
BASE_EVENTS = (*STALL_EVENTS, "sched/sched_switch", "sched/sched_wakeup")
SYSCALL_EVENTS = ("raw_syscalls/sys_enter", "raw_syscalls/sys_exit")
BLOCK_EVENTS = ("block/block_rq_issue", "block/block_rq_complete")
D_STATE_TRIGGER = "stacktrace if prev_state & 2"



class TraceMonitor(Monitor):
    name = monitornames.TRACE
    full = False
    table_name = "trace"
    events: tuple[str, ...] = BASE_EVENTS
    required_event = "sched/sched_switch"     # without it the monitor says why and is skipped
    dstate_stacks = True                      # a stack trace of each sleep in D state
    max_held_bytes = 256 << 20                # raw text held for stop(): an fsync loop's
                                              # D-state stacks make 5 MB/s here

    def __init__(self, poll_s: float = 0.05, buffer_kb: int | None = None,
                 max_bytes: int | None = None):
        self.poll_s = poll_s
        self.buffer_kb = buffer_kb or (32768 if self.full else 8192)
        self.max_bytes = max_bytes              # None: decided at start
        self._held = 0
        self._dropped_bytes = self._dropped_events = 0      # past the cap
        self._dropped_from_ns: int | None = None
        self._ctx: RunContext | None = None
        self._main: TracefsInstance | None = None
        self._block: TracefsInstance | None = None
        self._main_chunks: list[bytes] = []
        self._block_chunks: list[bytes] = []
        self._pids: set[int] = set()          # tids added to set_event_pid
        self._tasks: set[int] = set()         # ... and every task the kernel followed
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._errors: list[str] = []
        self._mount_entry = None
        self._root: str | None = None
        self._devices: dict[str, int] = {}
        self._lock = threading.Lock()          # the polling thread and the workload's start
        self._halted = False

    @classmethod
    def unavailable(cls, ctx: RunContext) -> str | None:
        if os.geteuid() != 0:
            return "tracing needs root"
        root = find_tracefs()
        if root is None and not tracefs_supported():
            return "kernel has no tracefs"
        events = list(cls.events) + (list(SYSCALL_EVENTS + BLOCK_EVENTS) if cls.full else [])
        if root is not None:
            missing = [e for e in events
                       if not os.path.isdir(os.path.join(root, "events", e))]
            if cls.required_event in missing:
                return f"tracefs has no {cls.required_event.split('/')[-1]} event"
            if len(missing) == len(events):
                return "none of the needed trace events exist on this kernel"
        return None

    # -- setup ----------------------------------------------------------------------------
    def start(self, ctx: RunContext) -> None:
        self._ctx = ctx
        if self.max_bytes is None:
            self.max_bytes = min(self.max_held_bytes, meminfo()["MemAvailable"] // 16)
        self._root, self._mount_entry = mount_tracefs(ctx.journal)
        name = f"stallbench-{os.getpid()}-{time.monotonic_ns() % 1_000_000_000}"
        try:
            self._main = TracefsInstance(self._root, name, ctx.journal, self.buffer_kb)
            self._main.set_option("event-fork", "1")
            self._main.set_option("record-tgid", "1")
            events = list(self.events) + (list(SYSCALL_EVENTS) if self.full else [])
            for event in events:
                if self._main.has_event(event):
                    self._main.enable(event)
            if self.dstate_stacks:
                self._main.set_trigger("sched/sched_switch", D_STATE_TRIGGER)
            if self.full:
                self._devices = _device_numbers(ctx.env.devices)
                self._block = TracefsInstance(self._root, name + "-blk", ctx.journal,
                                              self.buffer_kb)
                dev_filter = " || ".join(f"dev == {n}" for n in self._devices.values())
                for event in BLOCK_EVENTS:
                    self._block.enable(event, dev_filter or None)
                self._block.on()
        except BaseException:
            self._teardown()
            raise
        ctx.on_start.append(self._poll)   # the workload's tasks traced before their first op
        ctx.on_end.append(self._halt)
        self._thread = threading.Thread(target=self._loop, name="stallbench-trace", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            self._poll()

    def _poll(self) -> None:
        with self._lock:
            self._poll_locked()

    def _halt(self) -> None:
        """The workload ended: record no more (stop() drains and parses later)."""
        with self._lock:
            self._halted = True
            for instance in (self._main, self._block):
                if instance is not None:
                    instance.off()

    def _poll_locked(self) -> None:
        assert self._ctx is not None and self._main is not None
        try:
            fresh = [] if self._halted else [
                tid for _pid, tid in self._ctx.processes.tids() if tid not in self._pids]
            if fresh:
                self._main.add_pids(fresh)
                if not self._pids:
                    self._main.on()  # only now: an empty set_event_pid would trace everyone
                self._pids.update(fresh)
            if self._pids:
                self._tasks |= self._pids | self._main.event_pids()
            self._drain()
        except Exception as exc:  # noqa: BLE001 - never crash the run
            if len(self._errors) < 5:
                self._errors.append(f"{type(exc).__name__}: {exc}")

    def _drain(self) -> None:
        # raw bytes only: parsing waits for stop() so that it does not slow the run
        for instance, chunks in ((self._main, self._main_chunks),
                                 (self._block, self._block_chunks)):
            if instance is not None:
                data = instance.drain()
                if data:
                    self._hold(chunks, data)

    def _hold(self, chunks: list[bytes], data: bytes) -> None:
        """Keep `data` up to the cap; from the first event past it on, every event is dropped
        (of both instances: the table covers the run up to one time)."""
        room = 0 if self._dropped_from_ns is not None else (self.max_bytes or 0) - self._held
        if len(data) > room:
            cut = cut_at_event(data, room)
            if self._dropped_from_ns is None:
                self._dropped_from_ns = first_event_ns(data[cut:]) or time.monotonic_ns()
            self._dropped_bytes += len(data) - cut
            self._dropped_events += event_count(data[cut:])
            data = data[:cut]
        if data:
            chunks.append(data)
            self._held += len(data)

    # -- teardown ---------------------------------------------------------------------------
    def _teardown(self) -> None:
        for instance in (self._main, self._block):
            if instance is not None:
                instance.off()
        self._drain()
        for instance in (self._main, self._block):
            if instance is not None:
                try:
                    instance.remove()
                except OSError as exc:
                    self._errors.append(f"removing {instance.path}: {exc}")
        if self._mount_entry is not None and self._ctx is not None and self._ctx.journal:
            self._ctx.journal.undo(self._mount_entry)
            self._mount_entry = None

    def stop(self) -> MonitorResult:
        self._stop.set()
        try:
            join_sampling(self._thread)
        except RuntimeError:
            self._teardown()
            raise
        lost = 0
        if self._main is not None:
            self._poll()
            lost = self._main.lost_events() + (self._block.lost_events() if self._block else 0)
        self._teardown()
        main_text = b"".join(self._main_chunks).decode(errors="replace")
        block_text = b"".join(self._block_chunks).decode(errors="replace")
        t0 = self._ctx.t0_ns if self._ctx else 0
        workload = self._tasks | set(self._ctx.processes.roots() if self._ctx else [])
        names = syscall_names() if self.full else {}
        rows = parse_trace(main_text, t0, workload, names)
        if block_text:
            names = {n: d for d, n in self._devices.items()}
            rows += parse_block_trace(block_text, t0, names)
        table = rows_to_table(rows)
        status: dict[str, Any] = {"lost_events": lost, "threads": len(self._pids),
                                  "workload_pids": self._ctx.processes.roots() if self._ctx
                                  else [],
                                  "perturbs_run": self.full}
        if self.full:
            status["syscall_names"] = names_unavailable() or f"{len(names)} from {header_for()}"
        if self._errors:
            status["errors"] = self._errors
        if self._dropped_from_ns is not None:
            status.update(self._dropped_status(t0))
        return MonitorResult(tables={self.table_name: table}, status=status,
                             schemas={self.table_name: TRACE})

    def _dropped_status(self, t0_ns: int) -> dict[str, Any]:
        """The status past the cap, and the run's note that says it."""
        since_s = max(0, (self._dropped_from_ns or t0_ns) - t0_ns) / 1e9
        if self._ctx is not None:
            self._ctx.notes.append(
                f"{self.name} monitor: {self._dropped_events} trace events "
                f"({format_size(self._dropped_bytes)}) from "
                f"{since_s:.1f} s on were dropped, past the {format_size(self.max_bytes or 0)} "
                f"of trace text it holds: its table covers the run up to {since_s:.1f} s")
        return {"dropped_events": self._dropped_events, "dropped_bytes": self._dropped_bytes,
                "dropped_from_s": round(since_s, 3), "max_bytes": self.max_bytes}


class TraceFullMonitor(TraceMonitor):
    name = monitornames.TRACE_FULL
    full = True
    table_name = "trace_full"


def _device_numbers(devices: list[str]) -> dict[str, int]:
    """device name -> the kernel's internal dev_t (major << 20 | minor) used in trace filters."""
    result = {}
    for device in devices:
        text = (read_text(f"/sys/class/block/{device}/dev") or "").strip()
        if ":" in text:
            major, minor = (int(x) for x in text.split(":"))
            result[device] = (major << 20) | minor
    return result


# trace and trace_full: one row per interval (its start and duration)
TRACE = TableSchema(
    "trace",
    (RUN_TIME, Column("duration_ns", VALUE, "ns"),
     Column("pid", KEY, "id", "int32"), Column("tid", KEY, "id", "int32"),
     *(Column(name, KEY, "text", "string")
       for name in ("comm", "category", "kind", "stack", "device", "detail"))),
    totals=montables.trace_totals)
_SCHEMA = TRACE.arrow()


def rows_to_table(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.table({f.name: pa.array([r.get(f.name) for r in rows], f.type) for f in _SCHEMA},
                    schema=_SCHEMA)


MONITORS = {cls.name: cls for cls in (TraceMonitor, TraceFullMonitor)}
