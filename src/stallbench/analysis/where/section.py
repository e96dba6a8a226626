"""The "where did the time go" section, typed, and the pure functions that fill it.

compare/where/ loads the monitor tables of each variant's runs and calls these; report/where.py
builds the report's tables of a WhereSection. `to_json` is the comparison JSON's `where` (the
same keys as the fields); `from_json` reads it back. No I/O, no printing.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import monitors as am
from ..delaykinds import DELAY_KIND_NAMES
from . import delays as inops
from . import longest as delaymax
from . import stalls as tracedstalls
from .device import DeviceVerdict, RoleIO
from .mechanism import Facts


@dataclass
class Skipped:
    variant: str
    monitor: str
    reason: str


@dataclass
class CounterRow:
    counter: str
    baseline: float
    candidate: float
    delta: float
    baseline_per_s: float | None
    candidate_per_s: float | None
    baseline_per_op: float | None
    candidate_per_op: float | None
    change: float | None
    unit: str = ""
    change_per_s: float | None = None
    follows: str | None = None        # "ops" / "time": moves with the op count or the clock
    family: str | None = None         # reclaim, throttling, writeback


@dataclass
class Pressure:
    stall_ns: float
    share_of_time: float


@dataclass
class DiskSummary:
    """Mean over the runs of analysis/monitors.py diskstats_summary."""
    seconds: float | None = None
    reads: float | None = None
    writes: float | None = None
    read_iops: float | None = None
    write_iops: float | None = None
    iops: float | None = None
    read_bytes_per_s: float | None = None
    write_bytes_per_s: float | None = None
    read_ns_per_request: float | None = None
    write_ns_per_request: float | None = None
    ns_per_request: float | None = None
    queue_depth: float | None = None
    utilisation: float | None = None


@dataclass
class DelayShare:
    total_ns: int                 # accrued during the run, inside the ops or not
    share: float | None           # in_ops_ns / the role's op time: at most 1
    in_ops_ns: int = 0            # the part that must have been inside the ops


@dataclass
class RoleDelays:
    role: str
    ops_latency_ns: int           # op time over the sampling steps the delays were taken in
    delays: dict[str, DelayShare]
    io: dict[str, int] = field(default_factory=dict)   # taskstats I/O accounting during the run
    ops: int = 0                                       # ops the role recorded
    # kind -> the most delay accounted per second of one of its tasks' time, where above one:
    # a kernel accounting fault; such a kind is not in `delays` (analysis/inops.py)
    impossible: dict[str, float] = field(default_factory=dict)
    # kind -> [ns the kernel accounted inside the ops, the tasks' time off a CPU and not in a
    # pacing sleep] where the first exceeded the second; the share is the second's
    beyond_off_cpu: dict[str, list[int]] = field(default_factory=dict)


@dataclass
class OpStall:
    """One kind of stall the tracepoints timed (reclaim, dirty throttling) inside one op's ops
    after the warm-up, over the runs (analysis/tracedstalls.py): exact, not a lower bound."""
    in_ops_ns: int
    share: float | None           # of the op's time
    stalls: int                   # stalls that overlapped its ops
    mean_ns: float | None         # a stall's mean length
    per_op: float | None          # stalls per op
    ns_per_op: float | None = None    # the op time inside them, per op


@dataclass
class LongestDelay:
    max_ns: int | None
    tid: int | None
    unattributed: int
    impossible: int
    role: str | None


@dataclass
class StackRow:
    stack: str
    samples: int
    share: float
    what: str
    sleeps_in: str = ""           # the innermost frame that is not the scheduler's


@dataclass
class Stacks:
    source: str | None
    top: list[StackRow]


@dataclass
class Bin:
    lo_ns: int
    hi_ns: int
    count: int


@dataclass
class SlowOps:
    threshold_ns: int
    count: int
    source: str | None
    breakdown_ns: dict[str, int]
    shares: dict[str, float]


@dataclass
class Explanation:
    variant: str
    op: str | None
    text: str


@dataclass
class WhereSection:
    baseline: str = "baseline"
    variants: list[str] = field(default_factory=list)
    slow_factor: float = 10.0
    skipped: list[Skipped] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    counters: dict[str, list[CounterRow]] = field(default_factory=dict)
    psi: dict[str, dict[str, Pressure]] = field(default_factory=dict)
    diskstats: dict[str, dict[str, DiskSummary]] = field(default_factory=dict)
    device: dict[str, dict[str, DeviceVerdict]] = field(default_factory=dict)
    delay: dict[str, list[RoleDelays]] = field(default_factory=dict)
    stalls: dict[str, dict[str, dict[str, OpStall]]] = field(default_factory=dict)
    delay_max: dict[str, dict[str, LongestDelay]] = field(default_factory=dict)
    facts: dict[str, Facts] = field(default_factory=dict)
    stacks: dict[str, Stacks] = field(default_factory=dict)
    histograms: dict[str, dict[str, list[Bin]]] = field(default_factory=dict)
    slow_ops: dict[str, dict[str, SlowOps]] = field(default_factory=dict)
    explanations: list[Explanation] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return _jsonable(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WhereSection:
        return _from_json(cls, data)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return None if np.isnan(value) else float(value)
    return value


def _from_json(kind: Any, value: Any) -> Any:
    if value is None:
        return None
    if dataclasses.is_dataclass(kind):
        hints = typing.get_type_hints(kind)
        return kind(**{f.name: _from_json(hints[f.name], value[f.name])
                       for f in dataclasses.fields(kind) if f.name in value})
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is dict:
        return {k: _from_json(args[1], v) for k, v in value.items()}
    if origin is list:
        return [_from_json(args[0], v) for v in value]
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return _from_json(inner[0], value) if len(inner) == 1 else value
    return value


# -- the pure parts of each subsection -------------------------------------------------------


def pressure(per_run: Sequence[Mapping[str, int]], seconds: float) -> dict[str, Pressure]:
    """Over a variant's runs: mean stall per run and its share of all the runs' time."""
    if not per_run:
        return {}
    keys = sorted({k for run in per_run for k in run})
    seconds = seconds or 1.0
    return {key: Pressure(sum(r.get(key, 0) for r in per_run) / len(per_run),
                          sum(r.get(key, 0) for r in per_run) / 1e9 / seconds) for key in keys}


def disk_summaries(per_run: Sequence[tuple[np.ndarray, np.ndarray, Mapping[str, np.ndarray]]]
                   ) -> dict[str, DiskSummary]:
    """(device, t_ns, counters) of each run's diskstats table -> per device the mean summary."""
    per_device: dict[str, list[dict[str, Any]]] = {}
    for device, t_ns, counters in per_run:
        device = np.asarray(device).astype(str)
        for name in np.unique(device).tolist():
            rows = device == name
            summary = am.diskstats_summary(np.asarray(t_ns)[rows],
                                           {c: np.asarray(v)[rows] for c, v in counters.items()})
            if summary:
                per_device.setdefault(name, []).append(summary)
    out = {}
    for name, items in per_device.items():
        mean = {}
        for key in items[0]:
            values = [i[key] for i in items if i.get(key) is not None]
            mean[key] = float(np.mean(values)) if values else None
        out[name] = DiskSummary(**mean)
    return out


