"""The growing per-block arrays a run's summary is accumulated in (summarybuilder.py's
SummaryBuilder): arrays that double along the blocks, a coarse histogram per block over the
buckets seen, and the sparse per-block counts of the ops that may yet turn out to be in the
warm-up."""

from __future__ import annotations

import numpy as np


class Growing:
    """An array that grows along its first axis, doubling, filled with `fill`."""

    def __init__(self, dtype, fill) -> None:
        self.dtype, self.fill = dtype, fill
        self.data = np.full(16, fill, dtype=dtype)

    def reserve(self, rows: int) -> np.ndarray:
        if rows > self.data.shape[0]:
            grown = np.full(max(rows, 2 * self.data.shape[0]), self.fill, dtype=self.dtype)
            grown[:self.data.shape[0]] = self.data
            self.data = grown
        return self.data

    def merge_pairs(self, reduce) -> None:
        """Halve the resolution: element i becomes reduce(old 2i, old 2i+1)."""
        data = self.data
        if data.shape[0] % 2:
            data = np.concatenate([data, np.full(1, self.fill, self.dtype)])
        self.data = reduce(data[0::2], data[1::2])


class BlockHistogram:
    """Coarse histogram per block: rows grow with the blocks, columns only span the coarse
    buckets seen (a run's latencies cover a few powers of two, not all 49)."""

    def __init__(self) -> None:
        self.first = 0
        self.data = np.zeros((16, 0), dtype=np.int32)

    def add(self, local_block: np.ndarray, low_block: int, blocks: int,
            coarse: np.ndarray) -> None:
        low_col, high_col = int(coarse.min()), int(coarse.max()) + 1
        self.reserve(blocks, low_col, high_col)
        width = high_col - low_col
        span = blocks - low_block
        cells = np.bincount(local_block * width + (coarse - low_col), minlength=span * width)
        column = low_col - self.first
        self.data[low_block:blocks, column:column + width] += \
            cells.reshape(span, width).astype(np.int32)

    def reserve(self, rows: int, low_col: int, high_col: int) -> None:
        have_rows, have_width = self.data.shape
        first = min(self.first, low_col) if have_width else low_col
        last = max(self.first + have_width, high_col) if have_width else high_col
        new_rows = max(rows, have_rows) if rows <= have_rows else max(rows, 2 * have_rows)
        if new_rows == have_rows and first == self.first and last - first == have_width:
            return
        grown = np.zeros((new_rows, last - first), dtype=np.int32)
        if have_width:
            grown[:have_rows, self.first - first:self.first - first + have_width] = self.data
        self.data, self.first = grown, first

    def merge_pairs(self) -> None:
        data = self.data
        if data.shape[0] % 2:
            data = np.vstack([data, np.zeros((1, data.shape[1]), np.int32)])
        self.data = data[0::2] + data[1::2]


def grouped(block: np.ndarray, key: np.ndarray, *values: np.ndarray
             ) -> tuple[np.ndarray, ...]:
    """Rows with equal (block, key) merged: (block, key, and the sum of each of `values`)."""
    if block.size == 0:
        return (block, key, *values)
    order = np.lexsort((key, block))
    block, key = block[order], key[order]
    firsts = np.flatnonzero(np.concatenate(([True], (np.diff(block) != 0) | (np.diff(key) != 0))))
    return (block[firsts], key[firsts],
            *(np.add.reduceat(np.asarray(v)[order], firsts) for v in values))


class PendingBlocks:
    """The ops of blocks that may yet turn out to be in the warm-up, per block: counts per fine
    bucket, and count and latency sum per worker (sparse rows, merged as they grow)."""

    def __init__(self) -> None:
        self.buckets: list[tuple[np.ndarray, ...]] = []   # (block, bucket, count)
        self.workers: list[tuple[np.ndarray, ...]] = []   # (block, worker, count, sum)
        self.rows = 0
        self.merged_rows = 0

    def add(self, block: np.ndarray, fine: np.ndarray, worker: np.ndarray,
            latency: np.ndarray) -> None:
        ones = np.ones(block.size, np.int64)
        self.buckets.append(grouped(block, fine.astype(np.int64), ones))
        self.workers.append(grouped(block, worker.astype(np.int64), ones,
                                     latency.astype(np.int64)))
        self.rows += self.buckets[-1][0].size + self.workers[-1][0].size
        if self.rows > 2 * self.merged_rows + 4096:
            self._merge()

    def _merge(self) -> None:
        for name in ("buckets", "workers"):
            parts = getattr(self, name)
            if len(parts) > 1:
                columns = zip(*parts, strict=True)
                setattr(self, name, [grouped(*(np.concatenate(c) for c in columns))])
        self.rows = self.merged_rows = sum(p[0].size for p in (*self.buckets, *self.workers))

    def coarsen(self) -> None:
        """Blocks twice as long: block i becomes i // 2."""
        self.buckets = [(p[0] // 2, *p[1:]) for p in self.buckets]
        self.workers = [(p[0] // 2, *p[1:]) for p in self.workers]
        self._merge()

    def take_from(self, bound: int) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
        """Remove and return the rows of blocks >= bound: (bucket, count), (worker, count, sum)."""
        self._merge()
        taken = []
        for name in ("buckets", "workers"):
            parts = getattr(self, name)
            if not parts:
                taken.append(None)
                continue
            rows = parts[0]
            later = rows[0] >= bound
            setattr(self, name, [tuple(c[~later] for c in rows)])
            taken.append(tuple(c[later] for c in rows[1:]))
        self.rows = self.merged_rows = sum(p[0].size for p in (*self.buckets, *self.workers))
        return taken[0], taken[1]

    def samples(self) -> int:
        return int(sum(p[2].sum() for p in self.buckets))
