"""Stalls the kernel's tracepoints timed (reclaim, dirty throttling), intersected with the ops,
and summed per op (op_stalls: the where section's OpStall).

The reclaim monitor (and trace, trace-full) record each stall of a workload task as an interval:
a reclaim from its begin to its end event, a dirty-throttling pause from the event that announces
it for its planned length. A worker does one op at a time, so the op time inside a stall is the
worker's op time before the stall's end less its op time before its start (delays.op_time_before,
additive over disjoint sets of ops, so ops may come in batches and per op name). Unlike delay
accounting, which a sampling step bounds from below, this is exact per op: a stall either lies
in an op or between two, and the kernel also does not have to agree on what to call it (a sleep
in reclaim that ends in io_schedule is a block I/O wait to taskstats, and only the page
allocator's direct reclaim is "freepages"; the begin/end pair brackets memcg reclaim too).
Pure: numpy in, dicts out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from .delays import op_time_before
from .section import OpStall

STALL_CATEGORIES = ("reclaim", "throttle")      # the trace table's categories of a stall
DIRTY_PAUSE = "balance_dirty_pages"             # a dirty-throttling pause's kind
THROTTLED = "vmscan throttled"                  # reclaim_throttle's sleep: "vmscan throttled
#                                                 (writeback)" etc. (logformats/ftrace.py)


def stall_words(kind: str) -> str:
    """What the reports call a kind of stall."""
    if kind == DIRTY_PAUSE:
        return "dirty throttling (balance_dirty_pages)"
    if kind.startswith(THROTTLED):
        return "reclaim throttling" + kind.removeprefix(THROTTLED)
    return kind


def counted_as_block_io(kind: str) -> bool:
    """A pause the task sleeps through in io_schedule_timeout, which taskstats counts as a block
    I/O wait though the device serves nothing of it (balance_dirty_pages); reclaim_throttle
    sleeps in plain schedule_timeout (no delay kind), and a reclaim is partly on a CPU, its
    sleeps of any kind."""
    return kind == DIRTY_PAUSE


@dataclass
class StallSum:
    """One kind of stall inside one op's ops, summed over runs."""
    in_ops_ns: int = 0        # the op time inside stalls of this kind
    stalls: int = 0           # stalls that overlapped an op of this name
    stall_ns: int = 0         # their whole length (in the op or not)

    def add(self, other: StallSum) -> None:
        self.in_ops_ns += other.in_ops_ns
        self.stalls += other.stalls
        self.stall_ns += other.stall_ns


class StallOverlap:
    """Accumulates, batch by batch of one run's ops, each stall's overlap with each op name.

    `stalls` holds per worker the stalls of its task: (start_ns, duration_ns, kind) arrays."""

    def __init__(self, stalls: Mapping[int, tuple[np.ndarray, np.ndarray, np.ndarray]]):
        self.stalls = {w: (np.asarray(s, np.int64), np.asarray(d, np.int64),
                           np.asarray(k).astype(str)) for w, (s, d, k) in stalls.items()
                       if np.asarray(s).size}
        self._overlap: dict[tuple[int, str], np.ndarray] = {}

    def add_ops(self, op: np.ndarray, worker: np.ndarray, start: np.ndarray,
                latency: np.ndarray) -> None:
        """A batch of ops (numpy columns; op as text)."""
        for w, (stall_start, duration, _kinds) in self.stalls.items():
            mine = np.asarray(worker) == w
            if not mine.any():
                continue
            names = np.asarray(op)[mine]
            starts, latencies = np.asarray(start)[mine], np.asarray(latency)[mine]
            for name in np.unique(names).tolist():
                same = names == name
                s, lat = starts[same], latencies[same]
                inside = (op_time_before(s, lat, stall_start + duration)
                          - op_time_before(s, lat, stall_start))
                key = (w, name)
                if key in self._overlap:
                    self._overlap[key] += inside
                else:
                    self._overlap[key] = inside

    def by_op(self) -> dict[str, dict[str, StallSum]]:
        """op -> stall kind -> StallSum (stalls that touched no op of a name are not counted)."""
        out: dict[str, dict[str, StallSum]] = {}
        for (w, name), inside in self._overlap.items():
            _start, duration, kinds = self.stalls[w]
            touched = inside > 0
            for kind in np.unique(kinds[touched]).tolist():
                rows = touched & (kinds == kind)
                out.setdefault(name, {}).setdefault(kind, StallSum()).add(StallSum(
                    int(inside[rows].sum()), int(rows.sum()), int(duration[rows].sum())))
        return out


def merge(per_run: Iterable[Mapping[str, Mapping[str, StallSum]]]
          ) -> dict[str, dict[str, StallSum]]:
    """The runs' op -> kind -> StallSum, summed."""
    out: dict[str, dict[str, StallSum]] = {}
    for run in per_run:
        for op, kinds in run.items():
            for kind, value in kinds.items():
                out.setdefault(op, {}).setdefault(kind, StallSum()).add(value)
    return out


def op_stalls(merged: Mapping[str, Mapping[str, StallSum]],
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