@dataclass
class RunDelays:
    """One run's delay table columns, who its tasks were, and each row's op time so far
    (`busy_ns`, NaN on rows of tasks that record no ops: threads other than a worker's)."""
    columns: Mapping[str, np.ndarray]
    role_of_pid: Mapping[int, str]
    busy_ns: np.ndarray
    started_ns: int | None = None
    asleep_ns: np.ndarray | None = None    # each row's pacing sleep so far (paced workers)


def role_delays(runs: Sequence[RunDelays], ops_by_role: Mapping[str, int] | None = None
                ) -> list[RoleDelays]:
    """Delays per worker role over the runs, attributed to the ops (analysis/inops.py: the
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
            task = inops.delays_in_ops(
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
    """What analysis/device.py needs of each role: op time, block I/O waits in the ops, I/O."""
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


def op_stalls(merged: Mapping[str, Mapping[str, tracedstalls.StallSum]],
              op_totals: Mapping[str, tuple[int, int]]) -> dict[str, dict[str, OpStall]]:
    """op -> stall kind -> OpStall, from the runs' summed stalls and each op's (samples, latency
    sum) after the warm-up."""
    out: dict[str, dict[str, OpStall]] = {}
    for op, kinds in merged.items():
        samples, total = op_totals.get(op, (0, 0))
        out[op] = {kind: OpStall(s.in_ops_ns, s.in_ops_ns / total if total else None, s.stalls,
                                 s.stall_ns / s.stalls if s.stalls else None,
                                 s.stalls / samples if samples else None,
                                 s.in_ops_ns / samples if samples else None)
                   for kind, s in sorted(kinds.items())}
    return out


def longest(per_run: Sequence[Mapping[str, Mapping[str, Any]]]) -> dict[str, LongestDelay]:
    """The longest single delay per kind over the runs' run.json `max_ns` (entries with the
    role of the task that had it as "run"), kinds without one left out."""
    merged = delaymax.merge_runs(list(per_run))
    return {kind: LongestDelay(e["max_ns"], e["tid"], e["unattributed"], e["impossible"],
                               e["run"]) for kind, e in merged.items() if e["max_ns"] is not None}


def stacks(folded: Sequence[Mapping[str, int]], trace_dstate: Sequence[np.ndarray]) -> Stacks:
    """Top blocked stacks from stacks.folded counts (the leading comm frame dropped), else
    from the trace's D-state rows (one count per sleep)."""
    counts: dict[str, int] = {}
    for run in folded:
        for stack, n in run.items():
            key = stack.split(";", 1)[1] if ";" in stack else stack
            counts[key] = counts.get(key, 0) + n
    source = "stacks"
    if not counts:
        source = "trace"
        for run in trace_dstate:
            names, n = np.unique(np.asarray(run).astype(str), return_counts=True)
            for name, count in zip(names.tolist(), n.tolist(), strict=True):
                counts[name] = counts.get(name, 0) + count
    return Stacks(source if counts else None,
                  [StackRow(**row) for row in am.top_stacks(counts)])


