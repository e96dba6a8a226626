"""Each op's CPU side, the seed's first question before any sleep is looked for: "there is no
significant increase of spent cpu cycles - therefore I watched out how the read call could end up
in sleeps". Per worker role: its time on a CPU per op, in the kernel and in user space, per KiB
its read and write calls moved, and the share of its op time that was on a CPU; per candidate
their changes with intervals; and the where line's first clause, whether the added op time was
spent on a CPU or waiting. Pure.

Source: the delay monitor's samples of each worker's main thread (the task that does the ops;
monitors/delay.py): `oncpu_ns`, the scheduler's sum_exec_runtime (exact); `stime_ns` and
`utime_ns` (taskstats ac_stime/ac_utime: the scheduler tick's samples, whose ratio splits the exact
time, each step's own); `io_read_char` + `io_write_char` (the bytes the task's read and
write calls moved); and each sample's ops so far and op time so far, from ops.parquet
(compare/where/facts.py).

Per sampling step (about 1 s) a worker spent `busy` in its ops, `asleep` in pacing sleeps and the
rest, `idle`, between them (keeping its records). Its time on a CPU per op is all of its time on a
CPU over the steps counted divided by the ops it completed in them: the op's cost with the loop
around it (a few clock reads in randread's C loop, the interpreter in the Python workers), as
"cycles per op" is read in kernel work. Of a step's time on a CPU `on`, at least on - idle was
inside the ops (all of the idle time can have been on a CPU) and at most `busy`: that lower bound
is what the where line compares with the added op time, as delays.py attributes waits.

Steps count from the run's warm-up on (the first whose middle lies after `data_start_ns`; all
where none does), so that a cold start's CPU (the page cache filling) is not averaged into the
steady state the latencies are compared in.

Intervals, per statistic (time on a CPU, system and user time per op, time on a CPU per KiB):
the two-level model of intervals.py, each run's steps its time blocks (a ratio estimator), with
CPU_RUN_TO_RUN_SD as the prior; where the runs are too short for a run's own variance (fewer
than 8 steps) and each side has 2+ runs, a Welch t interval on the runs' log values (their
spread is the whole variance). With one short run a side: no interval.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .. import intervals as iv
from ..display import format_ns
from ..runstats import RunStatistic, ratio_statistic
from .delays import RunDelays
from .section import CpuChange, RoleCpu

# what a step records of a worker: time on a CPU, of it surely in the ops, in the kernel, in
# user space (split by the tick's samples), the ops completed, their op time, the KiB moved
STEP_FIELDS = ("oncpu", "in_ops", "system", "user", "ops", "busy", "kib")
# the statistics with intervals: name -> (numerator, denominator) of STEP_FIELDS, and words
CPU_STATS = {
    "oncpu_per_op": ("oncpu", "ops", "time on a CPU per op"),
    "system_per_op": ("system", "ops", "system time per op"),
    "user_per_op": ("user", "ops", "user time per op"),
    "oncpu_per_kib": ("oncpu", "kib", "time on a CPU per KiB read or written"),
}
# run-to-run sd of the log of a time on a CPU per op where no runs show it: that of a mean
# latency in the A/A table (intervals.RUN_TO_RUN_SD), which cached reads' CPU time per op
# follows (each op all on a CPU)
CPU_RUN_TO_RUN_SD = iv.RUN_TO_RUN_SD["mean"]
ON_CPU_LEADS = 0.5      # the added op time was on a CPU when at least this share of it was
MOSTLY_WAITING = 0.1    # below this share on a CPU the added time was "spent waiting"
ONE_SIDE = 0.75         # system (or user) time is "the kernel" (or "user space") beyond this share


@dataclass
class RoleSteps:
    """One run's steps of one worker role (its workers' steps summed by sample time)."""
    columns: dict[str, np.ndarray]      # STEP_FIELDS -> per step
    split: bool                         # system and user time were recorded
    moved: bool                         # bytes moved were recorded

    def total(self, name: str) -> float:
        return float(self.columns[name].sum())


def cpu_steps(runs: Sequence[RunDelays]) -> dict[str, list[RoleSteps]]:
    """role -> each run's steps of its workers (RunDelays: the delay table and each row's ops so
    far), counted from the run's warm-up on."""
    out: dict[str, list[RoleSteps]] = {}
    for run in runs:
        columns = run.columns
        if "oncpu_ns" not in columns or run.done_ops is None:
            continue
        tid = np.asarray(columns["tid"])
        pid = np.asarray(columns["pid"])
        t_ns = np.asarray(columns["t_ns"], dtype=np.float64)
        born = np.asarray(columns["born_in_run"], dtype=bool)
        busy = np.asarray(run.busy_ns, dtype=np.float64)
        by_role: dict[str, list[tuple[np.ndarray, dict[str, np.ndarray]]]] = {}
        split = all(f"{k}_ns" in columns for k in ("utime", "stime"))
        moved = all(f"io_{k}" in columns for k in ("read_char", "write_char"))
        for task in np.unique(tid).tolist():
            rows = np.flatnonzero((tid == task) & np.isfinite(busy))
            role = run.role_of_pid.get(int(pid[rows[0]])) if rows.size else None
            if role is None:
                continue
            rows = rows[np.argsort(t_ns[rows], kind="stable")]
            steps = _task_steps(run, rows, bool(born[rows[0]]), split, moved)
            if steps is not None:
                by_role.setdefault(role, []).append(steps)
        for role, tasks in by_role.items():
            ends = np.unique(np.concatenate([t for t, _ in tasks]))
            summed = {name: np.zeros(ends.size) for name in STEP_FIELDS}
            for t, values in tasks:
                at = np.searchsorted(ends, t)
                for name in STEP_FIELDS:
                    np.add.at(summed[name], at, values[name])
            out.setdefault(role, []).append(RoleSteps(summed, split, moved))
    return out


