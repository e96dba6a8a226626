"""The kinds of Linux delay accounting (taskstats), declared once: where the kernel keeps each
kind's count and total in struct taskstats, the first version that has it, and the words the
reports use for it. monitors/delay.py decodes and names the `delay` table's columns from this
table; analysis/monitors.py and analysis/delaymax.py take their words from it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DelayKind:
    name: str               # the delay table's columns: {name}_count, {name}_ns, {name}_max_ns
    count_at: int           # byte offsets in struct taskstats (include/uapi/linux/taskstats.h)
    total_at: int
    since: int              # the first taskstats version that has this kind
    noun: str               # "the longest single {noun} was 14 ms" (analysis/delaymax.py)
    spent: str | None       # "86% of the op time was {spent}": a cause worth naming (None: not)


# in struct taskstats order: v16+ keeps {kind}_delay_max, {kind}_delay_min pairs at its end in
# this order too
DELAY_KINDS: tuple[DelayKind, ...] = (
    DelayKind("cpu", 16, 24, 1, "run-queue wait", "waiting for a CPU"),
    DelayKind("blkio", 32, 40, 1, "block I/O wait", "in block I/O waits"),
    DelayKind("swapin", 48, 56, 1, "swap-in", "in swap-in"),
    DelayKind("freepages", 312, 320, 6, "direct-reclaim stall", "in direct reclaim (freepages)"),
    DelayKind("thrashing", 328, 336, 9, "thrashing (refault) wait", "in thrashing (refaults)"),
    DelayKind("compact", 352, 360, 11, "compaction stall", "in compaction"),
    DelayKind("wpcopy", 400, 408, 13, "copy-on-write copy", None),
    DelayKind("irq", 416, 424, 14, "IRQ delay", None),
)
DELAY_KIND_NAMES: tuple[str, ...] = tuple(k.name for k in DELAY_KINDS)