def dstate_stacks(category: np.ndarray, stack: np.ndarray) -> np.ndarray:
    """The non-empty stacks of a trace table's D-state rows."""
    stack = np.asarray(stack, dtype=object)
    keep = (np.asarray(category, dtype=object) == "dstate") & ~np.equal(stack, None)
    keep &= stack != ""
    return stack[keep]


HISTOGRAM_GROUPS = ("reclaim", "throttle", "block")


def histograms(trace: Sequence[tuple[np.ndarray, np.ndarray]]) -> dict[str, list[Bin]]:
    """(category, duration_ns) of each run's trace table -> per group the log2 histogram."""
    out = {}
    for name in HISTOGRAM_GROUPS:
        parts = [np.asarray(d)[np.asarray(c, dtype=object) == name] for c, d in trace]
        if parts and sum(p.size for p in parts):
            out[name] = [Bin(**b) for b in am.log2_histogram(np.concatenate(parts))]
    return out


def slow_ops(threshold: int, count: int, source: str | None,
             breakdown: Mapping[str, int]) -> SlowOps:
    total = sum(breakdown.values())
    return SlowOps(threshold, count, source, dict(breakdown),
                   {k: v / total for k, v in breakdown.items()} if total else {})


def counter_rows(base: Sequence[Mapping[str, int]], cand: Sequence[Mapping[str, int]],
                 base_seconds: float, cand_seconds: float, base_ops: int, cand_ops: int,
                 unit: typing.Callable[[str], str]) -> list[CounterRow]:
    rows = am.counters_comparison(base, cand, base_seconds, cand_seconds, base_ops, cand_ops)
    return [CounterRow(**row, unit=unit(row["counter"])) for row in rows]
