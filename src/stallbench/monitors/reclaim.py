"""reclaim: every stall of the workload's tasks in memory reclaim and throttling, timed by the
kernel's own tracepoints (a default monitor).

Delay accounting says how long a task slept, and in what the kernel called the sleep: a sleep
in reclaim that ends in io_schedule (waiting on writeback, a congestion wait) is counted as a
block I/O wait, memcg reclaim is not counted as reclaim at all (taskstats' freepages covers only
the page allocator's direct reclaim), and dirty throttling's pauses are block I/O waits too. The
tracepoints bracket the stall itself, in the task's own context:

- vmscan: mm_vmscan_direct_reclaim_begin/end, mm_vmscan_memcg_reclaim_begin/end (the whole
  reclaim, on a CPU or asleep in it), mm_vmscan_throttled (reclaim_throttle's sleep, with its
  length);
- writeback: balance_dirty_pages (each dirty-throttling pause, with its planned length).

A private tracefs instance filtered to the workload's threads (monitors/trace.py's machinery,
without sched_switch and its stack traces): the events fire once per reclaim or pause, not per
op, so the monitor costs nothing a run can measure where nothing stalls (BENCHMARKS.md). Table
`reclaim`: the trace table's columns, categories `reclaim` and `throttle`; the where section
intersects its intervals with each op (compare/where/stalldata.py).
"""

from __future__ import annotations

from ..analysis import monitornames
from .trace import STALL_EVENTS, TraceMonitor


class ReclaimMonitor(TraceMonitor):
    name = monitornames.RECLAIM
    table_name = "reclaim"
    events = STALL_EVENTS
    required_event = "vmscan/mm_vmscan_direct_reclaim_begin"
    dstate_stacks = False
    max_held_bytes = 64 << 20

    def __init__(self, poll_s: float = 0.1, buffer_kb: int | None = None,
                 max_bytes: int | None = None):
        super().__init__(poll_s, buffer_kb or 1024, max_bytes)


MONITORS = {ReclaimMonitor.name: ReclaimMonitor}
