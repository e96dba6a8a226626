"""Where the time of the slow operations went: interval arithmetic over the trace table (or the
stack samples) and the slow ops' own intervals, and the line that names it ("62% of slow reads'
time was in memcg reclaim"). Pure and vectorised: numpy arrays in, dicts out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .growth import MIN_GROWTH, MIN_SHARE, headline
from .section import SlowOps
from .stacks import classify_stack

# priority of overlapping causes: a D-state sleep inside reclaim is reclaim's time
CAUSE_PRIORITY = ("memcg reclaim", "direct reclaim", "reclaim throttling", "dirty throttling")


def union_intervals(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted, merged intervals."""
    if len(start) == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    order = np.argsort(start, kind="stable")
    start, end = np.asarray(start)[order], np.asarray(end)[order]
    running_end = np.maximum.accumulate(end)
    new = np.ones(len(start), bool)
    new[1:] = start[1:] > running_end[:-1]
    groups = np.cumsum(new) - 1
    merged_start = start[new]
    merged_end = np.zeros(len(merged_start), np.int64)
    np.maximum.at(merged_end, groups, running_end)
    return merged_start, merged_end


def subtract_intervals(a_start: np.ndarray, a_end: np.ndarray, b_start: np.ndarray,
                       b_end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merged intervals a minus merged intervals b."""
    out_s: list[int] = []
    out_e: list[int] = []
    j = 0
    for s, e in zip(a_start.tolist(), a_end.tolist(), strict=True):
        while j < len(b_end) and b_end[j] <= s:
            j += 1
        k = j
        cur = s
        while k < len(b_start) and b_start[k] < e:
            if b_start[k] > cur:
                out_s.append(cur)
                out_e.append(int(b_start[k]))
            cur = max(cur, int(b_end[k]))
            k += 1
        if cur < e:
            out_s.append(cur)
            out_e.append(e)
    return np.array(out_s, np.int64), np.array(out_e, np.int64)


def overlap_total(op_start: np.ndarray, op_end: np.ndarray, iv_start: np.ndarray,
                  iv_end: np.ndarray) -> np.ndarray:
    """For each op [start, end), the time covered by merged, sorted intervals (vectorised with
    cumulative sums)."""
    if len(iv_start) == 0:
        return np.zeros(len(op_start), np.int64)
    cumulative = np.concatenate([[0], np.cumsum(iv_end - iv_start)])

    def covered_until(t: np.ndarray) -> np.ndarray:
        # time covered in (-inf, t)
        i = np.searchsorted(iv_start, t, side="right")  # intervals starting before t
        full = cumulative[np.maximum(i - 1, 0)] * (i > 0)
        last_start = iv_start[np.maximum(i - 1, 0)]
        last_end = iv_end[np.maximum(i - 1, 0)]
        partial = np.where(i > 0, np.clip(t - last_start, 0, last_end - last_start), 0)
        return full + partial

    return covered_until(np.asarray(op_end)) - covered_until(np.asarray(op_start))


def slow_op_breakdown(op_start: np.ndarray, op_latency: np.ndarray, op_task: np.ndarray,
                      intervals: Mapping[str, Mapping[int, tuple[np.ndarray, np.ndarray]]],
                      device: tuple[np.ndarray, np.ndarray] | None = None,
                      ) -> dict[str, int]:
    """Where the time of the given (slow) operations went, in ns per cause.

    `intervals[cause][task] = (starts, ends)` per task (the pid that ran the op). Causes are
    claimed in CAUSE_PRIORITY order, then the remaining causes alphabetically (D-state classes),
    then `device` (block requests in flight, any task), and the rest is "elsewhere (CPU,
    runnable, not traced)". Each instant of an op counts once."""
    op_start = np.asarray(op_start, np.int64)
    op_end = op_start + np.asarray(op_latency, np.int64)
    op_task = np.asarray(op_task)
    ordered = [c for c in CAUSE_PRIORITY if c in intervals]
    ordered += sorted(c for c in intervals if c not in CAUSE_PRIORITY)
    totals = {cause: 0 for cause in ordered}
    if device is not None:
        totals["device"] = 0
    claimed_total = 0
    for task in np.unique(op_task):
        mask = op_task == task
        starts, ends = op_start[mask], op_end[mask]
        claimed_s, claimed_e = np.empty(0, np.int64), np.empty(0, np.int64)
        layers = [(c, intervals[c].get(int(task))) for c in ordered]
        if device is not None:
            layers.append(("device", device))
        for cause, layer in layers:
            if layer is None or len(layer[0]) == 0:
                continue
            s, e = union_intervals(np.asarray(layer[0], np.int64), np.asarray(layer[1], np.int64))
            s, e = subtract_intervals(s, e, claimed_s, claimed_e)
            got = int(overlap_total(starts, ends, s, e).sum())
            totals[cause] += got
            claimed_total += got
            claimed_s, claimed_e = union_intervals(np.concatenate([claimed_s, s]),
                                                   np.concatenate([claimed_e, e]))
    totals["elsewhere (CPU, runnable, not traced)"] = max(
        0, int(np.sum(op_end - op_start)) - claimed_total)
    return {cause: value for cause, value in totals.items() if value > 0}


