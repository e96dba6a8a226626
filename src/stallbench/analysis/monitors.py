"""Where did the time go: pure functions over monitor columns (numpy arrays, plain dicts).

No file I/O and no printing: compare/where/ loads the tables and calls these (and montables.py for
the totals run.json also holds, slowops.py for the slow operations). Times are int64 ns.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from .delaykinds import DELAY_KINDS

# --------------------------------------------------------------------------------------------
# counters


# the counters seed 000 looked for, in the order a reader wants them: reclaim (direct reclaim,
# failed charges, refaults), throttling, then writeback and dirtying
COUNTER_FAMILIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("reclaim", ("vmstat.allocstall", "vmstat.pgscan_direct", "vmstat.pgsteal_direct",
                 "memcg.failcnt", "memcg.events.max", "memcg.events.oom", "memcg.pgscan",
                 "memcg.pgsteal", "memcg.workingset_refault", "memcg.pgmajfault",
                 "vmstat.pgscan", "vmstat.pgsteal", "vmstat.workingset_refault",
                 "vmstat.pgmajfault", "vmstat.compact_stall", "vmstat.pageoutrun",
                 "memcg.total_pgmajfault", "memcg.total_workingset_refault")),
    ("throttling", ("vmstat.nr_throttled_written", "memcg.events.high")),
    ("writeback", ("vmstat.nr_dirtied", "vmstat.nr_written", "vmstat.nr_vmscan_write",
                   "vmstat.pgpgout", "memcg.pgpgout")),
)
FOLLOWS = 0.25      # a change per op (or per second) below this: the counter follows the ops
#                     (or the clock), and is not a cause


def counter_family(name: str) -> str | None:
    for family, prefixes in COUNTER_FAMILIES:
        if name.startswith(prefixes):
            return family
    return None


def counters_comparison(baseline: Sequence[Mapping[str, int]],
                        candidate: Sequence[Mapping[str, int]],
                        baseline_seconds: float, candidate_seconds: float,
                        baseline_ops: int, candidate_ops: int) -> list[dict[str, Any]]:
    """Seed 000's GOOD/BAD table: mean delta per run in each variant, per second and per
    operation side by side, with the change of each; counters that did not move are left out.
    A counter whose change per op is small while its rate changed only follows the op count
    (`follows` "ops"); one whose rate stayed while its count per op changed follows the clock
    ("time": background counts divided by fewer ops). Order: the reclaim, throttling and
    writeback counters that follow neither (in each family those that grew per op before those
    that fell), then the others by the smaller of their two changes, then those that follow.
    `baseline`/`candidate` hold one {counter: delta} per run."""
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
        change = _ratio_change(base_per_op, cand_per_op)
        if base_per_op is None:
            change = _ratio_change(base_rate, cand_rate)
        change_per_s = _ratio_change(base_rate, cand_rate)
        follows = None
        if change is not None and change_per_s is not None:
            if abs(change) < FOLLOWS <= abs(change_per_s):
                follows = "ops"
            elif abs(change_per_s) < FOLLOWS <= abs(change):
                follows = "time"
        rows.append({"counter": name, "baseline": base_mean, "candidate": cand_mean,
                     "delta": cand_mean - base_mean, "baseline_per_s": base_rate,
                     "candidate_per_s": cand_rate, "baseline_per_op": base_per_op,
                     "candidate_per_op": cand_per_op, "change": change,
                     "change_per_s": change_per_s, "follows": follows,
                     "family": counter_family(name)})
    families = [family for family, _ in COUNTER_FAMILIES]

    def order(row: dict[str, Any]) -> tuple[bool, int, bool, float, float]:
        # a counter that appears from nothing is the largest change of all; one that fell per
        # op (refaults falling because the reads fell) explains no slowdown: after the others
        sizes = [float("inf") if c is None else abs(c)
                 for c in (row["change"], row["change_per_s"])]
        rank = families.index(row["family"]) if row["family"] in families else len(families)
        fell = row["change"] is not None and row["change"] < 0
        return (row["follows"] is not None, rank, fell, -min(sizes), -abs(row["delta"]))

    rows.sort(key=order)
    return rows


def _ratio_change(base: float | None, cand: float | None) -> float | None:
    return cand / base - 1.0 if base and cand is not None else None


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


# the scheduler's own frames at the leaf of a sleeping task's stack (a trace's stack trace keeps
# them; /proc/PID/stack already leaves them out): the function that slept is the one below
SCHEDULER_FRAMES = frozenset((
    "__schedule", "schedule", "io_schedule", "io_schedule_timeout", "schedule_timeout",
    "schedule_timeout_uninterruptible", "schedule_timeout_killable", "schedule_timeout_idle",
    "schedule_hrtimeout", "schedule_hrtimeout_range", "schedule_hrtimeout_range_clock",
    "schedule_preempt_disabled", "preempt_schedule_common", "__cond_resched", "bit_wait_io",
    "bit_wait", "io_schedule_prepare", "io_schedule_finish"))


def sleeping_frame(stack: str) -> str:
    """The innermost frame of a folded stack that is not the scheduler's: where the task slept
    ("" for an empty stack)."""
    frames = [f for f in stack.split(";") if f and f not in SCHEDULER_FRAMES]
    return frames[-1] if frames else ""


def classify_stack(stack: str) -> str:
    """A folded stack (outermost first) -> what it was waiting on, in words."""
    frames = set(stack.split(";"))
    for label, markers in STACK_CLASSES:
        if frames.intersection(markers):
            return label
    leaf = sleeping_frame(stack)
    return f"other: {leaf}" if leaf else "other"


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
             "what": classify_stack(stack), "sleeps_in": sleeping_frame(stack)}
            for stack, n in ranked]


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

def slow_threshold(median_ns: float | None, factor: float = 10.0) -> int | None:
    """Slow means slower than `factor` times the op's median."""
    if median_ns is None or not np.isfinite(median_ns):
        return None
    return int(median_ns * factor)


