"""Per-run summaries: everything the comparison needs from a run's ops, in memory that does not
grow with the number of ops.

A `SummaryBuilder` is fed the ops in batches (in any order) and keeps, per op:

- `histogram`: log-linear counts (histogram.SUB_BITS buckets per power of two, quantiles within
  histogram.QUANTILE_RELATIVE_ERROR) of the ops that started after the warm-up, for the point
  estimates, the distribution shift, bands, CCDF and P(slower);
- per time block of `block_ns` (by start time, from the run start, warm-up included): the exact
  count, sum, min and max, and a coarse histogram (COARSE_SUB_BITS buckets per power of two),
  for timelines and stalls, for the intervals that respect dependence in time (intervals.py)
  and for the stationarity check;
- per worker: count and latency sum after the warm-up;
- the first and last completion per fine time bin, for the longest time without a completion.

Paced ops (with a planned start) also get a response-time op, `NAME (response)`: completion
minus planned start, blocked by the planned start.

Memory is O(blocks x occupied coarse buckets) per op: about 1 MiB per op per hour at 1 s blocks.
Counts, sums, min and max are exact; only quantiles come from histograms.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import histogram as hist

RESPONSE_SUFFIX = " (response)"
COARSE_SUB_BITS = 4
COARSE_SHIFT = hist.SUB_BITS - COARSE_SUB_BITS
N_COARSE = hist.N_BUCKETS >> COARSE_SHIFT
GAP_BINS_PER_BLOCK = 16
# block lengths a run may use: each divides a second, so 1 s timelines are whole blocks
BLOCK_CHOICES_NS = (100_000_000, 200_000_000, 250_000_000, 500_000_000, 1_000_000_000)
TARGET_BLOCKS = 64
_NO_MIN = np.iinfo(np.int64).max


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


@dataclass
class RunSummary:
    block_ns: int
    warmup_blocks: int
    duration_ns: int
    ops: dict[str, OpSummary]

    @property
    def blocks(self) -> int:
        return max((o.blocks for o in self.ops.values()), default=0)

    @property
    def warmup_ns(self) -> int:
        return self.warmup_blocks * self.block_ns

    def block_durations_ns(self, blocks: int | None = None) -> np.ndarray:
        """Length of each block, the last one cut at the end of the run."""
        blocks = self.blocks if blocks is None else blocks
        starts = np.arange(blocks, dtype=np.int64) * self.block_ns
        ends = np.minimum(starts + self.block_ns, max(self.duration_ns, starts[-1] + 1)
                          if blocks else 0)
        return np.maximum(ends - starts, 1)


def op_totals(op: OpSummary, warmup_blocks: int) -> tuple[int, int, int | None, int | None]:
    """(samples, latency sum, min, max) after the warm-up, exact."""
    count = op.block_count[warmup_blocks:]
    if not count.any():
        return 0, 0, None, None
    used = count > 0
    return (int(count.sum()), int(op.block_sum[warmup_blocks:].sum()),
            int(op.block_min[warmup_blocks:][used].min()),
            int(op.block_max[warmup_blocks:][used].max()))


class _Growing:
    """An array that grows along its first axis, doubling, filled with `fill`."""

    def __init__(self, width: int | None, dtype, fill) -> None:
        self.width, self.dtype, self.fill = width, dtype, fill
        shape = (16,) if width is None else (16, width)
        self.data = np.full(shape, fill, dtype=dtype)

    def reserve(self, rows: int) -> np.ndarray:
        if rows > self.data.shape[0]:
            size = max(rows, 2 * self.data.shape[0])
            shape = (size,) if self.width is None else (size, self.width)
            grown = np.full(shape, self.fill, dtype=self.dtype)
            grown[:self.data.shape[0]] = self.data
            self.data = grown
        return self.data


class _OpAccumulator:
    def __init__(self, block_ns: int, warmup_blocks: int) -> None:
        self.block_ns = block_ns
        self.gap_bin_ns = max(block_ns // GAP_BINS_PER_BLOCK, 1)
        self.warmup_blocks = warmup_blocks
        self.histogram = np.zeros(hist.N_BUCKETS, dtype=np.int64)
        self.count = _Growing(None, np.int64, 0)
        self.sum = _Growing(None, np.int64, 0)
        self.min = _Growing(None, np.int64, _NO_MIN)
        self.max = _Growing(None, np.int64, -1)
        self.coarse = _Growing(N_COARSE, np.int64, 0)
        self.first_end = _Growing(None, np.int64, _NO_MIN)
        self.last_end = _Growing(None, np.int64, -1)
        self.blocks = 0
        self.gap_bins = 0
        self.workers: dict[int, list[int]] = {}
        self.warmup_samples = 0
        self.last_completion = 0

    def add(self, worker: np.ndarray, start: np.ndarray, latency: np.ndarray) -> None:
        if start.size == 0:
            return
        start = np.maximum(start, 0)
        latency = np.maximum(latency, 0)
        fine = hist.bucket_index(latency)
        block = start // self.block_ns
        blocks = int(block.max()) + 1
        self.blocks = max(self.blocks, blocks)
        counts = self.count.reserve(blocks)
        sums = self.sum.reserve(blocks)
        mins = self.min.reserve(blocks)
        maxs = self.max.reserve(blocks)
        coarse = self.coarse.reserve(blocks)
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
        cell = local * N_COARSE + (fine >> COARSE_SHIFT)
        coarse[low:blocks] += np.bincount(cell, minlength=span * N_COARSE).reshape(span, N_COARSE)
        after = block >= self.warmup_blocks
        if not after.all():
            self.warmup_samples += int((~after).sum())
            fine, worker, latency_after = fine[after], worker[after], latency[after]
        else:
            latency_after = latency
        self.histogram += np.bincount(fine, minlength=hist.N_BUCKETS)
        if worker.size:
            ids, inverse = np.unique(worker, return_inverse=True)
            n = np.bincount(inverse, minlength=ids.size)
            s = np.rint(np.bincount(inverse, weights=latency_after.astype(np.float64),
                                    minlength=ids.size)).astype(np.int64)
            for w, c, t in zip(ids.tolist(), n.tolist(), s.tolist(), strict=True):
                entry = self.workers.setdefault(w, [0, 0])
                entry[0] += c
                entry[1] += t
        end = start + latency
        self.last_completion = max(self.last_completion, int(end.max()))
        gap_bin = end // self.gap_bin_ns
        bins = int(gap_bin.max()) + 1
        self.gap_bins = max(self.gap_bins, bins)
        np.minimum.at(self.first_end.reserve(bins), gap_bin, end)
        np.maximum.at(self.last_end.reserve(bins), gap_bin, end)

    def finish(self, blocks: int, duration_ns: int) -> OpSummary:
        def cut(growing: _Growing) -> np.ndarray:
            data = growing.reserve(blocks)[:blocks]
            return data.copy()

        coarse = cut(self.coarse)
        used = np.flatnonzero(coarse.sum(axis=0))
        first = int(used[0]) if used.size else 0
        last = int(used[-1]) + 1 if used.size else 0
        workers = np.array(sorted(self.workers), dtype=np.int64)
        gap_start, gap, exact = self._longest_gap(duration_ns)
        return OpSummary(
            histogram=self.histogram, block_count=cut(self.count), block_sum=cut(self.sum),
            block_min=cut(self.min), block_max=cut(self.max),
            block_hist=np.ascontiguousarray(coarse[:, first:last]), coarse_first=first,
            workers=workers,
            worker_count=np.array([self.workers[w][0] for w in workers.tolist()], np.int64),
            worker_sum=np.array([self.workers[w][1] for w in workers.tolist()], np.int64),
            warmup_samples=self.warmup_samples, gap_start_ns=gap_start, gap_ns=gap,
            gap_exact=exact)

    def _longest_gap(self, duration_ns: int) -> tuple[int, int, bool]:
        """Like stalls.longest_gap, from the per-bin first and last completions: exact when the
        gap spans bins; a gap inside one bin is only known to be shorter than the bin."""
        run_end = max(duration_ns, self.last_completion)
        if self.gap_bins == 0:
            return 0, int(run_end), True
        first = self.first_end.data[:self.gap_bins]
        last = self.last_end.data[:self.gap_bins]
        busy = np.flatnonzero(last >= 0)
        points_from = np.concatenate(([0], last[busy]))
        points_to = np.concatenate((first[busy], [run_end]))
        gaps = points_to - points_from
        i = int(np.argmax(gaps))
        return int(points_from[i]), int(gaps[i]), bool(gaps[i] >= self.gap_bin_ns)


class SummaryBuilder:
    """Accumulates a RunSummary from batches of ops; see the module docstring."""

    def __init__(self, block_ns: int, warmup_ns: int = 0) -> None:
        if block_ns <= 0:
            raise ValueError("block_ns must be positive")
        self.block_ns = int(block_ns)
        self.warmup_blocks = int(-(-int(warmup_ns) // self.block_ns)) if warmup_ns > 0 else 0
        self._ops: dict[str, _OpAccumulator] = {}

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
        start_ns = np.asarray(start_ns, dtype=np.int64)
        latency_ns = np.asarray(latency_ns, dtype=np.int64)
        order = np.argsort(codes, kind="stable")
        bounds = np.searchsorted(codes[order], np.arange(len(names) + 1))
        for code, name in enumerate(names):
            if bounds[code] == bounds[code + 1]:
                continue
            idx = order[bounds[code]:bounds[code + 1]]
            w, s, lat = worker[idx], start_ns[idx], latency_ns[idx]
            self._op(name).add(w, s, lat)
            if intended_ns is not None:
                planned = np.asarray(intended_ns, dtype=np.int64)[idx]
                paced = planned >= 0
                if paced.any():
                    p = planned[paced]
                    response = np.maximum(s[paced] + lat[paced] - p, 0)
                    self._op(name + RESPONSE_SUFFIX).add(w[paced], p, response)

    def finish(self, duration_ns: int | None = None) -> RunSummary:
        ends = [acc.last_completion for acc in self._ops.values()]
        duration = int(duration_ns) if duration_ns and duration_ns > 0 else max(ends, default=0)
        blocks = max([acc.blocks for acc in self._ops.values()]
                     + [-(-duration // self.block_ns)], default=0)
        blocks = max(blocks, self.warmup_blocks, 1)
        ops = {name: acc.finish(blocks, duration) for name, acc in self._ops.items()}
        return RunSummary(self.block_ns, self.warmup_blocks, duration, ops)


def summarize_arrays(ops: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray | None]],
                     duration_ns: int, block_ns: int, warmup_ns: int = 0,
                     worker: dict[str, np.ndarray] | None = None) -> RunSummary:
    """A RunSummary of in-memory arrays: {op: (start_ns, latency_ns, intended_ns or None)}."""
    builder = SummaryBuilder(block_ns, warmup_ns)
    for name, (start, latency, intended) in ops.items():
        w = (worker or {}).get(name, np.zeros(len(start), dtype=np.int64))
        builder.add([name], np.zeros(len(start), dtype=np.int64), w, start, latency, intended)
    return builder.finish(duration_ns)
