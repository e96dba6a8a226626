"""The "where did the time go" section, typed: the WhereSection and the records each step of
the answer fills (the step modules of this package build them; compare/where/ loads the runs and
calls those; report/where.py builds the report's tables of a WhereSection). `to_json` is the
comparison JSON's `where` (the same keys as the fields); `from_json` reads it back. Data only:
it imports nothing else of stallbench, so every step may use its records.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Facts:
    """What one variant's runs say about the conditions they ran in (first run's settings,
    counters as the mean delta per run)."""
    memory_limit: int | None = None
    memory_peak: int | None = None
    memory_hits: int | None = None            # v1 failcnt, v2 events "max"
    data_bytes: int | None = None             # the workload's data file(s), where it says
    io_limits: dict[str, str] = field(default_factory=dict)   # {"riops": "1000"}
    sysctls: dict[str, str] = field(default_factory=dict)
    system_memory: int | None = None
    cpus: float | None = None
    own_cpus: float | None = None
    others_cpus: float | None = None
    monitors: list[str] = field(default_factory=list)
    counters: dict[str, float] = field(default_factory=dict)


@dataclass
class DeviceVerdict:
    op_mean_ns: float
    device_ns_per_request: float | None
    device_share_upper_bound: float | None
    verdict: str | None
    from_device: float | None = None        # bytes the op's role read from the block layer /
    #                                         bytes its read calls returned (taskstats)
    blkio_share: float | None = None        # of the role's op time, in block I/O waits
    requests_per_op: float | None = None    # all the devices' requests / the run's ops
    device_share: float | None = None       # of the role's op time, at most the device's time
    #                                         for the role's own reads (None: not bounded)
    not_device: float | None = None         # of the op time, block I/O waits the device did not
    #                                         serve (beyond device_share, or traced pauses)
    not_device_in: list[str] = field(default_factory=list)   # the traced stalls (kinds) that
    #                                         hold them, where the tracepoints say


@dataclass
class RoleIO:
    ops_latency_ns: int
    blkio_in_ops_ns: int | None         # None: the kernel accounted the waits impossibly
    io: dict[str, int] = field(default_factory=dict)


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
    """Mean over the runs of disk.py diskstats_summary."""
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
    # a kernel accounting fault; such a kind is not in `delays` (analysis/where/delays.py)
    impossible: dict[str, float] = field(default_factory=dict)
    # kind -> [ns the kernel accounted inside the ops, the tasks' time off a CPU and not in a
    # pacing sleep] where the first exceeded the second; the share is the second's
    beyond_off_cpu: dict[str, list[int]] = field(default_factory=dict)


@dataclass
class RoleCpu:
    """A worker role's CPU side over a variant's runs, from its workers' steps after the
    warm-up (analysis/where/oncpu.py)."""
    role: str
    ops: int                    # ops completed in the steps counted
    op_time_ns: int             # their op time in those steps
    oncpu_ns: int               # the workers' time on a CPU in those steps
    in_ops_ns: int              # of it, at least this much inside the ops
    user_ns: int | None         # in user space and in the kernel (split by the ticks; None: not
    system_ns: int | None       # recorded)
    bytes_moved: int | None     # by the workers' read and write calls
    runs: int = 0


@dataclass
class CpuChange:
    """One statistic of a role's CPU side (oncpu.CPU_STATS), candidate against baseline."""
    stat: str
    baseline: float | None
    candidate: float | None
    change: float | None
    low: float | None = None
    high: float | None = None


@dataclass
class OpStall:
    """One kind of stall the tracepoints timed (reclaim, dirty throttling) inside one op's ops
    after the warm-up, over the runs (analysis/where/tracedstalls.py): exact, not a lower bound."""
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
class FunctionShare:
    """One function at the leaf of a role's on-CPU samples (the profile monitor)."""
    function: str
    samples: int
    share: float                  # of the role's samples
    caller: str | None = None     # the frame it was most often called from


@dataclass
class Hotspot:
    """The function whose share of a role's on-CPU samples grew most against the baseline
    (analysis/where/hotspots.py)."""
    function: str
    share: float
    base_share: float
    caller: str | None
    samples: int                  # the role's samples in it, here and in the baseline
    base_samples: int
    role_samples: int             # the role's samples, here and in the baseline
    base_role_samples: int


@dataclass
class RoleProfile:
    """A worker role's on-CPU samples over a variant's runs: how many, by which event, the
    functions most of them were in, and (a candidate) the one that grew most."""
    role: str
    samples: int
    event: str
    top: list[FunctionShare] = field(default_factory=list)
    hotspot: Hotspot | None = None


@dataclass
class RoleCounters:
    """A worker role's perf stat counts over a variant's runs, in all and per op of the role
    (analysis/where/perfstat.py)."""
    role: str
    ops: int
    counts: dict[str, int] = field(default_factory=dict)
    per_op: dict[str, float] = field(default_factory=dict)
    ipc: float | None = None      # instructions per cycle, where the PMU counted both


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
    cpu: dict[str, list[RoleCpu]] = field(default_factory=dict)
    cpu_changes: dict[str, dict[str, list[CpuChange]]] = field(default_factory=dict)
    stalls: dict[str, dict[str, dict[str, OpStall]]] = field(default_factory=dict)
    delay_max: dict[str, dict[str, LongestDelay]] = field(default_factory=dict)
    facts: dict[str, Facts] = field(default_factory=dict)
    stacks: dict[str, Stacks] = field(default_factory=dict)
    histograms: dict[str, dict[str, list[Bin]]] = field(default_factory=dict)
    slow_ops: dict[str, dict[str, SlowOps]] = field(default_factory=dict)
    profiles: dict[str, dict[str, RoleProfile]] = field(default_factory=dict)
    perf_counters: dict[str, list[RoleCounters]] = field(default_factory=dict)
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