def sampled_breakdown(op_start: np.ndarray, op_latency: np.ndarray, op_task: np.ndarray,
                      sample_t: np.ndarray, sample_task: np.ndarray, sample_label: Sequence[str],
                      interval_ns: int) -> dict[str, int]:
    """Like slow_op_breakdown from stack samples: each D-state sample of the op's task inside the
    op stands for `interval_ns` of the label's time (an estimate, capped at the op's time)."""
    op_start = np.asarray(op_start, np.int64)
    op_end = op_start + np.asarray(op_latency, np.int64)
    sample_t = np.asarray(sample_t, np.int64)
    sample_task = np.asarray(sample_task)
    labels = np.asarray(list(sample_label), dtype=object)
    totals: dict[str, int] = {}
    for task in np.unique(op_task):
        ops = np.flatnonzero(np.asarray(op_task) == task)
        mine = np.flatnonzero(sample_task == task)
        if len(mine) == 0:
            continue
        order = np.argsort(sample_t[mine])
        times, task_labels = sample_t[mine][order], labels[mine][order]
        lo = np.searchsorted(times, op_start[ops], side="left")
        hi = np.searchsorted(times, op_end[ops], side="left")
        for i, a, b in zip(ops, lo, hi, strict=True):
            if b <= a:
                continue
            budget = int(op_end[i] - op_start[i])
            found: dict[str, int] = {}
            for label in task_labels[a:b]:
                found[label] = found.get(label, 0) + interval_ns
            scale = min(1.0, budget / sum(found.values()))
            for label, value in found.items():
                totals[label] = totals.get(label, 0) + int(value * scale)
    total_time = int(np.sum(op_end - op_start))
    totals["elsewhere (not sampled in D state)"] = max(0, total_time - sum(totals.values()))
    return {k: v for k, v in totals.items() if v > 0}


def lookup(keys: np.ndarray, mapping: Mapping[int, int], default: int = -1) -> np.ndarray:
    """mapping[k] for each k of `keys` (default where missing), vectorised."""
    keys = np.asarray(keys, dtype=np.int64)
    if not mapping:
        return np.full(keys.size, default, np.int64)
    known = np.array(sorted(mapping), dtype=np.int64)
    values = np.array([mapping[k] for k in known.tolist()], dtype=np.int64)
    at = np.clip(np.searchsorted(known, keys), 0, known.size - 1)
    return np.where(known[at] == keys, values[at], default)


@dataclass(frozen=True)
class Coded:
    """A text column as codes into its distinct values (-1 for null): compare/where/slowopdata.py
    makes it from the Arrow column's dictionary encoding, so labels are worked out once per
    distinct value."""

    codes: np.ndarray
    names: list[str]

    @classmethod
    def of(cls, values: Sequence[str | None]) -> Coded:
        """From plain values (one Python pass; for small inputs)."""
        index: dict[str, int] = {}
        codes = np.fromiter((-1 if v is None else index.setdefault(v, len(index))
                             for v in values), dtype=np.int64)
        return cls(codes, list(index))

    def mask(self, name: str) -> np.ndarray:
        if name not in self.names:
            return np.zeros(self.codes.size, bool)
        return self.codes == self.names.index(name)

    def decoded(self) -> np.ndarray:
        return np.array([*self.names, None], dtype=object)[self.codes]


