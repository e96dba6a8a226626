"""A run's summary: what the comparison keeps of a run's ops, in memory that does not grow with
the number of ops (summarybuilder.py builds it from the ops; results/summaryfile.py stores it
as summary.parquet).

`RunSummary` holds, per op, an `OpSummary`: the fine histogram of the ops after the warm-up,
each time block's exact count, sum, min, max and coarse histogram (warm-up included), each
worker's count and sum, and the longest time without a completion. What a reader asks of it is
here: a run's block length (`block_ns_for`), where its warm-up ends (`first_data_block`: in
whole blocks from the block of the run's first op), its measured span (`RunSummary.measured_ns`,
from the first op or the warm-up's end to the last completion, what every rate divides by) and
an op's exact totals after the warm-up (`op_totals`). Where no warm-up was stated, the summary
also says what analysis/transient.py found at the run's start (`Transient`).

Paced ops (with a planned start) also have a response-time op, `NAME (response)`
(RESPONSE_SUFFIX): completion minus planned start.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from . import histogram as hist

RESPONSE_SUFFIX = " (response)"
COARSE_SUB_BITS = 4
# block lengths a run may use: each divides a second, so 1 s timelines are whole blocks
BLOCK_CHOICES_NS = (100_000_000, 200_000_000, 250_000_000, 500_000_000, 1_000_000_000)
TARGET_BLOCKS = 64


def block_ns_for(duration_s: float | None, warmup_s: float = 0.0) -> int:
    """The block length for a run: the shortest choice that gives at most ~TARGET_BLOCKS blocks
    (1 s for runs over a minute) and divides the warm-up, so the warm-up ends on a block edge."""
    warmup_ns = int(round((warmup_s or 0.0) * 1e9))
    wanted = (duration_s or 0.0) * 1e9 / TARGET_BLOCKS
    for choice in BLOCK_CHOICES_NS:
        if choice >= wanted and warmup_ns % choice == 0:
            return choice
    for choice in reversed(BLOCK_CHOICES_NS):
        if warmup_ns % choice == 0:
            return choice
    return BLOCK_CHOICES_NS[0]


def first_data_block(start_ns: int, warmup_ns: int, block_ns: int) -> int:
    """The first block after the warm-up, counted in whole blocks from the block of the run's
    first op (`start_ns`, on the run's clock): the warm-up lasts warmup_ns within one block, and
    without a warm-up the block of the first op is data."""
    return int(start_ns) // block_ns + -(-int(warmup_ns) // block_ns)


def coarse_lower_edges() -> np.ndarray:
    return hist.bucket_lower_edges(COARSE_SUB_BITS)


@dataclass
class OpSummary:
    """One op of one run. Block arrays cover blocks 0..blocks-1 of the run (warm-up included);
    `block_hist` holds coarse buckets coarse_first..coarse_first+width-1."""

    histogram: np.ndarray      # int64 (hist.N_BUCKETS,), after the warm-up
    block_count: np.ndarray    # int64 (blocks,)
    block_sum: np.ndarray      # int64 (blocks,) latency sum
    block_min: np.ndarray      # int64 (blocks,), INT64_MAX where the block is empty
    block_max: np.ndarray      # int64 (blocks,), -1 where the block is empty
    block_hist: np.ndarray     # int64 (blocks, width)
    coarse_first: int
    workers: np.ndarray        # int64 worker ids (after the warm-up)
    worker_count: np.ndarray   # int64
    worker_sum: np.ndarray     # int64 latency sum per worker
    warmup_samples: int
    gap_start_ns: int          # the longest time without a completion of this op
    gap_ns: int
    gap_exact: bool            # False: shorter than a gap bin, only bounded

    @property
    def blocks(self) -> int:
        return int(self.block_count.size)

    @classmethod
    def empty(cls, blocks: int) -> OpSummary:
        """An op a run never did: no samples in any of its blocks."""
        none = np.empty(0, np.int64)
        return cls(histogram=np.zeros(hist.N_BUCKETS, np.int64),
                   block_count=np.zeros(blocks, np.int64), block_sum=np.zeros(blocks, np.int64),
                   block_min=np.full(blocks, np.iinfo(np.int64).max),
                   block_max=np.full(blocks, -1, np.int64),
                   block_hist=np.zeros((blocks, 0), np.int64), coarse_first=0, workers=none,
                   worker_count=none.copy(), worker_sum=none.copy(), warmup_samples=0,
                   gap_start_ns=0, gap_ns=0, gap_exact=True)


# what analysis/transient.py found at a run's start
SETTLED = "settled"       # a transient, left out: the level settled after it
STEADY = "steady"         # no transient that matters
UNSETTLED = "unsettled"   # the level moved later in the run: nothing left out for it
TOO_SHORT = "too short"   # too few blocks to tell
TRANSIENT_OUTCOMES = (SETTLED, STEADY, UNSETTLED, TOO_SHORT)


@dataclass(frozen=True)
class Transient:
    """The start-up transient looked for where no warm-up was stated (analysis/transient.py):
    the first block of the run's data on its block clock (the stated minimum's, or where the
    transient ended), the outcome, and the op and statistic whose level settled last (SETTLED)
    or moved late (UNSETTLED)."""

    warmup_blocks: int
    outcome: str
    op: str | None = None
    stat: str | None = None


@dataclass
class RunSummary:
    """One run's ops on its clock: the workload started at `start_ns` (the first op), the
    statistics start at block `warmup_blocks` (first_data_block), the run ended at `end_ns`
    (the last completion); `transient` is what was found at its start where no warm-up was
    stated (None: the warm-up is the stated one)."""

    block_ns: int
    warmup_blocks: int
    start_ns: int
    end_ns: int
    ops: dict[str, OpSummary]
    transient: Transient | None = None

    @property
    def blocks(self) -> int:
        return max((o.blocks for o in self.ops.values()), default=0)

    @property
    def warmup_ns(self) -> int:
        """Where the warm-up ends on the run's clock: ops that started before are left out."""
        return self.warmup_blocks * self.block_ns

    @property
    def data_start_ns(self) -> int:
        """Where the measured span starts: the warm-up's end, or the first op without one."""
        return max(self.warmup_ns, self.start_ns)

    @property
    def measured_ns(self) -> int:
        """The run's measured span after the warm-up, the time every rate divides by: the sum of
        block_durations_ns over the blocks after the warm-up."""
        return max(self.end_ns - self.data_start_ns, 0)

    def block_durations_ns(self, blocks: int | None = None) -> np.ndarray:
        """The time of the run's span in each block: the block of the first op cut at it, the
        last one at the end of the run, blocks outside the span 0."""
        blocks = self.blocks if blocks is None else blocks
        starts = np.arange(blocks, dtype=np.int64) * self.block_ns
        ends = np.minimum(starts + self.block_ns, self.end_ns)
        return np.maximum(ends - np.maximum(starts, self.start_ns), 0)


class OpTotals(NamedTuple):
    samples: int
    sum_ns: int               # latency sum
    min_ns: int | None        # None without samples
    max_ns: int | None


def op_totals(op: OpSummary, warmup_blocks: int) -> OpTotals:
    """An op's samples, latency sum, min and max after the warm-up, exact."""
    count = op.block_count[warmup_blocks:]
    if not count.any():
        return OpTotals(0, 0, None, None)
    used = count > 0
    return OpTotals(int(count.sum()), int(op.block_sum[warmup_blocks:].sum()),
                    int(op.block_min[warmup_blocks:][used].min()),
                    int(op.block_max[warmup_blocks:][used].max()))