def _task_steps(run: RunDelays, rows: np.ndarray, born: bool, split: bool, moved: bool
                ) -> tuple[np.ndarray, dict[str, np.ndarray]] | None:
    """One worker's steps after the warm-up: (each step's end, STEP_FIELDS -> per step)."""
    columns = run.columns

    def column(name: str) -> np.ndarray:
        return np.nan_to_num(np.asarray(columns[name], dtype=np.float64)[rows])

    t = np.asarray(columns["t_ns"], dtype=np.float64)[rows]
    cumulative = {
        "oncpu": column("oncpu_ns"),
        "system": column("stime_ns") if split else np.zeros(rows.size),
        "user": column("utime_ns") if split else np.zeros(rows.size),
        "ops": np.nan_to_num(np.asarray(run.done_ops, dtype=np.float64)[rows]),
        "busy": np.asarray(run.busy_ns, dtype=np.float64)[rows],
        "kib": (column("io_read_char") + column("io_write_char")) / 1024.0 if moved
        else np.zeros(rows.size),
    }
    asleep = np.zeros(rows.size) if run.asleep_ns is None else \
        np.nan_to_num(np.asarray(run.asleep_ns, dtype=np.float64)[rows])
    if born:
        start = float(run.started_ns if run.started_ns is not None else t[0])
        t_prev = np.r_[start, t[:-1]]
        steps = {k: np.diff(np.r_[0.0, v]) for k, v in cumulative.items()}
        slept = np.diff(np.r_[0.0, asleep])
        ends = t
    else:
        if rows.size < 2:
            return None
        t_prev, ends = t[:-1], t[1:]
        steps = {k: np.diff(v) for k, v in cumulative.items()}
        slept = np.diff(asleep)
    wall = np.maximum(ends - t_prev, 0.0)
    steps = {k: np.clip(v, 0.0, None) for k, v in steps.items()}
    steps["oncpu"] = np.minimum(steps["oncpu"], wall)
    # the exact time on a CPU split by the ticks' ratio (each alone drifts by a tick a step)
    ticks = steps["system"] + steps["user"]
    kernel = np.divide(steps["system"], ticks, out=np.zeros(ticks.size), where=ticks > 0)
    steps["system"] = steps["oncpu"] * kernel
    steps["user"] = np.where(ticks > 0, steps["oncpu"] - steps["system"], 0.0)
    steps["busy"] = np.minimum(steps["busy"], wall)
    idle = np.clip(wall - steps["busy"] - np.clip(slept, 0.0, None), 0.0, None)
    steps["in_ops"] = np.clip(steps["oncpu"] - idle, 0.0, steps["busy"])
    keep = np.ones(ends.size, dtype=bool)
    if run.data_start_ns is not None:
        after = (t_prev + ends) / 2 >= run.data_start_ns
        if after.any():
            keep = after
    return ends[keep], {k: steps[k][keep] for k in STEP_FIELDS}


def role_cpu(steps: Mapping[str, Sequence[RoleSteps]]) -> list[RoleCpu]:
    """Each role's CPU side over its runs' steps."""
    out = []
    for role, runs in sorted(steps.items()):
        split = all(r.split for r in runs)
        moved = all(r.moved for r in runs)
        total = {name: sum(r.total(name) for r in runs) for name in STEP_FIELDS}
        out.append(RoleCpu(role, int(total["ops"]), int(total["busy"]), int(total["oncpu"]),
                           int(total["in_ops"]),
                           int(total["user"]) if split else None,
                           int(total["system"]) if split else None,
                           int(total["kib"] * 1024) if moved else None, len(runs)))
    return out


def cpu_changes(base: Mapping[str, Sequence[RoleSteps]],
                candidate: Mapping[str, Sequence[RoleSteps]]) -> dict[str, list[CpuChange]]:
    """role -> the change of each CPU_STATS statistic, candidate against baseline, with its
    interval where the runs give one (module docstring)."""
    out: dict[str, list[CpuChange]] = {}
    for role in sorted(set(base) & set(candidate)):
        rows = []
        for stat, (numerator, denominator, _words) in CPU_STATS.items():
            sides = [_side(runs, numerator, denominator) for runs in (base[role], candidate[role])]
            if any(side is None for side in sides):
                continue
            (b_value, b_stats), (c_value, c_stats) = sides
            change = _change(b_value, c_value, b_stats, c_stats)
            rows.append(CpuChange(stat, b_value, c_value, change.change, change.low,
                                  change.high))
        out[role] = rows
    return out


