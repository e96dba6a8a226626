"""The longest single delay of each kind during a run, from taskstats v16+ per-task maxima.

A task's `<kind>_max_ns` is the longest single delay since the task started. It belongs to the
run when the task was born in the run, or when the maximum grew between the first and the last
sample; a task that predates the run and whose maximum did not grow may have had its longest
wait before the run (the run's own longest is then at most that): counted as `unattributed`.
A maximum longer than the time since the run started is impossible (a wait in flight when
kernel.task_delayacct was switched on is reported from a zero start), and so is any maximum of
a task whose total of that kind grew by more than the time it was watched: both are counted as
`impossible` and not reported. At comparison time a worker's maximum is bounded by its run's
ops too (`beyond_ops`): a worker's main thread is always in an op or between two, so no single
wait of it outlasts both the run's longest op and its longest time without a completion (seen on
6.18: a throttled reader's "longest block I/O wait" 511 ms, two reads long, where no read took
more than 269 ms: a wait timed from the previous wait's start).
Pure: numpy arrays in, a dict out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..delaykinds import DELAY_KINDS
from .delays import IMPOSSIBLE_RATE
from .section import LongestDelay


def longest_delays(tid: np.ndarray, born_in_run: np.ndarray,
                   max_ns: Mapping[str, np.ndarray], count: Mapping[str, np.ndarray],
                   t_ns: np.ndarray | None = None,
                   totals: Mapping[str, np.ndarray] | None = None) -> dict[str, dict[str, Any]]:
    """{kind: {"max_ns": longest in the run or None, "tid": whose, "unattributed": tasks whose
    delays of that kind during the run had no attributable maximum}} from samples in time
    order (rows of one task: first to last)."""
    tid = np.asarray(tid)
    born = np.asarray(born_in_run, dtype=bool)
    result: dict[str, dict[str, Any]] = {}
    tasks = [np.flatnonzero(tid == task) for task in np.unique(tid)]
    for kind, values in max_ns.items():
        values = np.asarray(values, dtype=np.float64)
        counts = np.asarray(count[kind], dtype=np.float64)
        best: tuple[float, int] | None = None
        unattributed = impossible = 0
        for rows in tasks:
            last_max, first_max = values[rows[-1]], values[rows[0]]
            if np.isnan(last_max):
                continue
            grew_count = np.nan_to_num(counts[rows[-1]]) > np.nan_to_num(counts[rows[0]])
            if born[rows[0]]:
                attributable = last_max > 0
            elif last_max > np.nan_to_num(first_max):
                attributable = True
            else:
                attributable = False
                unattributed += int(grew_count)
            if attributable and t_ns is not None \
                    and last_max > float(np.asarray(t_ns)[rows[-1]]) * IMPOSSIBLE_RATE + 1e6:
                attributable = False
                impossible += 1
            if attributable and t_ns is not None and totals is not None and kind in totals \
                    and _total_impossible(np.asarray(totals[kind], dtype=np.float64)[rows],
                                          np.asarray(t_ns, dtype=np.float64)[rows],
                                          bool(born[rows[0]])):
                attributable = False
                impossible += 1
            if attributable and (best is None or last_max > best[0]):
                best = (last_max, int(tid[rows[-1]]))
        result[kind] = {"max_ns": None if best is None else int(best[0]),
                        "tid": None if best is None else best[1],
                        "unattributed": unattributed, "impossible": impossible}
    return result


# The kernel's task clock (local_clock) against CLOCK_MONOTONIC, which times the ops: NTP slews
# the latter by at most 500 ppm, and the two are read a few µs apart. A worker's longest wait
# is the kernel's own number compared with exact op times, so no sampling jitter applies (seen
# on 6.18: a throttled reader's longest block I/O wait 265.8 ms where no read took more than
# 259.2 ms and no completion was further than that from the previous one after the first).
CLOCK_RATE = 1.001
CLOCK_SLACK_NS = 1_000_000


def outlasts(value_ns: float, bound_ns: float) -> bool:
    """Whether a single wait of `value_ns` cannot fit in a span of `bound_ns` timed by the
    recorder."""
    return bool(value_ns > bound_ns * CLOCK_RATE + CLOCK_SLACK_NS)


def beyond_ops(entry: Mapping[str, Any], longest_op_ns: int | None) -> dict[str, Any]:
    """A worker's longest-delay entry (longest_delays' form), made impossible when its maximum
    outlasts `longest_op_ns` (the run's longest op or time without a completion, whichever is
    longer)."""
    value = entry.get("max_ns")
    if value is None or longest_op_ns is None or not outlasts(value, longest_op_ns):
        return dict(entry)
    return {**entry, "max_ns": None, "tid": None,
            "impossible": int(entry.get("impossible") or 0) + 1}


def _total_impossible(total: np.ndarray, t_ns: np.ndarray, born: bool) -> bool:
    """A task that accrued more of one kind of delay than the time it was watched (a task is
    in one wait of a kind at a time): its accounting of that kind is wrong, and so may be its
    maximum (seen on 6.18: a reader's blkio 20.7 s in a 3.4 s run, its longest wait two reads
    long)."""
    known = np.isfinite(total)
    if known.sum() < 1:
        return False
    total, t_ns = total[known], t_ns[known]
    accrued = total[-1] - (0.0 if born else total[0])
    watched = t_ns[-1] - (0.0 if born else t_ns[0])
    return bool(accrued > watched * IMPOSSIBLE_RATE + 1e6)


KIND_WORDS = {k.name: k.noun for k in DELAY_KINDS}
NOTABLE_NS = 1_000_000
NOTABLE_GROWTH = 2.0


def merge_runs(per_run: list[Mapping[str, Mapping[str, Any]]]) -> dict[str, dict[str, Any]]:
    """The longest of each kind over several runs' `longest_delays` results."""
    merged: dict[str, dict[str, Any]] = {}
    for result in per_run:
        for kind, entry in result.items():
            current = merged.setdefault(kind, {"max_ns": None, "tid": None, "run": None,
                                               "unattributed": 0, "impossible": 0})
            current["unattributed"] += int(entry.get("unattributed") or 0)
            current["impossible"] += int(entry.get("impossible") or 0)
            value = entry.get("max_ns")
            if value is not None and (current["max_ns"] is None or value > current["max_ns"]):
                current.update(max_ns=int(value), tid=entry.get("tid"), run=entry.get("run"))
    return merged


