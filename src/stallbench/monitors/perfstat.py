"""perfstat: CPU counters of each of the workload's threads, counted by `perf stat`.

A monitor of its own rather than part of `profile`: counting takes no interrupt, no stack walk
and no data file (the kernel saves and restores the counters at each context switch), so it costs
far less than sampling (BENCHMARKS.md), and its numbers are exact counts, not samples.

`perf stat --per-thread` on every process of the run's ProcessSet, attached at the start gate
(monitors/perfrun.py): the software events (task-clock, context switches, CPU migrations, page
faults) always, and where the machine has a PMU the hardware ones (cycles, instructions, cache
misses, branch misses); without a PMU the status says so (`pmu`: false, `no_pmu`). Threads and
children made after the start are counted in the thread that made them once they exit (the
kernel's inherited counters).

Table `perfstat`: one row per thread and event: pid, tid, comm, event, count (task-clock in ns,
the others in events; null where perf could not count it), running (the share of the time the
event was on a counter: below 1 when the PMU multiplexed). The status keeps perf's own output
(`output`, the lines of `perf stat -x,`). The where section divides each worker role's counts by
its ops (analysis/where/perfstat.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from ..analysis import monitornames
from ..analysis.where.perfstat import HARDWARE_EVENTS, SOFTWARE_EVENTS, TASK_CLOCK, perf_totals
from ..core.context import RunContext
from . import perfrun
from .base import KEY, VALUE, Column, MonitorResult, TableSchema

PERFSTAT = TableSchema(
    "perfstat",
    (Column("pid", KEY, "id", "int32"), Column("tid", KEY, "id", "int32"),
     Column("comm", KEY, "text", "string"), Column("event", KEY, "text", "string"),
     Column("count", VALUE, "events", "int64"), Column("running", VALUE, "share", "float64")),
    totals=perf_totals)
_SCHEMA = PERFSTAT.arrow()
NOT_COUNTED = ("<not counted>", "<not supported>")
STAT_FILE = "stat.csv"          # perf stat's output, in the scratch folder


def stat_args(events: list[str], output: str) -> list[str]:
    return ["stat", "-x,", "--per-thread", "-e", ",".join(events), "-o", output]


def parse_stat(lines: Iterable[str], pid_of: dict[int, int]
               ) -> list[tuple[int, int, str, str, int | None, float | None]]:
    """`perf stat -x, --per-thread` lines ('COMM-TID,VALUE,UNIT,EVENT,RUNTIME,PERCENT,...') ->
    (pid, tid, comm, event, count, running) rows; task-clock (msec) in ns; the pid from
    pid_of[tid] (the thread's own id where it is not known)."""
    rows = []
    for line in lines:
        fields = line.rstrip("\n").split(",")
        if len(fields) < 6 or line.startswith("#"):
            continue
        comm, sep, tid_text = fields[0].rpartition("-")
        if not sep or not tid_text.isdigit():
            continue
        tid = int(tid_text)
        value, unit, event = fields[1].strip(), fields[2].strip(), fields[3].strip()
        event = event.split(":", 1)[0]          # "cycles:u" -> "cycles"
        count: int | None = None
        if value not in NOT_COUNTED:
            try:
                number = float(value)
            except ValueError:
                continue
            count = round(number * 1e6) if event == TASK_CLOCK and unit == "msec" \
                else round(number)
        try:
            running = float(fields[5]) / 100.0 if count is not None else None
        except ValueError:
            running = None
        rows.append((pid_of.get(tid, tid), tid, comm, event, count, running))
    return rows


class PerfStatMonitor(perfrun.PerfMonitor):
    name = monitornames.PERFSTAT

    def __init__(self) -> None:
        super().__init__()
        self._events: list[str] = list(SOFTWARE_EVENTS)
        self._pmu = False

    def start(self, ctx: RunContext) -> None:
        self._pmu = perfrun.has_pmu()
        self._events = list(SOFTWARE_EVENTS) + (list(HARDWARE_EVENTS) if self._pmu else [])
        self.attach_perf(ctx, lambda scratch: stat_args(self._events, str(scratch / STAT_FILE)),
                         "stat")

    def stop(self) -> MonitorResult:
        assert self._ctx is not None and self._scratch is not None and self._perf is not None
        perf, scratch = self._perf, self._scratch
        status: dict[str, Any] = {"events": self._events, "pmu": self._pmu,
                                  **self.base_status()}
        if not self._pmu:
            status["no_pmu"] = (f"no PMU here (perf stat -e {HARDWARE_EVENTS[0]}: not "
                                "supported): only the software events are counted")
        lines: list[str] = []
        try:
            perf.stop()
            if perf.counted:
                try:
                    lines = (scratch.path / STAT_FILE).read_text(errors="replace").splitlines()
                except OSError as exc:
                    perf.errors.append(f"perf stat wrote nothing: {exc.strerror}; "
                                       f"{perfrun.log_tail(scratch, 'stat')}")
                status["from_s"] = round((perf.attached_ns or 0) / 1e9, 3)
                status["to_s"] = round((perf.stopped_ns or 0) / 1e9, 3)
            elif not perf.errors:
                perf.errors.append("the workload never reached its start: nothing counted")
        finally:
            scratch.remove()
        rows = parse_stat(lines, {tid: pid for pid, tid in perf.tids})
        status["output"] = [line for line in lines if line.strip()]
        if perf.errors:
            status["errors"] = perf.errors
        return MonitorResult(tables={"perfstat": rows_to_table(rows)}, status=status,
                             schemas={"perfstat": PERFSTAT})


def rows_to_table(rows: list[tuple[int, int, str, str, int | None, float | None]]) -> pa.Table:
    return perfrun.rows_table(rows, _SCHEMA)


MONITORS = {PerfStatMonitor.name: PerfStatMonitor}
