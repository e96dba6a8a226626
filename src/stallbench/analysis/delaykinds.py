"""The kinds of Linux delay accounting (taskstats), declared once: where the kernel keeps each
kind's count and total in struct taskstats, the first version that has it, and the words the
reports use for it. monitors/taskstats.py decodes and monitors/delay.py names the `delay`
table's columns from this table; analysis/where/ takes their words from it (delays.py,
longest.py) and their groups (delays.py, causes.py, mechanism.py, explanations.py), montables.py the
groups of its totals."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DelayKind:
    name: str               # the delay table's columns: {name}_count, {name}_ns, {name}_max_ns
    count_at: int           # byte offsets in struct taskstats (include/uapi/linux/taskstats.h)
    total_at: int
    since: int              # the first taskstats version that has this kind
    noun: str               # "the longest single {noun} was 14 ms" (analysis/where/longest.py)
    spent: str | None       # "86% of the op time was {spent}": a cause worth naming (None: not)
    state: str | None = None    # the task's one state all through the wait: "runnable" (on a run
    #                             queue) or "asleep" (io_schedule); None: partly on a CPU. A task
    #                             is in one state at a time, and asleep off a CPU
    #                             (analysis/where/delays.py)
    reclaim: bool = False   # a stall of memory reclaim: the memory limit or low system memory
    #                         is its mechanism (analysis/where/mechanism.py)
    blocks: bool = False    # the task waited for the device or for memory, not for a CPU: what
    #                         makes an op's change a blocking one (analysis/where/explanations.py)


# in struct taskstats order: v16+ keeps {kind}_delay_max, {kind}_delay_min pairs at its end in
# this order too
DELAY_KINDS: tuple[DelayKind, ...] = (
    DelayKind("cpu", 16, 24, 1, "run-queue wait", "waiting for a CPU", state="runnable"),
    DelayKind("blkio", 32, 40, 1, "block I/O wait", "in block I/O waits", state="asleep",
              blocks=True),
    DelayKind("swapin", 48, 56, 1, "swap-in", "in swap-in", blocks=True),
    DelayKind("freepages", 312, 320, 6, "direct-reclaim stall", "in direct reclaim (freepages)",
              reclaim=True, blocks=True),
    DelayKind("thrashing", 328, 336, 9, "thrashing (refault) wait", "in thrashing (refaults)",
              reclaim=True, blocks=True),
    DelayKind("compact", 352, 360, 11, "compaction stall", "in compaction", reclaim=True,
              blocks=True),
    DelayKind("wpcopy", 400, 408, 13, "copy-on-write copy", None),
    DelayKind("irq", 416, 424, 14, "IRQ delay", None),
)
DELAY_KIND_NAMES: tuple[str, ...] = tuple(k.name for k in DELAY_KINDS)
ONE_STATE: tuple[str, ...] = tuple(k.name for k in DELAY_KINDS if k.state)   # cannot overlap
ASLEEP: tuple[str, ...] = tuple(k.name for k in DELAY_KINDS if k.state == "asleep")
RECLAIM: tuple[str, ...] = tuple(k.name for k in DELAY_KINDS if k.reclaim)
BLOCKING: tuple[str, ...] = tuple(k.name for k in DELAY_KINDS if k.blocks)
