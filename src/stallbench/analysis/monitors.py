"""Where did the time go: pure functions over monitor columns (numpy arrays, plain dicts).

No file I/O and no printing: where.py loads the tables and calls these. Times are int64 ns.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

# --------------------------------------------------------------------------------------------
# counters


def counter_deltas(columns: Mapping[str, np.ndarray], cumulative: Iterable[str]) -> dict[str, int]:
    """Last minus first value of each cumulative column (rows in time order; nulls dropped)."""
    deltas = {}
    for name in cumulative:
        values = np.asarray(columns[name], dtype=np.float64)
        values = values[~np.isnan(values)]
        if len(values) >= 2:
            deltas[name] = int(values[-1] - values[0])
    return deltas


def counters_comparison(baseline: Sequence[Mapping[str, int]],
                        candidate: Sequence[Mapping[str, int]],
                        baseline_seconds: float, candidate_seconds: float,
                        baseline_ops: int, candidate_ops: int) -> list[dict[str, Any]]:
    """Seed 000's GOOD/BAD table: mean delta per run in each variant, the change, per second and
    per operation, sorted by the size of the relative change; counters that did not move are
    left out. `baseline`/`candidate` hold one {counter: delta} per run."""
    names = sorted({n for run in [*baseline, *candidate] for n in run})
    rows = []
    for name in names:
        base_total = sum(run.get(name, 0) for run in baseline)
        cand_total = sum(run.get(name, 0) for run in candidate)
        if base_total == 0 and cand_total == 0:
            continue
        base_mean = base_total / max(1, len(baseline))
        cand_mean = cand_total / max(1, len(candidate))
        if base_mean == cand_mean:
            continue
        base_rate = base_total / baseline_seconds if baseline_seconds > 0 else None
        cand_rate = cand_total / candidate_seconds if candidate_seconds > 0 else None
        base_per_op = base_total / baseline_ops if baseline_ops else None
        cand_per_op = cand_total / candidate_ops if candidate_ops else None
        ref_base = base_per_op if base_per_op is not None else base_rate
        ref_cand = cand_per_op if cand_per_op is not None else cand_rate
        change = None
        if ref_base and ref_cand is not None:
            change = ref_cand / ref_base - 1.0
        rows.append({"counter": name, "baseline": base_mean, "candidate": cand_mean,
                     "delta": cand_mean - base_mean, "baseline_per_s": base_rate,
                     "candidate_per_s": cand_rate, "baseline_per_op": base_per_op,
                     "candidate_per_op": cand_per_op, "change": change})

    def order(row: dict[str, Any]) -> tuple[float, float]:
        change = row["change"]
        # a counter that appears from nothing is the largest change of all
        magnitude = float("inf") if change is None else abs(change)
        return (-magnitude, -abs(row["delta"]))

    rows.sort(key=order)
    return rows


# --------------------------------------------------------------------------------------------
# psi


def psi_stall_totals(scope: Sequence[str], resource: Sequence[str], kind: Sequence[str],
                     total_ns: np.ndarray) -> dict[str, int]:
    """{"system.memory.some": stall ns during the run, ...} (last minus first per series)."""
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for s, r, k, total in zip(scope, resource, kind, np.asarray(total_ns), strict=True):
        key = f"{s}.{r}.{k}"
        first.setdefault(key, int(total))
        last[key] = int(total)
    return {key: last[key] - first[key] for key in last}


# --------------------------------------------------------------------------------------------
# diskstats

SECTOR_BYTES = 512


def diskstats_summary(t_ns: np.ndarray, counters: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """One device's time series -> IOPS, bytes/s, time per request, queue depth, utilisation.

    Uses first and last rows (cumulative counters); times in the kernel are ms."""
    t_ns = np.asarray(t_ns, dtype=np.int64)
    if len(t_ns) < 2 or t_ns[-1] <= t_ns[0]:
        return {}
    elapsed_s = (t_ns[-1] - t_ns[0]) / 1e9

    def delta(field: str) -> float:
        values = np.asarray(counters[field], dtype=np.float64)
        return float(values[-1] - values[0])

    reads, writes = delta("reads"), delta("writes")
    read_ms, write_ms = delta("read_ms"), delta("write_ms")
    return {
        "seconds": elapsed_s,
        "reads": int(reads), "writes": int(writes),
        "read_iops": reads / elapsed_s, "write_iops": writes / elapsed_s,
        "iops": (reads + writes) / elapsed_s,
        "read_bytes_per_s": delta("read_sectors") * SECTOR_BYTES / elapsed_s,
        "write_bytes_per_s": delta("write_sectors") * SECTOR_BYTES / elapsed_s,
        "read_ns_per_request": read_ms * 1e6 / reads if reads else None,
        "write_ns_per_request": write_ms * 1e6 / writes if writes else None,
        "ns_per_request": (read_ms + write_ms) * 1e6 / (reads + writes) if reads + writes else None,
        "queue_depth": delta("weighted_ms") / 1e3 / elapsed_s,
        "utilisation": min(1.0, delta("io_ms") / 1e3 / elapsed_s),
    }


def device_share(op_latency_total_ns: float, requests: float, ns_per_request: float | None,
                 ) -> float | None:
    """Fraction of the ops' total latency that the device's request time could account for.

    Upper bound: all device time of the run divided by all time the ops took. Near 1 the
    operations waited on the device; near 0 their time went above the block layer."""
    total = float(op_latency_total_ns)
    if total <= 0 or ns_per_request is None:
        return None
    return min(1.0, requests * ns_per_request / total)


# --------------------------------------------------------------------------------------------
# delay accounting

DELAY_KINDS = ("cpu", "blkio", "swapin", "freepages", "thrashing", "compact", "wpcopy", "irq")
DELAY_MEANING = {"cpu": "waiting for a CPU", "blkio": "waiting for block I/O",
                 "swapin": "swapping in", "freepages": "direct reclaim (freepages)",
                 "thrashing": "thrashing (refaults of the working set)",
                 "compact": "memory compaction", "wpcopy": "write-protect copy",
                 "irq": "interrupts"}


def task_delays(tid: np.ndarray, born_in_run: np.ndarray, delays: Mapping[str, np.ndarray],
                t_ns: np.ndarray | None = None) -> dict[int, dict[str, int]]:
    """{tid: {kind: ns accrued during the run}} from cumulative samples in time order.

    With sample times, each step between two samples counts only when it is possible: no
    more than the wall time between them. A kernel that had a wait in flight when
    kernel.task_delayacct was switched on reports it from a zero start, i.e. the whole uptime
    (seen on 6.18: blkio 6035 s in a 20 s run); such a step is dropped, not summed."""
    tid = np.asarray(tid)
    result: dict[int, dict[str, int]] = {}
    for task in np.unique(tid):
        rows = np.flatnonzero(tid == task)
        first = rows[0]
        result[int(task)] = {}
        for kind, values in delays.items():
            values = np.asarray(values, dtype=np.float64)[rows]
            if np.isnan(values[-1]):
                continue
            base = 0.0 if bool(born_in_run[first]) else values[0]
            base = 0.0 if np.isnan(base) else base
            if t_ns is None:
                result[int(task)][kind] = int(max(0.0, values[-1] - base))
                continue
            times = np.asarray(t_ns, dtype=np.float64)[rows]
            steps = np.diff(np.concatenate(([base], np.nan_to_num(values, nan=base))))
            room = np.diff(np.concatenate(([0.0 if bool(born_in_run[first]) else times[0]],
                                           times)))
            possible = (steps >= 0) & (steps <= np.maximum(room, 0) * 1.05 + 1e6)
            result[int(task)][kind] = int(steps[possible].sum())
    return result


def delay_attribution(delays_by_pid: Mapping[int, Mapping[str, int]],
                      role_of_pid: Mapping[int, str],
                      latency_by_role: Mapping[str, int]) -> list[dict[str, Any]]:
    """Per role: the delays of its processes and the share of its ops' total latency each one
    explains (a delay larger than the latency, e.g. cpu delay outside operations, is capped)."""
    per_role: dict[str, dict[str, int]] = {}
    for pid, delays in delays_by_pid.items():
        role = role_of_pid.get(pid)
        if role is None:
            continue
        bucket = per_role.setdefault(role, dict.fromkeys(DELAY_KINDS, 0))
        for kind, value in delays.items():
            bucket[kind] = bucket.get(kind, 0) + int(value)
    rows = []
    for role in sorted(per_role):
        latency = int(latency_by_role.get(role, 0))
        delays = {kind: {"total_ns": value,
                         "share": (min(1.0, value / latency) if latency else None)}
                  for kind, value in per_role[role].items()}
        rows.append({"role": role, "ops_latency_ns": latency, "delays": delays})
    return rows


# --------------------------------------------------------------------------------------------
# stacks

# (label, frames any of which marks it), checked in order: the first that matches wins
STACK_CLASSES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("memcg reclaim", ("try_to_free_mem_cgroup_pages", "mem_cgroup_handle_over_high",
                       "try_charge_memcg")),
    ("direct reclaim", ("try_to_free_pages", "__alloc_pages_direct_reclaim",
                        "shrink_node", "shrink_lruvec")),
    ("reclaim throttling", ("reclaim_throttle", "congestion_wait")),
    ("dirty throttling", ("balance_dirty_pages",)),
    ("fdatasync / journal commit", ("jbd2_log_wait_commit", "jbd2_complete_transaction",
                                    "file_write_and_wait_range", "xfs_log_force_seq",
                                    "btrfs_sync_file", "ext4_sync_file", "vfs_fsync_range",
                                    "__x64_sys_fdatasync", "__x64_sys_fsync")),
    ("waiting on writeback", ("folio_wait_writeback", "wait_on_page_writeback",
                              "__filemap_fdatawait_range")),
    ("waiting on page lock", ("folio_wait_bit_common", "__folio_lock", "wait_on_page_bit_common",
                              "__lock_page", "folio_wait_bit")),
    ("direct I/O to the device", ("__iomap_dio_rw", "blkdev_direct_IO", "__blkdev_direct_IO",
                                  "blk_mq_get_tag", "submit_bio_wait")),
    ("filesystem locks", ("rwsem_down_read_slowpath", "rwsem_down_write_slowpath",
                          "__mutex_lock", "down_read", "down_write")),
)


def classify_stack(stack: str) -> str:
    """A folded stack (outermost first) -> what it was waiting on, in words."""
    frames = set(stack.split(";"))
    for label, markers in STACK_CLASSES:
        if frames.intersection(markers):
            return label
    leaf = [f for f in stack.split(";") if f not in ("io_schedule", "schedule",
                                                      "schedule_timeout", "io_schedule_timeout")]
    return f"other: {leaf[-1]}" if leaf else "other"


def parse_folded(text: str) -> dict[str, int]:
    """'a;b;c COUNT' lines -> {stack: count} (counts of equal stacks add up)."""
    counts: dict[str, int] = {}
    for line in text.splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        if stack and count.isdigit():
            counts[stack] = counts.get(stack, 0) + int(count)
    return counts


def top_stacks(counts: Mapping[str, int], limit: int = 8) -> list[dict[str, Any]]:
    """The most frequent blocked stacks with their share of all blocked samples."""
    total = sum(counts.values())
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:limit]
    return [{"stack": stack, "samples": n, "share": n / total if total else 0.0,
             "what": classify_stack(stack)} for stack, n in ranked]


# --------------------------------------------------------------------------------------------
# histograms


def log2_histogram(durations_ns: np.ndarray) -> list[dict[str, int]]:
    """bcc-style power-of-two histogram in µs: rows {lo_ns, hi_ns, count}, zeros in the middle
    kept (the shape shows), leading and trailing empty buckets dropped."""
    values = np.asarray(durations_ns, dtype=np.int64)
    values = values[values >= 0]
    if len(values) == 0:
        return []
    usec = np.maximum(values // 1000, 0)
    # bucket k holds [2**(k-1), 2**k) µs; bucket 0 holds 0 µs
    bucket = np.where(usec == 0, 0, np.floor(np.log2(np.maximum(usec, 1))).astype(np.int64) + 1)
    counts = np.bincount(bucket)
    rows = []
    for k, count in enumerate(counts):
        lo = 0 if k == 0 else (1 << (k - 1))
        hi = 1 if k == 0 else (1 << k)
        rows.append({"lo_ns": lo * 1000, "hi_ns": hi * 1000, "count": int(count)})
    first = next(i for i, r in enumerate(rows) if r["count"])
    return rows[first:]


# --------------------------------------------------------------------------------------------
# slow operations

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


def slow_threshold(median_ns: float | None, factor: float = 10.0) -> int | None:
    """Slow means slower than `factor` times the op's median."""
    if median_ns is None or not np.isfinite(median_ns):
        return None
    return int(median_ns * factor)