class _Names:
    """Distinct label names, each with one code."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}

    def code(self, name: str) -> int:
        return self.index.setdefault(name, len(self.index))

    def codes(self, names: Sequence[str | None]) -> np.ndarray:
        """Codes of `names` and, last, -1 (so that a null's code -1 indexes it)."""
        return np.array([-1 if n is None else self.code(n) for n in names] + [-1], np.int64)


def stack_labels(stack: Coded) -> Coded:
    """classify_stack of each stack, computed once per distinct stack (a null one is "")."""
    names = _Names()
    table = np.array([names.code(classify_stack(s)) for s in stack.names]
                     + [names.code(classify_stack(""))], np.int64)
    return Coded(table[stack.codes], list(names.index))


def trace_labels(category: Coded, kind: Coded, stack: Coded) -> Coded:
    """The cause each trace row stands for (null for rows that are none: block, syscall):
    reclaim rows by their kind, throttling as dirty or reclaim throttling, D-state sleeps by
    what their stack waited on (classify_stack, once per distinct stack)."""
    names = _Names()
    codes = np.full(category.codes.size, -1, np.int64)
    reclaim = category.mask("reclaim")
    codes[reclaim] = names.codes(kind.names)[kind.codes[reclaim]]
    throttle = category.mask("throttle")
    if throttle.any():
        dirty = kind.mask("balance_dirty_pages")[throttle]
        codes[throttle] = np.where(dirty, names.code("dirty throttling"),
                                   names.code("reclaim throttling"))
    dstate = category.mask("dstate")
    if dstate.any():
        waits = stack_labels(stack)
        codes[dstate] = names.codes(waits.names)[waits.codes[dstate]]
    return Coded(codes, list(names.index))


def label_intervals(labels: Coded, pid: np.ndarray, t_ns: np.ndarray,
                    duration_ns: np.ndarray) -> dict[str, dict[int, tuple[np.ndarray, np.ndarray]]]:
    """{label: {pid: (starts, ends)}} of the labelled rows with a known duration (rows of one
    label and pid in table order)."""
    duration_ns = np.asarray(duration_ns, dtype=np.int64)
    keep = (duration_ns >= 0) & (labels.codes >= 0)
    if not keep.any():
        return {}
    label = labels.codes[keep]
    # select before converting: rows without a task (block requests: a null pid, NaN in a
    # float column) are never labelled, and casting their NaN would warn
    task = np.asarray(pid)[keep]
    task = np.where(np.isnan(task), -1, task).astype(np.int64) if task.dtype.kind == "f" \
        else task.astype(np.int64)
    start = np.asarray(t_ns, dtype=np.int64)[keep]
    end = start + duration_ns[keep]
    order = np.lexsort((task, label))
    label, task, start, end = label[order], task[order], start[order], end[order]
    cut = np.flatnonzero(np.r_[True, (label[1:] != label[:-1]) | (task[1:] != task[:-1])])
    bounds = np.r_[cut, label.size]
    out: dict[str, dict[int, tuple[np.ndarray, np.ndarray]]] = {}
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        out.setdefault(labels.names[label[a]], {})[int(task[a])] = (start[a:b], end[a:b])
    return out


Intervals = dict[str, dict[int, tuple[np.ndarray, np.ndarray]]]


def trace_intervals(trace: Mapping[str, Any]
                    ) -> tuple[Intervals, tuple[np.ndarray, np.ndarray] | None]:
    """A trace table's columns (category, kind and stack Coded) -> the labelled intervals per
    task, and the block requests in flight (any task) as the device's time: slow_op_breakdown's
    inputs, once per run."""
    labels = trace_labels(trace["category"], trace["kind"], trace["stack"])
    duration = np.asarray(trace["duration_ns"], dtype=np.int64)
    t = np.asarray(trace["t_ns"], dtype=np.int64)
    block = (duration >= 0) & trace["category"].mask("block")
    device = (t[block], t[block] + duration[block]) if block.any() else None
    return label_intervals(labels, trace["pid"], t, duration), device


def slow_threshold(median_ns: float | None, factor: float = 10.0) -> int | None:
    """Slow means slower than `factor` times the op's median."""
    if median_ns is None or not np.isfinite(median_ns):
        return None
    return int(median_ns * factor)


def explanation(op: str, p99_change: float | None, breakdown: Mapping[str, int] | None,
                source: str = "trace", max_causes: int = 2, stat: str = "p99") -> str | None:
    """'read p99 +310%: 62% of slow reads' time was in memcg reclaim, 30% waiting on page lock'
    or None when the tail did not grow or the monitors point nowhere."""
    if p99_change is None or p99_change <= MIN_GROWTH or not breakdown:
        return None
    total = sum(breakdown.values())
    if total <= 0:
        return None
    named = [(cause, value / total) for cause, value in breakdown.items()
             if not cause.startswith("elsewhere") and value / total >= MIN_SHARE]
    named.sort(key=lambda item: -item[1])
    if not named:
        return None
    parts = []
    for i, (cause, share) in enumerate(named[:max_causes]):
        text = _cause_words(cause)
        parts.append(f"{share:.0%} of slow {op}s' time was {text}" if i == 0
                     else f"{share:.0%} {text}")
    estimate = " (from stack samples)" if source == "stacks" else ""
    return f"{headline(op, stat, p99_change)}: " + ", ".join(parts) + estimate


def _cause_words(cause: str) -> str:
    if cause.startswith("waiting") or cause.startswith("other"):
        return cause if cause.startswith("waiting") else f"in D state ({cause[7:]})"
    if cause == "device":
        return "with requests in flight on the device"
    return f"in {cause}"


def slow_ops(threshold: int, count: int, source: str | None,
             breakdown: Mapping[str, int]) -> SlowOps:
    total = sum(breakdown.values())
    return SlowOps(threshold, count, source, dict(breakdown),
                   {k: v / total for k, v in breakdown.items()} if total else {})
