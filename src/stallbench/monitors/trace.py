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
run is not slowed by parsing). Table `trace` (or `trace_full`) is a list of intervals:
t_ns (start, since run start), duration_ns, tid, comm, category (reclaim, throttle, dstate,
block, syscall), kind, stack (dstate: folded, leaf last), device, detail.
"""

from __future__ import annotations

import os
import re
import threading
import time
from typing import Any

import pyarrow as pa

from ..analysis import montables
from ..context import RunContext
from ..syscalls import header_for, names_unavailable, syscall_names
from ..tracefs import TracefsInstance, find_tracefs, mount_tracefs, tracefs_supported
from ._sampling import read_text
from .base import KEY, TIME, VALUE, Column, Monitor, MonitorResult, TableSchema

BASE_EVENTS = (
    "vmscan/mm_vmscan_direct_reclaim_begin", "vmscan/mm_vmscan_direct_reclaim_end",
    "vmscan/mm_vmscan_memcg_reclaim_begin", "vmscan/mm_vmscan_memcg_reclaim_end",
    "vmscan/mm_vmscan_throttled", "writeback/balance_dirty_pages", "sched/sched_switch",
    "sched/sched_wakeup",
)
SYSCALL_EVENTS = ("raw_syscalls/sys_enter", "raw_syscalls/sys_exit")
BLOCK_EVENTS = ("block/block_rq_issue", "block/block_rq_complete")
D_STATE_TRIGGER = "stacktrace if prev_state & 2"

# frames of the tracing machinery itself at the top of a sched_switch stack trace
_TRACE_FRAMES = {"trace_event_raw_event_sched_switch", "__traceiter_sched_switch",
                 "__schedule", "schedule", "__probestub_sched_switch"}


class TraceMonitor(Monitor):
    name = "trace"
    full = False
    table_name = "trace"

    def __init__(self, poll_s: float = 0.05, buffer_kb: int | None = None):
        self.poll_s = poll_s
        self.buffer_kb = buffer_kb or (32768 if self.full else 8192)
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
        events = list(BASE_EVENTS) + (list(SYSCALL_EVENTS + BLOCK_EVENTS) if cls.full else [])
        if root is not None:
            missing = [e for e in events
                       if not os.path.isdir(os.path.join(root, "events", e))]
            if "sched/sched_switch" in missing:
                return "tracefs has no sched_switch event"
            if len(missing) == len(events):
                return "none of the needed trace events exist on this kernel"
        return None

    # -- setup ----------------------------------------------------------------------------
    def start(self, ctx: RunContext) -> None:
        self._ctx = ctx
        self._root, self._mount_entry = mount_tracefs(ctx.journal)
        name = f"stallbench-{os.getpid()}-{time.monotonic_ns() % 1_000_000_000}"
        try:
            self._main = TracefsInstance(self._root, name, ctx.journal, self.buffer_kb)
            self._main.set_option("event-fork", "1")
            self._main.set_option("record-tgid", "1")
            events = list(BASE_EVENTS) + (list(SYSCALL_EVENTS) if self.full else [])
            for event in events:
                if self._main.has_event(event):
                    self._main.enable(event)
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
                    chunks.append(data)

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
        if self._thread is not None:
            self._thread.join(timeout=10)
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
        return MonitorResult(tables={self.table_name: table}, status=status,
                             schemas={self.table_name: TRACE})


class TraceFullMonitor(TraceMonitor):
    name = "trace-full"
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


# -- parsing ---------------------------------------------------------------------------------

_LINE = re.compile(r"^\s*(?P<comm>.*?)-(?P<tid>\d+)\s+(?:\(\s*(?P<tgid>[-\d]+)\)\s+)?"
                   r"\[(?P<cpu>\d+)\]\s+(?:\S+\s+)?(?P<sec>\d+)\.(?P<usec>\d+):\s+(?P<event>[^:]+?)(?::\s?(?P<body>.*))?$")
_FIELD = re.compile(r"(\w+)=(\S*)")


def _ts(match: re.Match[str]) -> int:
    usec = match["usec"]
    return int(match["sec"]) * 1_000_000_000 + int(usec) * 10 ** (9 - len(usec))


def parse_trace(text: str, t0_ns: int, workload: set[int] | None = None,
                syscall_names: dict[int, str] | None = None) -> list[dict[str, Any]]:
    """trace_pipe text of the main instance -> interval rows (see the module docstring).

    With `workload` (its pids and tids), only rows of those tasks are kept: set_event_pid
    records a sched_switch when either side is traced, so the task switched *away from* may be
    anyone's (a kworker, stallbench itself); its D-state sleep is not the workload's.
    `syscall_names` ({number: name}, see syscalls.py) names the syscall rows; a number not in
    it stays `syscall N`."""
    rows: list[dict[str, Any]] = []
    reclaim_open: dict[tuple[int, str], int] = {}
    sys_open: dict[int, tuple[int, int]] = {}
    d_open: dict[int, dict[str, Any]] = {}
    awaiting_stack: dict[int, dict[str, Any]] = {}
    stack_for: dict[str, Any] | None = None
    frames: list[str] = []
    tgids: dict[int, int] = {}

    def close_stack() -> None:
        nonlocal stack_for, frames
        if stack_for is not None:
            kept = [f for f in frames if f not in _TRACE_FRAMES]
            stack_for["stack"] = ";".join(reversed(kept))
        stack_for, frames = None, []

    for line in text.splitlines():
        if line.startswith(" =>"):
            if stack_for is not None:
                frames.append(line[3:].strip().split("+", 1)[0])
            continue
        match = _LINE.match(line)
        if not match:
            continue
        close_stack()
        tid, event, body = int(match["tid"]), match["event"].strip(), match["body"] or ""
        if match["tgid"] and match["tgid"].isdigit() and tid:
            tgids[tid] = int(match["tgid"])
        ts = _ts(match) - t0_ns
        comm = match["comm"].strip()
        if event == "<stack trace>":
            stack_for = awaiting_stack.pop(tid, None)
            continue
        if event == "sched_switch":
            fields = dict(_FIELD.findall(body.split(" ==> ")[0]))
            after = dict(_FIELD.findall(body.split(" ==> ")[-1]))
            prev, nxt = int(fields.get("prev_pid", -1)), int(after.get("next_pid", -1))
            if fields.get("prev_state", "").startswith("D"):
                row = {"t_ns": ts, "duration_ns": -1, "tid": prev, "comm": fields.get("prev_comm",
                       comm), "category": "dstate", "kind": "D", "stack": "", "device": "",
                       "detail": ""}
                rows.append(row)
                d_open[prev] = row
                awaiting_stack[prev] = row
            if nxt in d_open:  # switched back in without a recorded wake-up
                row = d_open.pop(nxt)
                row["duration_ns"] = ts - row["t_ns"]
            continue
        if event == "sched_wakeup":
            woken = int(dict(_FIELD.findall(body)).get("pid", -1))
            if woken in d_open:
                row = d_open.pop(woken)
                row["duration_ns"] = ts - row["t_ns"]
            continue
        if event.startswith("mm_vmscan_") and event.endswith(("_begin", "_end")):
            kind = "memcg reclaim" if "memcg" in event else "direct reclaim"
            if event.endswith("_begin"):
                reclaim_open[(tid, kind)] = ts
            elif (tid, kind) in reclaim_open:
                begin = reclaim_open.pop((tid, kind))
                rows.append({"t_ns": begin, "duration_ns": ts - begin, "tid": tid, "comm": comm,
                             "category": "reclaim", "kind": kind, "stack": "", "device": "",
                             "detail": body.strip()})
            continue
        if event == "mm_vmscan_throttled":
            fields = dict(_FIELD.findall(body))
            delayed = int(fields.get("usect_delayed", fields.get("usec_delayed", "0"))) * 1000
            reason = fields.get("reason", "").replace("VMSCAN_THROTTLE_", "").lower()
            rows.append({"t_ns": ts - delayed, "duration_ns": delayed, "tid": tid, "comm": comm,
                         "category": "throttle", "kind": f"vmscan throttled ({reason})",
                         "stack": "", "device": "", "detail": body.strip()})
            continue
        if event == "balance_dirty_pages":
            fields = dict(_FIELD.findall(body))
            pause = max(0, int(fields.get("pause", "0"))) * 1_000_000
            rows.append({"t_ns": ts, "duration_ns": pause, "tid": tid, "comm": comm,
                         "category": "throttle", "kind": "balance_dirty_pages", "stack": "",
                         "device": "", "detail": f"bdi={fields.get('bdi', '')}"})
            continue
        if event == "sys_enter":
            parts = body.split()
            if len(parts) >= 2 and parts[0] == "NR":
                sys_open[tid] = (ts, int(parts[1]))
            continue
        if event == "sys_exit" and tid in sys_open:
            begin, nr = sys_open.pop(tid)
            rows.append({"t_ns": begin, "duration_ns": ts - begin, "tid": tid, "comm": comm,
                         "category": "syscall",
                         "kind": f"syscall {(syscall_names or {}).get(nr, nr)}", "stack": "",
                         "device": "", "detail": str(nr)})
    close_stack()
    for row in rows:
        row["pid"] = tgids.get(row["tid"], row["tid"])
    if workload is not None:
        rows = [row for row in rows if row["tid"] in workload or row["pid"] in workload]
    return rows


_BLOCK = re.compile(r"^(?P<major>\d+),(?P<minor>\d+)\s+(?P<rwbs>\S+)\s+(?:\d+\s+)?\(.*?\)\s+"
                    r"(?P<sector>\d+)\s+\+\s+(?P<n>\d+)")


def parse_block_trace(text: str, t0_ns: int, names: dict[int, str]) -> list[dict[str, Any]]:
    """block_rq_issue/complete pairs (matched by device and sector) -> 'block' interval rows."""
    rows = []
    issued: dict[tuple[int, int], tuple[int, int, str, str, int]] = {}
    for line in text.splitlines():
        match = _LINE.match(line)
        if not match:
            continue
        event = match["event"].strip()
        block = _BLOCK.match(match["body"] or "")
        if block is None or event not in ("block_rq_issue", "block_rq_complete"):
            continue
        dev = (int(block["major"]) << 20) | int(block["minor"])
        key = (dev, int(block["sector"]))
        ts = _ts(match) - t0_ns
        if event == "block_rq_issue":
            issued[key] = (ts, int(match["tid"]), match["comm"].strip(), block["rwbs"],
                           int(block["n"]))
        elif key in issued:
            begin, tid, comm, rwbs, n = issued.pop(key)
            rows.append({"t_ns": begin, "duration_ns": ts - begin, "tid": tid, "comm": comm,
                         "category": "block", "kind": f"block {rwbs}", "stack": "",
                         "device": names.get(dev, f"{block['major']}:{block['minor']}"),
                         "detail": f"sectors={n}"})
    return rows


# trace and trace_full: one row per interval (its start and duration)
TRACE = TableSchema(
    "trace",
    (Column("t_ns", TIME, "ns since run start"), Column("duration_ns", VALUE, "ns"),
     Column("pid", KEY, "id", "int32"), Column("tid", KEY, "id", "int32"),
     *(Column(name, KEY, "text", "string")
       for name in ("comm", "category", "kind", "stack", "device", "detail"))),
    totals=montables.trace_totals)
_SCHEMA = TRACE.arrow()


def rows_to_table(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.table({f.name: pa.array([r.get(f.name) for r in rows], f.type) for f in _SCHEMA},
                    schema=_SCHEMA)


MONITORS = {cls.name: cls for cls in (TraceMonitor, TraceFullMonitor)}
