"""Numbers derived from the monitor tables, driven by each table's declaration.

One function per derived number, used both for run.json (monitors/base.py MonitorResult.summary,
through the table schema's `totals`) and for the report (compare/where/), so the two cannot
disagree.
Pure and vectorised: numpy columns in (rows in time order), plain dicts out, no I/O. A schema is
anything with `is_counter(name)` (monitors/base.py TableSchema).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import numpy as np

from .delaykinds import ASLEEP, DELAY_KIND_NAMES
from .stalltimeline import decimate
from .where.delays import IMPOSSIBLE_RATE, accounted_per_second, beyond_room
from .where.longest import longest_delays


class Declaration(Protocol):
    def is_counter(self, name: str) -> bool: ...


def series_ends(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(distinct keys sorted, index of each one's first row, of its last row)."""
    keys = np.asarray(keys)
    if keys.size == 0:
        empty = np.empty(0, np.int64)
        return keys, empty, empty
    unique, first = np.unique(keys, return_index=True)
    _, from_end = np.unique(keys[::-1], return_index=True)
    return unique, first, keys.size - 1 - from_end


def _joined(*parts: np.ndarray) -> np.ndarray:
    out = np.asarray(parts[0]).astype(str)
    for part in parts[1:]:
        out = np.char.add(np.char.add(out, "."), np.asarray(part).astype(str))
    return out


# -- counters -------------------------------------------------------------------------------


def counter_deltas(columns: Mapping[str, np.ndarray], cumulative: Iterable[str]) -> dict[str, int]:
    """Last minus first known value of each cumulative column (nulls dropped)."""
    deltas = {}
    for name in cumulative:
        values = np.asarray(columns[name], dtype=np.float64)
        known = values[~np.isnan(values)]
        if known.size >= 2:
            deltas[name] = int(known[-1] - known[0])
    return deltas


def declared_counters(columns: Mapping[str, np.ndarray], schema: Declaration) -> list[str]:
    return [name for name in columns if schema.is_counter(name)]


def counters_totals(columns: Mapping[str, np.ndarray], schema: Declaration) -> dict[str, Any]:
    """run.json: {"deltas": {counter: change during the run}} of the counters that moved."""
    deltas = counter_deltas(columns, declared_counters(columns, schema))
    return {"deltas": {name: value for name, value in deltas.items() if value != 0}}


