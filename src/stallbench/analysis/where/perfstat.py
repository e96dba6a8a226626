"""The perfstat monitor's counts per worker role and per op: each thread's counts added up by
the role of its process, over the runs, divided by the ops the role recorded (all of them:
perf counts from the start gate to the last op, warm-up included, as the delays do); the
instructions per cycle where the PMU counted both. The events, declared once for the monitor
and the report. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from .section import RoleCounters

TASK_CLOCK = "task-clock"
CYCLES = "cycles"
INSTRUCTIONS = "instructions"
SOFTWARE_EVENTS = (TASK_CLOCK, "context-switches", "cpu-migrations", "page-faults")
HARDWARE_EVENTS = (CYCLES, INSTRUCTIONS, "cache-misses", "branch-misses")
# how the report names each event's count per op (task-clock: ns on a CPU)
EVENT_WORDS = {TASK_CLOCK: "on-CPU time (task-clock)", "context-switches": "context switches",
               "cpu-migrations": "CPU migrations", "page-faults": "page faults",
               CYCLES: "cycles", INSTRUCTIONS: "instructions", "cache-misses": "cache misses",
               "branch-misses": "branch misses"}


def perf_totals(columns: Mapping[str, np.ndarray], schema: Any = None) -> dict[str, Any]:
    """run.json's totals of a perfstat table: each event's count over the threads (events
    perf could not count left out)."""
    totals: dict[str, int] = {}
    for event, count in zip(np.asarray(columns["event"]).tolist(),
                            np.asarray(columns["count"], dtype=np.float64).tolist(),
                            strict=True):
        if not np.isnan(count):
            totals[event] = totals.get(event, 0) + int(count)
    return {"totals": totals}


def role_counts(events: Iterable[str], counts: Iterable[float], roles: Iterable[str]
                ) -> dict[str, dict[str, int]]:
    """One run's table rows (event, count, the thread's worker role) -> role -> event ->
    count; uncounted rows (NaN) are left out."""
    out: dict[str, dict[str, int]] = {}
    for event, count, role in zip(events, counts, roles, strict=True):
        if count is None or np.isnan(count):
            continue
        target = out.setdefault(role, {})
        target[event] = target.get(event, 0) + int(count)
    return out


def role_counters(per_run: Iterable[Mapping[str, Mapping[str, int]]],
                  ops_by_role: Mapping[str, int]) -> list[RoleCounters]:
    """The runs' role -> event -> count, added up, and per op of each role that recorded
    ops (a role without ops, such as other processes, keeps its counts without a per-op)."""
    merged: dict[str, dict[str, int]] = {}
    for run in per_run:
        for role, counts in run.items():
            target = merged.setdefault(role, {})
            for event, count in counts.items():
                target[event] = target.get(event, 0) + int(count)
    rows = []
    for role in sorted(merged, key=lambda r: (r not in ops_by_role, r)):
        counts = merged[role]
        ops = int(ops_by_role.get(role, 0))
        per_op = {event: count / ops for event, count in counts.items()} if ops else {}
        ipc = counts[INSTRUCTIONS] / counts[CYCLES] \
            if counts.get(CYCLES) and INSTRUCTIONS in counts else None
        rows.append(RoleCounters(role, ops, dict(counts), per_op, ipc))
    return rows