def _side(runs: Sequence[RoleSteps], numerator: str, denominator: str
          ) -> tuple[float, list[RunStatistic]] | None:
    """(the pooled ratio, each run's statistic), or None where a run lacks the fields."""
    if numerator in ("system", "user") and not all(r.split for r in runs):
        return None
    if denominator == "kib" and not all(r.moved for r in runs):
        return None
    top = sum(r.total(numerator) for r in runs)
    bottom = sum(r.total(denominator) for r in runs)
    if bottom <= 0 or top <= 0:
        return None
    return top / bottom, [ratio_statistic(r.columns[numerator], r.columns[denominator])
                          for r in runs]


def _change(base_value: float, value: float, base: list[RunStatistic],
            candidate: list[RunStatistic]) -> iv.Change:
    estimate = value / base_value - 1.0
    data_dof = len(base) + len(candidate) - 2
    change = iv.two_level_change(estimate, base, candidate,
                                 iv.assumed_prior(CPU_RUN_TO_RUN_SD, data_dof))
    if change.low is not None or len(base) < 2 or len(candidate) < 2 or \
            any(r.log_value is None for r in base + candidate):
        return change
    # runs too short for their own variance: their spread is the whole of it
    logs = [np.array([r.log_value for r in side]) for side in (candidate, base)]
    _, low, high = iv.combine_log_se(*((float(x.mean()), float(x.std(ddof=1) / np.sqrt(x.size)),
                                        x.size - 1) for x in logs))
    if not (np.isfinite(low) and np.isfinite(high)):
        return change
    return iv.Change(estimate, low, high, iv.p_value_from_interval(estimate, low, high))


@dataclass(frozen=True)
class CpuAnswer:
    """The where line's first clause for an op: was its added time on a CPU?"""
    share: float        # of the added op time, on a CPU inside the ops
    leads: bool         # at least ON_CPU_LEADS of it: the CPU is the cause
    text: str


def cpu_answer(here: RoleCpu, base: RoleCpu, changes: Sequence[CpuChange], added_ns: float
               ) -> CpuAnswer | None:
    """Of the op's added time per op (`added_ns`: its mean grew by that much), the share that
    was on a CPU inside the ops, and the clause that says so: "98% of the added op time was on a
    CPU, in the kernel (system time +7.9 µs per op; time on a CPU per op +68% [+60%, +75%])", or
    "the added time was spent waiting (time on a CPU per op +1% [-3%, +5%])"; None where the op
    time did not grow or either side counted no ops."""
    if added_ns <= 0 or not here.ops or not base.ops:
        return None
    share = (here.in_ops_ns / here.ops - base.in_ops_ns / base.ops) / added_ns
    overall = _change_words(next((c for c in changes if c.stat == "oncpu_per_op"), None))
    if share >= ON_CPU_LEADS:
        place, split = _where_on_cpu(here, base)
        detail = "; ".join(filter(None, [split, overall]))
        return CpuAnswer(share, True, f"{min(share, 1.0):.0%} of the added op time was on a "
                                      f"CPU{place}" + (f" ({detail})" if detail else ""))
    if share < MOSTLY_WAITING:
        return CpuAnswer(share, False, "the added time was spent waiting"
                                       + (f" ({overall})" if overall else ""))
    return CpuAnswer(share, False, f"the added time was mostly spent waiting ({share:.0%} of it "
                                   "on a CPU" + (f": {overall})" if overall else ")"))


def _change_words(change: CpuChange | None) -> str:
    """'time on a CPU per op +68% [+60%, +75%]' ('' where it is not known)."""
    if change is None or change.change is None:
        return ""
    words = f"time on a CPU per op {change.change:+.0%}"
    if change.low is None or change.high is None:
        return words
    return f"{words} [{change.low:+.0%}, {change.high:+.0%}]"


def _where_on_cpu(here: RoleCpu, base: RoleCpu) -> tuple[str, str]:
    """(', in the kernel', 'system time +7.9 µs per op') or the like, from the ticks'
    split; ('', '') where it was not recorded or did not grow."""
    if here.system_ns is None or base.system_ns is None or here.user_ns is None \
            or base.user_ns is None:
        return "", ""
    system = here.system_ns / here.ops - base.system_ns / base.ops
    user = here.user_ns / here.ops - base.user_ns / base.ops
    grown = max(system, 0.0) + max(user, 0.0)
    if grown <= 0:
        return "", ""
    if system >= ONE_SIDE * grown:
        return ", in the kernel", f"system time {_signed_ns(system)} per op"
    if user >= ONE_SIDE * grown:
        return ", in user space", f"user time {_signed_ns(user)} per op"
    return (", in the kernel and in user space",
            f"system time {_signed_ns(system)}, user time {_signed_ns(user)} per op")


def _signed_ns(value: float) -> str:
    return ("+" if value >= 0 else "-") + format_ns(abs(value))