# --------------------------------------------------------------------------------------------
# the one-line explanation

MIN_SHARE = 0.10     # a cause must explain at least this much of the slow ops' time to be named
MIN_GROWTH = 0.10    # only ops whose tail (else mean) grew by more than this are explained


NEW_OP = "new"       # the statistic of an op the baseline never ran (its change: infinite)


class TailChange(NamedTuple):
    """What an op's explanation leads with: the statistic and its change; `decided`: the op is
    new or the comparison called some row of it worse (its lines otherwise say "if real")."""

    stat: str
    change: float | None
    decided: bool = True


def growth(p99_change: float | None, mean_change: float | None, new: bool = False
           ) -> tuple[str, float | None]:
    """The statistic an op's explanation leads with: NEW_OP for an op only the candidate ran
    (pgioperf's checkpoint-fsync when fsyncs are made frequent: all its time is new), its p99
    when that grew by more than MIN_GROWTH, else its mean when that did (a few long ops, e.g.
    preempted by CPU hogs, add to the op time the delays are shares of without moving the p99),
    else the p99."""
    if new:
        return NEW_OP, math.inf
    if p99_change is not None and p99_change > MIN_GROWTH:
        return "p99", p99_change
    if mean_change is not None and mean_change > MIN_GROWTH:
        return "mean", mean_change
    return "p99", p99_change


NOT_DECIDED = " (not decided): if real,"


def mark_undecided(text: str, op: str, stat: str, change: float | None) -> str:
    """'checkpoint p99 +103% (not decided): if real, at least 39% …' for a line of an op the
    comparison called worse in no row (unclear, too wide, too few samples): the monitors saw
    what they saw, the change itself may be chance."""
    if change is None:
        return text
    head = headline(op, stat, change) + ":"
    return head[:-1] + NOT_DECIDED + text[len(head):] if text.startswith(head) else text


def headline(op: str, stat: str, change: float) -> str:
    """'read p99 +310%' or, for an op the baseline never ran, 'checkpoint-fsync (new: not in
    the baseline)': what an explanation line starts with."""
    if stat == NEW_OP:
        return f"{op} (new: not in the baseline)"
    return f"{op} {stat} {change:+.0%}"


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


DELAY_WORDS = {k.name: k.spent for k in DELAY_KINDS if k.spent is not None}


def delay_causes(role_delays: Mapping[str, Mapping[str, Any]], cpu_first: bool = True
                 ) -> list[tuple[str, float]]:
    """(kind, share of the op time) of the delays worth naming, largest first; with
    `cpu_first` false, run-queue waits after the others (they follow from the ops' sleeps:
    each wake-up queues for a CPU, so they are not the cause when something made the ops
    sleep)."""
    named = [(kind, float(value["share"])) for kind, value in role_delays.items()
             if kind in DELAY_WORDS and value.get("share") and value["share"] >= MIN_SHARE]
    return sorted(named, key=lambda item: (not cpu_first and item[0] == "cpu"
                                           and len(named) > 1, -item[1]))


def delay_explanation(op: str, p99_change: float | None, role: str,
                      role_delays: Mapping[str, Mapping[str, Any]], max_causes: int = 2,
                      mechanism: Mapping[str, str] | None = None,
                      cpu_first: bool = True, stat: str = "p99") -> str | None:
    """From delay accounting alone (no trace or stack samples): 'read p99 +310%: at least 86%
    of the reader workers' op time was in block I/O waits (...mechanism...), 12% waiting for a
    CPU'. Shares are of the op time, counting only the delays that must have been inside the
    ops (analysis/inops.py), so none exceeds 100%. `mechanism[kind]` says what caused a kind
    where the run's settings or counters tell, or which monitor would."""
    if p99_change is None or p99_change <= MIN_GROWTH:
        return None
    named = delay_causes(role_delays, cpu_first)
    if not named:
        return None
    mechanism = mechanism or {}
    parts = []
    for i, (kind, share) in enumerate(named[:max_causes]):
        words = DELAY_WORDS[kind] + (f" ({mechanism[kind]})" if kind in mechanism else "")
        parts.append(f"at least {share:.0%} of the {role} workers' op time was {words}" if i == 0
                     else f"{share:.0%} {words}")
    return f"{headline(op, stat, p99_change)}: delay accounting: " + ", ".join(parts)


def _cause_words(cause: str) -> str:
    if cause.startswith("waiting") or cause.startswith("other"):
        return cause if cause.startswith("waiting") else f"in D state ({cause[7:]})"
    if cause == "device":
        return "with requests in flight on the device"
    return f"in {cause}"