# --------------------------------------------------------------------------------------------
# the one-line explanation

MIN_SHARE = 0.10     # a cause must explain at least this much of the slow ops' time to be named
MIN_GROWTH = 0.10    # only ops whose tail grew by more than this are explained


def explanation(op: str, p99_change: float | None, breakdown: Mapping[str, int] | None,
                source: str = "trace", max_causes: int = 2) -> str | None:
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
    return f"{op} p99 {p99_change:+.0%}: " + ", ".join(parts) + estimate


DELAY_WORDS = {"blkio": "in block I/O waits", "freepages": "in reclaim (freepages)",
               "thrashing": "in thrashing (refaults)", "compact": "in compaction",
               "swapin": "in swap-in", "cpu": "waiting for a CPU"}


def delay_explanation(op: str, p99_change: float | None, role: str,
                      role_delays: Mapping[str, Mapping[str, Any]],
                      max_causes: int = 2) -> str | None:
    """From delay accounting alone (no trace or stack samples): 'read p99 +310%: delay
    accounting puts 32% of the reader workers' op time in waiting for block I/O and 22% in
    waiting for a CPU'. Shares are of the role's total op latency. A delay larger than that
    latency (capped share 1.0) accrued mostly outside the ops and is not named."""
    if p99_change is None or p99_change <= MIN_GROWTH:
        return None
    named = [(kind, float(value["share"])) for kind, value in role_delays.items()
             if kind in DELAY_WORDS and value.get("share")
             and MIN_SHARE <= value["share"] < 1.0]
    named.sort(key=lambda item: -item[1])
    if not named:
        return None
    parts = [f"{share:.0%} {DELAY_WORDS[kind]}" for kind, share in named[:max_causes]]
    return (f"{op} p99 {p99_change:+.0%}: delay accounting puts "
            + " and ".join(parts)
            + f" of the {role} workers' op time")


def _cause_words(cause: str) -> str:
    if cause.startswith("waiting") or cause.startswith("other"):
        return cause if cause.startswith("waiting") else f"in D state ({cause[7:]})"
    if cause == "device":
        return "with requests in flight on the device"
    return f"in {cause}"