def explanation(label: str, kind: str, candidate_ns: int | None, baseline_ns: int | None
                ) -> str | None:
    """'X: the longest single direct-reclaim stall was 14 ms (baseline 0.2 ms)' when the
    candidate's longest delay of a kind is notable (>= 1 ms) and at least twice the baseline's."""
    from ..display import format_ns

    if candidate_ns is None or candidate_ns < NOTABLE_NS:
        return None
    if baseline_ns is not None and candidate_ns < NOTABLE_GROWTH * baseline_ns:
        return None
    base = f"baseline {format_ns(baseline_ns)}" if baseline_ns is not None else "none in baseline"
    return (f"{label}: the longest single {KIND_WORDS.get(kind, kind)} was "
            f"{format_ns(candidate_ns)} ({base}; taskstats per-task maximum)")


def longest_per_kind(per_run: Sequence[Mapping[str, Mapping[str, Any]]]) -> dict[str, LongestDelay]:
    """The longest single delay per kind over the runs' run.json `max_ns` (entries with the
    role of the task that had it as "run"), kinds without one left out."""
    merged = merge_runs(list(per_run))
    return {kind: LongestDelay(e["max_ns"], e["tid"], e["unattributed"], e["impossible"],
                               e["run"]) for kind, e in merged.items() if e["max_ns"] is not None}
