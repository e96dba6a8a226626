"""HdrHistogram's bucket arithmetic (the layout of the Java/C/Python HdrHistogram libraries):
values -> the counts array of a histogram with given range and precision. Pure numpy."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class HdrLayout:
    lowest: int          # lowest discernible value (>= 1)
    highest: int         # highest trackable value
    digits: int          # significant value digits (0..5)

    @property
    def unit_magnitude(self) -> int:
        return int(math.floor(math.log2(self.lowest)))

    @property
    def sub_bucket_half_count_magnitude(self) -> int:
        single_unit = 2 * 10 ** self.digits
        return max(int(math.ceil(math.log2(single_unit))), 1) - 1

    @property
    def sub_bucket_half_count(self) -> int:
        return 1 << self.sub_bucket_half_count_magnitude

    @property
    def sub_bucket_count(self) -> int:
        return 2 * self.sub_bucket_half_count

    @property
    def bucket_count(self) -> int:
        smallest_untrackable = self.sub_bucket_count << self.unit_magnitude
        buckets = 1
        while smallest_untrackable <= self.highest:
            if smallest_untrackable > (1 << 62):
                return buckets + 1
            smallest_untrackable <<= 1
            buckets += 1
        return buckets

    @property
    def counts_len(self) -> int:
        return (self.bucket_count + 1) * self.sub_bucket_half_count

    def index(self, values: np.ndarray) -> np.ndarray:
        """Counts-array index of each value (values clipped to [0, highest])."""
        v = np.clip(np.asarray(values, dtype=np.int64), 0, self.highest)
        mask = (self.sub_bucket_count - 1) << self.unit_magnitude
        # bit length via frexp: exact for values below 2**53 (104 days in ns)
        _, bits = np.frexp((v | mask).astype(np.float64))
        bucket = bits.astype(np.int64) - self.unit_magnitude - \
            (self.sub_bucket_half_count_magnitude + 1)
        sub = v >> (bucket + self.unit_magnitude)
        return ((bucket + 1) << self.sub_bucket_half_count_magnitude) + \
            (sub - self.sub_bucket_half_count)

    def counts(self, values: np.ndarray) -> np.ndarray:
        return np.bincount(self.index(values), minlength=self.counts_len).astype(np.int64)
