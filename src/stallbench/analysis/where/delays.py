"""Delays attributed to the ops, not to the tasks' lifetimes: each task's (delays_in_ops), summed
per worker role (role_delays: the where section's RoleDelays), and the words delay accounting's
kinds take in a where line.

The delay monitor samples each task's cumulative delays about once a second. A worker's delays
between two samples happened inside its ops or between them (a paced writer's run-queue wait
after each wake-up from its pacing sleep is not op time). Between two samples a worker spent
`busy` ns in ops and `wall - busy` outside them, so of a delay `d` accrued in that step at
least `d - (wall - busy)` was inside the ops, and never more than `busy`: the lower bound is what
is attributed, so a kind's share of the op time is at most 100% by construction. A wait is
counted in the step in which it ends (the kernel adds it then); one longer than the step is
taken as at most the step's length, and run-queue and block I/O waits (never at the same time)
together as at most the step's op time.

A paced worker sleeps until each op's planned start: a plain sleep (clock_nanosleep), in which no
block I/O or run-queue wait can accrue. Between its ops a worker otherwise only keeps its records
in memory (the spool channel, results/oprecorder.py), so the time outside the ops in which a
wait can have fallen is `wall - busy - asleep`: the pacing sleeps are read back from
ops.parquet (each op's planned start against the end of the worker's previous op), and a paced
worker's block I/O waits inside its fsyncs are then its ops' own, while its run-queue waits
after each wake-up (between the planned start and the op's start) still are not.

A task waiting for the device is asleep, off a CPU, and not in a pacing sleep: over a task's
steps its block I/O waits inside the ops cannot exceed its wall time less its time on a CPU
(taskstats' sum_exec_runtime, which the scheduler keeps exactly) and its pacing sleeps. Where the
kernel accounted more, the share is cut to that room and the excess reported (seen in CI on a
fresh 6.18 VM: a checkpointer's block I/O waits 99% of its op time where its fsyncs, the only ops
that wait for the device, were 90% of it). Pure: numpy in, dicts out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..delaykinds import ASLEEP, DELAY_KIND_NAMES, DELAY_KINDS, ONE_STATE
from .section import DelayShare, RoleDelays, RoleIO

IMPOSSIBLE_RATE = 1.05          # waits accounted per second of a task's time beyond which they
#                                 are a kernel accounting fault (5% for sampling jitter)


def op_time_before(start: np.ndarray, latency: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """For ops of one worker (never overlapping: a worker does one op at a time), the op time
    spent before each edge (ns). Additive over disjoint sets of ops, so batches may be summed."""
    start = np.asarray(start, dtype=np.int64)
    latency = np.asarray(latency, dtype=np.int64)
    edges = np.asarray(edges, dtype=np.int64)
    if start.size == 0:
        return np.zeros(edges.size, np.float64)
    if start.size > 1 and np.any(np.diff(start) < 0):
        order = np.argsort(start, kind="stable")
        start, latency = start[order], latency[order]
    end = start + latency
    done = np.r_[0.0, np.cumsum(latency, dtype=np.float64)]
    # ops that ended by the edge, then the one in progress at it (at most one)
    finished = np.searchsorted(end, edges, side="right")
    result = done[finished]
    running = finished < start.size
    partial = np.zeros(edges.size, np.float64)
    index = np.minimum(finished, start.size - 1)
    partial[running] = np.clip(edges[running] - start[index[running]], 0,
                               latency[index[running]])
    return result + partial


def ops_before(end: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """For ops of one worker, how many had completed by each edge (additive over batches)."""
    return np.searchsorted(np.sort(np.asarray(end, dtype=np.int64)),
                           np.asarray(edges, dtype=np.int64), side="right").astype(np.float64)


def sleep_time_before(start: np.ndarray, latency: np.ndarray, intended: np.ndarray,
                      edges: np.ndarray, previous_end: int | None = None) -> np.ndarray:
    """For ops of one worker, the pacing sleep before each edge (ns): before each op whose
    planned start (`intended`, -1 or NaN where none: an Arrow column with nulls) is after the
    end of the worker's previous op, the worker slept from that end until the planned start (at
    most until the op started). `previous_end` is the end of the worker's op before these (an
    earlier batch)."""
    start = np.asarray(start, dtype=np.int64)
    latency = np.asarray(latency, dtype=np.int64)
    intended = np.asarray(intended)
    if intended.dtype.kind == "f":
        intended = np.where(np.isnan(intended), -1, intended)
    intended = intended.astype(np.int64)
    if start.size == 0:
        return np.zeros(np.asarray(edges).size, np.float64)
    order = np.argsort(start, kind="stable")
    start, latency, intended = start[order], latency[order], intended[order]
    ends = start + latency
    before = np.r_[previous_end if previous_end is not None else start[0], ends[:-1]]
    asleep_from = np.minimum(before, start)
    length = np.clip(np.minimum(intended, start) - asleep_from, 0, None)
    length[intended < 0] = 0
    return op_time_before(asleep_from, length, edges)


def delays_in_ops(t_ns: np.ndarray, busy_ns: np.ndarray, born: bool,
                  delays: Mapping[str, np.ndarray], first_wall_from: int | None,
                  asleep_ns: np.ndarray | None = None,
                  oncpu_ns: np.ndarray | None = None) -> TaskDelays:
    """One task's rows in time order -> its delays inside its ops (lower bounds), its op time
    over the steps counted, all delay accrued in those steps, and the kinds the kernel
    accounted impossibly (TaskDelays).

    `busy_ns[i]` is the task's op time before `t_ns[i]`, `asleep_ns[i]` its pacing sleep before
    it (None: not paced), `oncpu_ns[i]` its time on a CPU (None: not recorded);
    `first_wall_from` the time the task's first step starts from (its workers' start) when it
    was born in the run, else the first row only sets the baseline."""
    t = np.asarray(t_ns, dtype=np.float64)
    busy = np.asarray(busy_ns, dtype=np.float64)
    asleep = np.zeros(t.size) if asleep_ns is None else np.asarray(asleep_ns, dtype=np.float64)
    if t.size == 0:
        return TaskDelays({}, 0, {}, {}, {})
    if born:
        t_prev = np.r_[float(first_wall_from if first_wall_from is not None else t[0]), t[:-1]]
        busy_prev, asleep_prev = np.r_[0.0, busy[:-1]], np.r_[0.0, asleep[:-1]]
    else:
        t_prev, busy_prev, asleep_prev = t[:-1], busy[:-1], asleep[:-1]
        t, busy, asleep = t[1:], busy[1:], asleep[1:]
    wall = np.maximum(t - t_prev, 0.0)
    step_busy = np.clip(busy - busy_prev, 0.0, wall)
    step_asleep = np.clip(asleep - asleep_prev, 0.0, wall - step_busy)
    idle = wall - step_busy - step_asleep
    since_start = np.maximum(t, 0.0)
    lows: dict[str, np.ndarray] = {}
    accrued: dict[str, int] = {}
    impossible: dict[str, float] = {}
    for kind, column in delays.items():
        values = np.asarray(column, dtype=np.float64)
        if np.isnan(values).all():
            continue
        values = np.where(np.isnan(values), 0.0, values)
        if born:
            previous = np.r_[0.0, values[:-1]]
        else:
            previous, values = values[:-1], values[1:]
        step = values - previous
        ratio = accounted_per_second(step, wall)
        if ratio is not None:
            impossible[kind] = ratio
            continue
        # the whole-uptime step of a wait in flight when accounting was switched on, dropped
        step = np.where((step >= 0) & (step <= since_start * IMPOSSIBLE_RATE + 1e6), step, 0.0)
        lows[kind] = np.clip(np.minimum(step, wall) - idle, 0.0, step_busy)
        accrued[kind] = int(step.sum())
    # a task is either runnable (waiting for a CPU) or asleep (in block I/O), never both: where
    # waits that began in earlier steps make the two exceed the step's op time, scale them
    disjoint = [k for k in ONE_STATE if k in lows]
    if len(disjoint) > 1:
        together = sum(lows[k] for k in disjoint)
        scale = np.where(together > step_busy, step_busy / np.maximum(together, 1.0), 1.0)
        for k in disjoint:
            lows[k] = lows[k] * scale
    beyond: dict[str, tuple[int, int]] = {}
    room = None if oncpu_ns is None else \
        _off_cpu_room(np.asarray(oncpu_ns, dtype=np.float64), born, wall, step_asleep)
    for kind in ASLEEP:
        inside = float(lows[kind].sum()) if kind in lows else 0.0
        if room is not None and beyond_room(inside, room):
            beyond[kind] = (int(inside), int(room))
            lows[kind] = lows[kind] * (room / inside)
    return TaskDelays({k: int(v.sum()) for k, v in lows.items()}, int(step_busy.sum()),
                      accrued, impossible, beyond)


def beyond_room(accounted: float | np.ndarray, room: float | np.ndarray) -> bool | np.ndarray:
    """Waits accounted beyond the time they could have taken, past sampling jitter."""
    return accounted > room * IMPOSSIBLE_RATE + 1e6


def _off_cpu_room(oncpu: np.ndarray, born: bool, wall: np.ndarray, asleep: np.ndarray
                  ) -> float | None:
    """The time over the steps a task was neither on a CPU nor in a pacing sleep (ns), or None
    where its time on a CPU is not known for every row."""
    if oncpu.size == 0 or np.isnan(oncpu).any():
        return None
    previous, current = (np.r_[0.0, oncpu[:-1]], oncpu) if born else (oncpu[:-1], oncpu[1:])
    on = np.clip(current - previous, 0.0, wall)
    return float(np.clip(wall - on - asleep, 0.0, None).sum())


class TaskDelays(NamedTuple):
    inside: dict[str, int]          # kind -> delay ns that must have been inside the ops
    op_time_ns: int                 # the task's op time over the steps counted
    accrued: dict[str, int]         # kind -> all delay ns accrued in those steps
    impossible: dict[str, float]    # kind -> delay accounted per second of the task's time,
    #                                 where that exceeds one (the kind is left out of the rest)
    # kind -> (ns accounted inside the ops, the task's time off a CPU and not in a pacing
    # sleep): block I/O waits the kernel accounted beyond that room, cut to it
    beyond_off_cpu: dict[str, tuple[int, int]]


def accounted_per_second(step: np.ndarray, wall: np.ndarray) -> float | None:
    """A task waits at most as long as it exists: the delay a kind accrued over a task's steps,
    per second of their time, where that exceeds 1 (else None). The largest single step is
    left out: a wait that began before accounting was switched on is one step (dropped below),
    not a rate. Seen in CI on a fresh 6.18 VM: a throttled reader's block I/O waits accounted
    at 30 s per second, every step (here on the same kernel: 0.98). The likely cause, from the
    scheduler's source (not confirmed by a kernel build): with EEVDF's delayed dequeue (6.12+,
    sched feature DELAY_DEQUEUE) a task that blocks may stay queued and be dequeued later, at
    another task's pick (dequeue_entities -> __block_task), and __block_task's
    delayacct_blkio_start() stamps `current`, the task then scheduling, not the one blocking.
    The blocked task's wait is then timed from its own last stamp: zero for a new task (the
    uptime, dropped as one step), or a moment it was scheduling others' dequeues (a wait
    stretched over its CPU time and sleeps, which the time off a CPU bounds: module docstring)."""
    positive = np.clip(step, 0.0, None)
    total = float(wall.sum())
    if positive.size < 2 or total <= 0:
        return None
    beyond_one = float(positive.sum() - positive.max())
    if beyond_one <= total * IMPOSSIBLE_RATE + 1e6:
        return None
    return float(positive.sum()) / total


@dataclass
class RunDelays:
    """One run's delay table columns, who its tasks were, and each row's op time so far
    (`busy_ns`, NaN on rows of tasks that record no ops: threads other than a worker's)."""
    columns: Mapping[str, np.ndarray]
    role_of_pid: Mapping[int, str]
    busy_ns: np.ndarray
    started_ns: int | None = None
    asleep_ns: np.ndarray | None = None    # each row's pacing sleep so far (paced workers)
    done_ops: np.ndarray | None = None     # each row's ops completed so far
    data_start_ns: int | None = None       # where the run's statistics start (the warm-up's end)


def role_delays(runs: Sequence[RunDelays], ops_by_role: Mapping[str, int] | None = None
                ) -> list[RoleDelays]:
    """Delays per worker role over the runs, attributed to the ops (analysis/where/delays.py: the
    part that must have been inside them), each with its share of the role's op time over the
    same sampling steps (at most 1 by construction)."""
    inside: dict[str, dict[str, int]] = {}
    accrued: dict[str, dict[str, int]] = {}
    busy_by_role: dict[str, int] = {}
    io_by_role: dict[str, dict[str, int]] = {}
    impossible: dict[str, dict[str, float]] = {}
    beyond: dict[str, dict[str, list[int]]] = {}
    for run in runs:
        columns = run.columns
        tid = np.asarray(columns["tid"])
        pid = np.asarray(columns["pid"])
        t_ns = np.asarray(columns["t_ns"])
        born = np.asarray(columns["born_in_run"], dtype=bool)
        busy = np.asarray(run.busy_ns, dtype=np.float64)
        for task in np.unique(tid).tolist():
            rows = np.flatnonzero((tid == task) & np.isfinite(busy))
            role = run.role_of_pid.get(int(pid[rows[0]])) if rows.size else None
            if role is None:
                continue
            rows = rows[np.argsort(t_ns[rows], kind="stable")]
            kinds = {k: np.asarray(columns[f"{k}_ns"], dtype=np.float64)[rows]
                     for k in DELAY_KIND_NAMES if f"{k}_ns" in columns}
            task = delays_in_ops(
                t_ns[rows], busy[rows], bool(born[rows[0]]), kinds, run.started_ns,
                None if run.asleep_ns is None else np.asarray(run.asleep_ns)[rows],
                np.asarray(columns["oncpu_ns"], dtype=np.float64)[rows]
                if "oncpu_ns" in columns else None)
            busy_by_role[role] = busy_by_role.get(role, 0) + task.op_time_ns
            faults = impossible.setdefault(role, {})
            for kind, rate in task.impossible.items():
                faults[kind] = max(rate, faults.get(kind, 0.0))
            for kind, (accounted, room) in task.beyond_off_cpu.items():
                cut = beyond.setdefault(role, {}).setdefault(kind, [0, 0])
                cut[0] += accounted
                cut[1] += room
            io = io_by_role.setdefault(role, {})
            for name, value in _io_deltas(columns, rows, bool(born[rows[0]])).items():
                io[name] = io.get(name, 0) + value
            bucket = inside.setdefault(role, {})
            total = accrued.setdefault(role, {})
            for kind, value in task.inside.items():
                bucket[kind] = bucket.get(kind, 0) + value
                total[kind] = total.get(kind, 0) + task.accrued[kind]
    rows_out = []
    for role in sorted(inside):
        latency = busy_by_role.get(role, 0)
        faults = impossible.get(role, {})
        rows_out.append(RoleDelays(role, latency, {
            kind: DelayShare(accrued[role][kind], value / latency if latency else None, value)
            for kind, value in inside[role].items() if kind not in faults},
            io_by_role.get(role, {}), int((ops_by_role or {}).get(role, 0)), faults,
            beyond.get(role, {})))
    return rows_out


def role_io(delays: Sequence[RoleDelays]) -> dict[str, RoleIO]:
    """What device.py needs of each role: op time, block I/O waits in the ops, I/O."""
    return {row.role: RoleIO(row.ops_latency_ns, None if "blkio" in row.impossible
                             else row.delays["blkio"].in_ops_ns if "blkio" in row.delays else 0,
                             row.io) for row in delays}


def _io_deltas(columns: Mapping[str, np.ndarray], rows: np.ndarray, born: bool
               ) -> dict[str, int]:
    out = {}
    for name in columns:
        if not name.startswith("io_"):
            continue
        values = np.asarray(columns[name], dtype=np.float64)[rows]
        values = values[np.isfinite(values)]
        if values.size:
            out[name[3:]] = int(values[-1] - (0 if born else values[0]))
    return out


DELAY_WORDS = {k.name: k.spent for k in DELAY_KINDS if k.spent is not None}
