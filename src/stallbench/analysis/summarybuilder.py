"""Building a run's summary (summary.py: RunSummary, OpSummary) from its ops, in memory that
does not grow with the number of ops.

A `SummaryBuilder` is fed the ops in batches (in any order) and keeps, per op:

- `histogram`: log-linear counts (histogram.SUB_BITS buckets per power of two, quantiles within
  histogram.QUANTILE_RELATIVE_ERROR) of the ops that started after the warm-up, for the point
  estimates, the distribution shift, bands, CCDF and P(slower);
- per time block of `block_ns` (by start time, from the run's clock start, warm-up included):
  the exact count, sum, min and max, and a coarse histogram (COARSE_SUB_BITS buckets per power
  of two), for timelines and stalls, for the intervals that respect dependence in time
  (intervals.py) and for the stationarity check;
- per worker: count and latency sum after the warm-up;
- the first and last completion per fine time bin, for the longest time without a completion.

A run's clock starts before its monitors and its workers (a guest under QEMU TCG took 1.5-13 s
to its first op), so the warm-up counts from the workload's start, the first op of the run (any
op, any worker): in whole blocks from the block that op started in (`first_data_block`). The
blocks before it are not data, and the run's measured span, which every rate divides by, runs
from the first op (or the warm-up's end) to the last completion (`RunSummary.measured_ns`).
Batches come in any order (a spool per worker), so the warm-up's end is known only at the end:
ops that may still fall in it are kept per block (fine bucket and worker counts, sparse: their
memory grows with the blocks and buckets they occupy, not with the ops) until an earlier first
op or the end of the input decides.

Where no warm-up was stated (`find_warmup`), the run's start-up transient is found at the end
(analysis/transient.py) and left out like a warm-up: the ops of the blocks it may take, up to
transient.MAX_SHARE of the planned run (`planned_ns`; all of them without one), are kept
pending as those of a warm-up are until it is known, never less than the stated minimum
(`warmup_ns`, a workload's own default warm-up).

Paced ops (with a planned start) also get a response-time op, `NAME (response)`: completion
minus planned start, blocked by the planned start.

Memory is O(blocks x occupied coarse buckets) per op: about 3 MiB per op per hour at 1 s blocks,
and at most MAX_BLOCKS blocks (the block length doubles beyond that).
Counts, sums, min and max are exact; only quantiles come from histograms.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from . import histogram as hist
from .blockarrays import BlockHistogram, Growing, PendingBlocks
from .summary import COARSE_SUB_BITS, RESPONSE_SUFFIX, OpSummary, RunSummary, first_data_block
from .transient import MAX_SHARE, find_transient

COARSE_SHIFT = hist.SUB_BITS - COARSE_SUB_BITS
GAP_BINS_PER_BLOCK = 16
_NO_MIN = np.iinfo(np.int64).max
MAX_BLOCKS = 1 << 15      # 9 hours of 1 s blocks; longer runs get longer blocks


class _OpAccumulator:
    def __init__(self, block_ns: int, warmup_blocks: int) -> None:
        self.block_ns = block_ns
        self.gap_bin_ns = max(block_ns // GAP_BINS_PER_BLOCK, 1)
        self.warmup_blocks = warmup_blocks    # the builder's bound: blocks before may be warm-up
        self.histogram = np.zeros(hist.N_BUCKETS, dtype=np.int64)
        self.count = Growing(np.int64, 0)
        self.sum = Growing(np.int64, 0)
        self.min = Growing(np.int64, _NO_MIN)
        self.max = Growing(np.int64, -1)
        self.coarse = BlockHistogram()
        self.first_end = Growing(np.int64, _NO_MIN)
        self.last_end = Growing(np.int64, -1)
        self.blocks = 0
        self.gap_bins = 0
        self.workers: dict[int, list[int]] = {}
        self.pending = PendingBlocks()
        self.last_completion = 0

    def coarsen(self) -> None:
        """Double the block length (very long runs, or absurd start times in a foreign log)."""
        self.count.merge_pairs(np.add)
        self.sum.merge_pairs(np.add)
        self.min.merge_pairs(np.minimum)
        self.max.merge_pairs(np.maximum)
        self.coarse.merge_pairs()
        self.first_end.merge_pairs(np.minimum)
        self.last_end.merge_pairs(np.maximum)
        self.pending.coarsen()
        self.block_ns *= 2
        self.gap_bin_ns *= 2
        self.blocks = -(-self.blocks // 2)
        self.gap_bins = -(-self.gap_bins // 2)

    def lower_bound(self, bound: int) -> None:
        """The warm-up ends earlier than thought (an earlier first op): the pending blocks from
        `bound` on are data."""
        self.warmup_blocks = bound
        buckets, workers = self.pending.take_from(bound)
        if buckets is not None and buckets[0].size:
            np.add.at(self.histogram, buckets[0], buckets[1])
        if workers is not None and workers[0].size:
            self._add_workers(*workers)

    def _add_workers(self, ids: np.ndarray, n: np.ndarray, s: np.ndarray) -> None:
        for w, c, t in zip(ids.tolist(), n.tolist(), s.tolist(), strict=True):
            entry = self.workers.setdefault(w, [0, 0])
            entry[0] += c
            entry[1] += t

    def add(self, worker: np.ndarray, start: np.ndarray, latency: np.ndarray) -> None:
        if start.size == 0:
            return
        fine = hist.bucket_index(latency)
        block = start // self.block_ns
        blocks = int(block.max()) + 1
        self.blocks = max(self.blocks, blocks)
        counts = self.count.reserve(blocks)
        sums = self.sum.reserve(blocks)
        mins = self.min.reserve(blocks)
        maxs = self.max.reserve(blocks)
        low = int(block.min())
        span = blocks - low
        local = block - low
        counts[low:blocks] += np.bincount(local, minlength=span)
        # float64 sums of integers are exact below 2**53 ns (104 days) per block
        sums[low:blocks] += np.rint(np.bincount(local, weights=latency.astype(np.float64),
                                                minlength=span)).astype(np.int64)
        if block.size < 2 or (np.diff(block) >= 0).all():
            edges = np.flatnonzero(np.diff(block)) + 1
            firsts = np.concatenate(([0], edges))
            ids = block[firsts]
            np.minimum.at(mins, ids, np.minimum.reduceat(latency, firsts))
            np.maximum.at(maxs, ids, np.maximum.reduceat(latency, firsts))
        else:
            np.minimum.at(mins, block, latency)
            np.maximum.at(maxs, block, latency)
        self.coarse.add(local, low, blocks, fine >> COARSE_SHIFT)
        after = block >= self.warmup_blocks
        if not after.all():
            early = ~after
            self.pending.add(block[early], fine[early], worker[early], latency[early])
            fine, worker, latency_after = fine[after], worker[after], latency[after]
        else:
            latency_after = latency
        self.histogram += np.bincount(fine, minlength=hist.N_BUCKETS)
        if worker.size:
            if worker.min() >= 0 and worker.max() < 1 << 16:   # worker indexes: bincount
                n = np.bincount(worker, minlength=1)
                s = np.bincount(worker, weights=latency_after.astype(np.float64))
                ids = np.flatnonzero(n)
                n, s = n[ids], np.rint(s[ids]).astype(np.int64)
            else:
                ids, inverse = np.unique(worker, return_inverse=True)
                n = np.bincount(inverse, minlength=ids.size)
                s = np.rint(np.bincount(inverse, weights=latency_after.astype(np.float64),
                                        minlength=ids.size)).astype(np.int64)
            self._add_workers(ids, n, s)
        end = start + latency
        self.last_completion = max(self.last_completion, int(end.max()))
        gap_bin = end // self.gap_bin_ns
        bins = int(gap_bin.max()) + 1
        self.gap_bins = max(self.gap_bins, bins)
        np.minimum.at(self.first_end.reserve(bins), gap_bin, end)
        np.maximum.at(self.last_end.reserve(bins), gap_bin, end)

    def finish(self, blocks: int, start_ns: int, end_ns: int) -> OpSummary:
        def cut(growing: Growing) -> np.ndarray:
            return growing.reserve(blocks)[:blocks].copy()

        self.coarse.reserve(blocks, self.coarse.first, self.coarse.first
                             + self.coarse.data.shape[1])
        coarse = self.coarse.data[:blocks]
        used = np.flatnonzero(coarse.sum(axis=0))
        first = int(used[0]) if used.size else 0
        last = int(used[-1]) + 1 if used.size else 0
        workers = np.array(sorted(self.workers), dtype=np.int64)
        gap_start, gap, exact = self._longest_gap(start_ns, end_ns)
        return OpSummary(
            histogram=self.histogram, block_count=cut(self.count), block_sum=cut(self.sum),
            block_min=cut(self.min), block_max=cut(self.max),
            block_hist=np.ascontiguousarray(coarse[:, first:last]).astype(np.int64),
            coarse_first=self.coarse.first + first,
            workers=workers,
            worker_count=np.array([self.workers[w][0] for w in workers.tolist()], np.int64),
            worker_sum=np.array([self.workers[w][1] for w in workers.tolist()], np.int64),
            warmup_samples=self.pending.samples(), gap_start_ns=gap_start, gap_ns=gap,
            gap_exact=exact)

    def _longest_gap(self, start_ns: int, end_ns: int) -> tuple[int, int, bool]:
        """Like stalls.longest_gap, from the workload's start (the run's first op) and the
        per-bin first and last completions: exact when the gap spans bins; a gap inside one bin
        is only known to be shorter than the bin."""
        run_end = max(end_ns, self.last_completion)
        if self.gap_bins == 0:
            return int(start_ns), int(run_end - start_ns), True
        first = self.first_end.data[:self.gap_bins]
        last = self.last_end.data[:self.gap_bins]
        busy = np.flatnonzero(last >= 0)
        points_from = np.concatenate(([start_ns], last[busy]))
        points_to = np.concatenate((first[busy], [run_end]))
        gaps = points_to - points_from
        i = int(np.argmax(gaps))
        return int(points_from[i]), int(gaps[i]), bool(gaps[i] >= self.gap_bin_ns)


class SummaryBuilder:
    """Accumulates a RunSummary from batches of ops; see the module docstring."""

    _NO_OP_YET = np.iinfo(np.int64).max

    def __init__(self, block_ns: int, warmup_ns: int = 0, find_warmup: bool = False,
                 planned_ns: int | None = None) -> None:
        if block_ns <= 0:
            raise ValueError("block_ns must be positive")
        self.block_ns = int(block_ns)
        self.warmup_ns = max(int(warmup_ns), 0)
        self.find_warmup = find_warmup
        # the ops that may be warm-up: the stated one's, or as far as a transient may reach
        self.pending_ns = self.warmup_ns
        if find_warmup:
            reach = int(MAX_SHARE * planned_ns) + self.block_ns if planned_ns else 1 << 62
            self.pending_ns = max(self.warmup_ns, reach)
        self.first_start: int | None = None       # the run's first op so far
        self.warmup_blocks = self._NO_OP_YET      # blocks before it may be warm-up
        self._ops: dict[str, _OpAccumulator] = {}

    def _lower_bound(self, bound: int) -> None:
        if bound < self.warmup_blocks:
            self.warmup_blocks = bound
            for acc in self._ops.values():
                acc.lower_bound(bound)

    def _fit(self, latest_ns: int) -> None:
        """Keep at most MAX_BLOCKS blocks: double the block length while a start lies beyond
        (the warm-up's end moves to the longer block it falls in)."""
        while latest_ns // self.block_ns >= MAX_BLOCKS:
            self.block_ns *= 2
            for acc in self._ops.values():
                acc.coarsen()
            if self.first_start is not None:
                bound = min(self.warmup_blocks // 2,
                            first_data_block(self.first_start, self.pending_ns, self.block_ns))
                self.warmup_blocks = self._NO_OP_YET
                self._lower_bound(bound)

    def _started(self, start_ns: np.ndarray) -> None:
        """Ops that started at `start_ns`: an earlier first op moves the warm-up's end."""
        first = int(start_ns.min())
        if self.first_start is None or first < self.first_start:
            self.first_start = first
            self._lower_bound(first_data_block(first, self.pending_ns, self.block_ns))

    def declare(self, names: list[str]) -> None:
        """Ops that must appear in the summary even if none completed."""
        for name in names:
            self._op(name)

    def _op(self, name: str) -> _OpAccumulator:
        acc = self._ops.get(name)
        if acc is None:
            acc = self._ops[name] = _OpAccumulator(self.block_ns, self.warmup_blocks)
        return acc

    def add(self, names: list[str], codes: np.ndarray, worker: np.ndarray, start_ns: np.ndarray,
            latency_ns: np.ndarray, intended_ns: np.ndarray | None = None) -> None:
        """One batch: op codes index `names`; intended_ns < 0 means 'not paced'."""
        codes = np.asarray(codes)
        if codes.size == 0:
            return
        worker = np.broadcast_to(np.asarray(worker, dtype=np.int64), codes.shape)
        start_ns = np.maximum(np.asarray(start_ns, dtype=np.int64), 0)
        latency_ns = np.maximum(np.asarray(latency_ns, dtype=np.int64), 0)
        latest = int(start_ns.max())
        if intended_ns is not None:
            latest = max(latest, int(np.asarray(intended_ns, dtype=np.int64).max()))
        self._fit(latest)
        self._started(start_ns)
        first = int(codes[0])
        if (codes == first).all():      # one op per batch (a reader's spool): no sort
            groups = [(first, slice(None))]
        elif len(names) <= 8:           # a few ops: one mask each is cheaper than a sort
            groups = [(code, np.flatnonzero(codes == code)) for code in range(len(names))]
            groups = [(code, idx) for code, idx in groups if idx.size]
        else:
            order = np.argsort(codes, kind="stable")
            bounds = np.searchsorted(codes[order], np.arange(len(names) + 1))
            groups = [(code, order[bounds[code]:bounds[code + 1]])
                      for code in range(len(names)) if bounds[code] < bounds[code + 1]]
        for code, idx in groups:
            name = names[code]
            w, s, lat = worker[idx], start_ns[idx], latency_ns[idx]
            self._op(name).add(w, s, lat)
            if intended_ns is not None:
                planned = np.asarray(intended_ns, dtype=np.int64)[idx]
                paced = planned >= 0
                if paced.any():
                    p = np.maximum(planned[paced], 0)
                    response = np.maximum(s[paced] + lat[paced] - p, 0)
                    self._op(name + RESPONSE_SUFFIX).add(w[paced], p, response)

    def finish(self) -> RunSummary:
        """The summary: the run from its first op to its last completion, its warm-up the
        stated one or, with find_warmup, the transient found (analysis/transient.py)."""
        start = self.first_start or 0
        stated = first_data_block(start, self.warmup_ns, self.block_ns)
        if self.first_start is None:     # no op at all: the warm-up from the clock's start
            self._lower_bound(stated)
        transient = None
        if self.find_warmup:
            transient = find_transient(self._summary(start), stated)
            if transient.warmup_blocks > self.warmup_blocks:    # beyond the planned run's reach
                transient = replace(transient, warmup_blocks=self.warmup_blocks)
            self._lower_bound(transient.warmup_blocks)
        summary = self._summary(start)
        summary.transient = transient
        return summary

    def _summary(self, start: int) -> RunSummary:
        end = max([acc.last_completion for acc in self._ops.values()], default=0)
        blocks = max([acc.blocks for acc in self._ops.values()]
                     + [-(-end // self.block_ns)], default=0)
        blocks = max(blocks, self.warmup_blocks, 1)
        ops = {name: acc.finish(blocks, start, end) for name, acc in self._ops.items()}
        return RunSummary(self.block_ns, self.warmup_blocks, start, end, ops)