def counter_series(t_s: np.ndarray, values: np.ndarray, cumulative: bool, points: int
                   ) -> dict[str, Any] | None:
    """A counter column as a plotted track: a cumulative counter as its rate per second between
    samples (at the step's middle; a counter that went backwards gives 0), a gauge as it is;
    at most `points` points (decimated), None with fewer than two known samples."""
    t_s = np.asarray(t_s, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    known = np.isfinite(values)
    if known.sum() < 2:
        return None
    tk, vk = t_s[known], values[known]
    if cumulative:
        dt = np.diff(tk)
        keep = dt > 0
        rate = np.maximum(np.diff(vk), 0)[keep] / dt[keep]
        ts, vs = decimate(((tk[1:] + tk[:-1]) / 2)[keep], rate, points)
        kind = "per second"
    else:
        ts, vs = decimate(tk, vk, points)
        kind = "value"
    return {"t_s": ts.tolist(), "values": vs.tolist(), "kind": kind}


# -- psi ------------------------------------------------------------------------------------


def psi_stall_totals(scope: np.ndarray, resource: np.ndarray, kind: np.ndarray,
                     total_ns: np.ndarray) -> dict[str, int]:
    """{"system.memory.some": stall ns during the run, ...} (last minus first per series)."""
    keys, first, last = series_ends(_joined(scope, resource, kind))
    total = np.asarray(total_ns, dtype=np.int64)
    return {str(k): int(total[b] - total[a]) for k, a, b in zip(keys, first, last, strict=True)}


def psi_totals(columns: Mapping[str, np.ndarray], schema: Declaration) -> dict[str, Any]:
    """run.json: {"stall_ns": {"system.memory.some_ns": ns, ...}}."""
    totals = psi_stall_totals(columns["scope"], columns["resource"], columns["kind"],
                              columns["total_ns"])
    return {"stall_ns": {f"{key}_ns": value for key, value in totals.items()}}


# -- diskstats ------------------------------------------------------------------------------


def device_deltas(device: np.ndarray, columns: Mapping[str, np.ndarray], counters: list[str]
                  ) -> dict[str, dict[str, int]]:
    """{device: {counter: last minus first}} for each device with two samples or more."""
    names, first, last = series_ends(np.asarray(device).astype(str))
    out = {}
    for name, a, b in zip(names, first, last, strict=True):
        if a != b:
            out[str(name)] = {c: int(np.asarray(columns[c])[b] - np.asarray(columns[c])[a])
                              for c in counters}
    return out


def diskstats_totals(columns: Mapping[str, np.ndarray], schema: Declaration) -> dict[str, Any]:
    """run.json: {"totals": {device: {counter: change during the run}}} (gauges left out)."""
    counters = declared_counters(columns, schema)
    return {"totals": device_deltas(columns["device"], columns, counters)}


# -- delay accounting -----------------------------------------------------------------------


def task_delays(tid: np.ndarray, born_in_run: np.ndarray, delays: Mapping[str, np.ndarray],
                t_ns: np.ndarray | None = None, impossible: dict[str, float] | None = None,
                oncpu_ns: np.ndarray | None = None, cut: dict[str, int] | None = None
                ) -> dict[int, dict[str, int]]:
    """{tid: {kind: ns accrued during the run}} from cumulative samples in time order.

    With sample times, each step between two samples counts only when it is possible: no
    more than the time since the run started (a wait is added when it ends, so one step may
    hold a wait that began samples earlier, but not before the run: the rule where/longest.py
    applies to maxima). A wait whose start the kernel did not record is reported from a zero
    start, i.e. the whole uptime (seen on 6.18: blkio 6035 s in a 20 s run; in CI, 31695 s in
    a 1.5 s run of a reader born after accounting was switched on, so not only a wait in flight
    at the switch); such a step is dropped, not summed. A task whose waits of a kind add
    up faster than time passes (where/delays.py accounted_per_second) has that kind left out: a
    kernel accounting fault, not a delay (`impossible`, if given, collects {kind: the largest
    rate}). With each row's time on a CPU (`oncpu_ns`), a task's block I/O waits beyond the time
    it was off a CPU (where/delays.py's rule) are cut to that time (`cut`, if given, collects
    {kind: ns cut})."""
    tid = np.asarray(tid)
    if tid.size == 0:
        return {}
    order = np.argsort(tid, kind="stable")
    tasks = tid[order]
    starts = np.flatnonzero(np.r_[True, tasks[1:] != tasks[:-1]])
    ends = np.r_[starts[1:], tasks.size] - 1
    segment = np.repeat(np.arange(starts.size), np.diff(np.r_[starts, tasks.size]))
    born = np.asarray(born_in_run, dtype=bool)[order][starts]
    at_start = np.zeros(tasks.size, bool)
    at_start[starts] = True
    per_kind: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for kind, column in delays.items():
        values = np.asarray(column, dtype=np.float64)[order]
        base = np.where(born, 0.0, np.nan_to_num(values[starts], nan=0.0))
        known = ~np.isnan(values[ends])
        if t_ns is None:
            accrued = np.maximum(0.0, values[ends] - base)
        else:
            filled = np.where(np.isnan(values), base[segment], values)
            previous = np.where(at_start, base[segment], np.r_[0.0, filled[:-1]])
            steps = filled - previous
            since_start = np.maximum(np.asarray(t_ns, dtype=np.float64)[order], 0)
            possible = (steps >= 0) & (steps <= since_start * IMPOSSIBLE_RATE + 1e6)
            accrued = np.add.reduceat(np.where(possible, steps, 0.0), starts)
            wall = np.where(at_start, since_start, np.r_[0.0, np.diff(since_start)])
            for i, (first, last) in enumerate(zip(starts, ends, strict=True)):
                rate = accounted_per_second(steps[first:last + 1], wall[first:last + 1])
                if rate is not None:
                    known = known.copy()
                    known[i] = False
                    if impossible is not None:
                        impossible[kind] = max(rate, impossible.get(kind, 0.0))
        if kind in ASLEEP and oncpu_ns is not None and t_ns is not None:
            room = _off_cpu_time(np.asarray(oncpu_ns, dtype=np.float64)[order],
                                 since_start, born, starts, ends)
            beyond = beyond_room(accrued, room)
            if beyond.any():
                if cut is not None:
                    cut[kind] = cut.get(kind, 0) + int((accrued - room)[beyond].sum())
                accrued = np.where(beyond, room, accrued)
        per_kind[kind] = (accrued, known)
    result: dict[int, dict[str, int]] = {}
    for i, task in enumerate(tasks[starts].tolist()):
        result[int(task)] = {kind: int(accrued[i]) for kind, (accrued, known) in per_kind.items()
                             if known[i]}
    return result


def _off_cpu_time(oncpu: np.ndarray, since_start: np.ndarray, born: np.ndarray,
                  starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Per task, its time over the samples (from the run's start when born in it) less its
    time on a CPU: infinite where a row has no time on a CPU (a run recorded before oncpu_ns)."""
    wall = since_start[ends] - np.where(born, 0.0, since_start[starts])
    on = oncpu[ends] - np.where(born, 0.0, oncpu[starts])
    room = np.clip(wall - on, 0.0, None)
    unknown = np.isnan(oncpu[ends]) | (~born & np.isnan(oncpu[starts]))
    return np.where(unknown, np.inf, room)


def delay_columns(columns: Mapping[str, np.ndarray], kinds: Iterable[str],
                  suffix: str = "_ns") -> dict[str, np.ndarray]:
    return {k: np.asarray(columns[f"{k}{suffix}"], dtype=np.float64) for k in kinds
            if f"{k}{suffix}" in columns}


def delay_totals(columns: Mapping[str, np.ndarray], kinds: Iterable[str],
                 impossible: dict[str, float] | None = None, cut: dict[str, int] | None = None
                 ) -> dict[str, int]:
    """Sum over tasks of each delay accrued during the run (task_delays' rule)."""
    kinds = list(kinds)
    totals = dict.fromkeys(kinds, 0)
    per_task = task_delays(columns["tid"], columns["born_in_run"],
                           delay_columns(columns, kinds), columns["t_ns"], impossible,
                           columns.get("oncpu_ns"), cut)
    for delays in per_task.values():
        for kind, value in delays.items():
            totals[kind] += value
    return totals


def delay_longest(columns: Mapping[str, np.ndarray], kinds: Iterable[str]
                  ) -> dict[str, dict[str, Any]] | None:
    """analysis/where/longest.py's longest single delays, or None when no row has a maximum (a
    kernel before taskstats v16, or no rows)."""
    kinds = list(kinds)
    maxima = delay_columns(columns, kinds, "_max_ns")
    if not maxima or all(np.isnan(v).all() for v in maxima.values()):
        return None
    return longest_delays(np.asarray(columns["tid"]), np.asarray(columns["born_in_run"]),
                          maxima, delay_columns(columns, kinds, "_count"),
                          np.asarray(columns["t_ns"]), delay_columns(columns, kinds))


def delay_run_totals(columns: Mapping[str, np.ndarray], schema: Declaration) -> dict[str, Any]:
    """run.json: {"totals_ns": {kind: ns}, "max_ns": {kind: longest}} (no max_ns where the
    kernel records no maxima); the kinds are analysis/delaykinds.py's whose `<kind>_ns` counter
    the table declares (not its other `_ns` columns: oncpu_ns is no delay)."""
    kinds = [name[:-3] for name in columns if name.endswith("_ns")
             and name[:-3] in DELAY_KIND_NAMES and schema.is_counter(name)]
    impossible: dict[str, float] = {}
    cut: dict[str, int] = {}
    out: dict[str, Any] = {"totals_ns": delay_totals(columns, kinds, impossible, cut)}
    if impossible:     # kind -> waits accounted per second of a task's time, left out
        out["impossible_per_s"] = impossible
    if cut:            # kind -> waits accounted beyond the tasks' time off a CPU, cut
        out["beyond_off_cpu_ns"] = cut
    longest = delay_longest(columns, kinds)
    if longest is not None:
        out["max_ns"] = longest
    return out


# -- trace ----------------------------------------------------------------------------------


def trace_totals(columns: Mapping[str, np.ndarray], schema: Declaration) -> dict[str, Any]:
    """run.json: {"events": {kind: rows}, "total_ns": {kind: summed duration}}."""
    kinds = np.asarray(columns["kind"]).astype(str)
    duration = np.maximum(np.asarray(columns["duration_ns"], dtype=np.int64), 0)
    names, first, inverse = np.unique(kinds, return_index=True, return_inverse=True)
    counts = np.bincount(inverse, minlength=names.size)
    sums = np.bincount(inverse, weights=duration, minlength=names.size)
    order = np.argsort(first)  # in the order the kinds first occur
    return {"events": {str(names[i]): int(counts[i]) for i in order},
            "total_ns": {str(names[i]): int(sums[i]) for i in order}}
