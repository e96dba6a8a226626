"""The blocked stacks: what each waited on (STACK_CLASSES: reclaim, throttling, fsync, page
lock...; else the frame it slept in), the most frequent ones of a variant, and where the
candidate's leave the baseline's (pure).

Of the stacks a variant's tasks were sampled (or traced) in while in D state, grouped by the
function they slept in (sleeping_frame), the one whose share of the samples grew most
against the baseline is the sleep the change brought; its most frequent stack is compared with
the baseline's stack that shares the longest path from the syscall in, and the frames after the
last shared one are the line a kernel engineer reads: where the code went somewhere else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .growth import MIN_SHARE
from .section import StackRow, Stacks

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


def top_stacks(counts: Mapping[str, int], limit: int = 8) -> list[dict[str, Any]]:
    """The most frequent blocked stacks with their share of all blocked samples."""
    total = sum(counts.values())
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:limit]
    return [{"stack": stack, "samples": n, "share": n / total if total else 0.0,
             "what": classify_stack(stack), "sleeps_in": sleeping_frame(stack)}
            for stack, n in ranked]


def blocked_stacks(folded: Sequence[Mapping[str, int]], trace_dstate: Sequence[np.ndarray]
                   ) -> Stacks:
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
                  [StackRow(**row) for row in top_stacks(counts)])


def dstate_stacks(category: np.ndarray, stack: np.ndarray) -> np.ndarray:
    """The non-empty stacks of a trace table's D-state rows."""
    stack = np.asarray(stack, dtype=object)
    keep = (np.asarray(category, dtype=object) == "dstate") & ~np.equal(stack, None)
    keep &= stack != ""
    return stack[keep]


ENTRY_FRAMES = ("entry_SYSCALL_64_after_hwframe", "do_syscall_64")
SHOWN_FRAMES = 4            # of the path after the last shared frame, the last ones shown


@dataclass(frozen=True)
class StackChange:
    sleeps_in: str          # the function the tasks slept in
    share: float            # of the candidate's blocked samples
    base_share: float       # of the baseline's
    shared: str | None      # the last frame the stack shares with the baseline's nearest one
    path: tuple[str, ...]   # the frames after it, down to the sleep
    base_path: tuple[str, ...] = ()     # the baseline's nearest stack's frames after it


def grown_sleep(here: Sequence[tuple[str, float]], base: Sequence[tuple[str, float]]
                ) -> StackChange | None:
    """(stack, share) of the candidate's and the baseline's top blocked stacks -> the sleep
    whose share grew most by MIN_SHARE or more, with where its stack leaves the baseline's;
    None where no sleep grew so."""
    def by_frame(rows: Sequence[tuple[str, float]]) -> dict[str, float]:
        out: dict[str, float] = {}
        for stack, share in rows:
            frame = sleeping_frame(stack)
            if frame:
                out[frame] = out.get(frame, 0.0) + share
        return out

    now, before = by_frame(here), by_frame(base)
    growth = {f: share - before.get(f, 0.0) for f, share in now.items()}
    if not growth:
        return None
    frame = max(growth, key=lambda f: (growth[f], f))
    if growth[frame] < MIN_SHARE:
        return None
    stack = max((s for s, _ in here if sleeping_frame(s) == frame),
                key=lambda s: dict(here)[s])
    frames = _path(stack)
    nearest = max((_path(other) for other, _ in base), key=lambda p: _common(frames, p),
                  default=[])
    shared_len = _common(frames, nearest)
    shared = frames[shared_len - 1] if shared_len else None
    return StackChange(frame, now[frame], before.get(frame, 0.0), shared,
                       tuple(frames[shared_len:]), tuple(nearest[shared_len:]))


def _path(stack: str) -> list[str]:
    return [f for f in stack.split(";") if f and f not in ENTRY_FRAMES]


def _common(a: list[str], b: list[str]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def change_line(label: str, change: StackChange) -> str:
    """'dirty: blocked tasks now sleep in balance_dirty_pages (72% of the blocked samples, 0% in
    the baseline), reached from ext4_buffered_write_iter through ...;balance_dirty_pages'."""
    path = ";".join(change.path[-SHOWN_FRAMES:])
    more = "...;" if len(change.path) > SHOWN_FRAMES else ""
    if not change.shared:
        where = f"; a stack the baseline never had: {more}{path}"
    elif not change.path:
        went = ";".join(change.base_path[:SHOWN_FRAMES])
        where = (f"; it sleeps in {change.shared} itself, where the baseline's stack went on "
                 f"into {went}{';...' if len(change.base_path) > SHOWN_FRAMES else ''}")
    else:
        where = f"; its stack leaves the baseline's after {change.shared}: {more}{path}"
    return (f"{label}: blocked tasks sleep in {change.sleeps_in} ({change.share:.0%} of the "
            f"blocked samples, {change.base_share:.0%} in the baseline){where}")
