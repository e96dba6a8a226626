"""Log2 bands, the shift sentence and the probability of superiority against numpy oracles."""

from __future__ import annotations

import numpy as np
import pytest

from stallbench.analysis import bands, histogram
from stallbench.report.wording import band_label, band_range_label, shift_sentence

pytestmark = pytest.mark.pure


def band_counts(x: np.ndarray) -> np.ndarray:
    """The oracle: ops per log2 band, by floor(log2) in numpy (exact at powers of two, which
    float log2 gives exactly)."""
    return np.bincount(np.floor(np.log2(np.maximum(x, 1).astype(np.float64))).astype(int),
                       minlength=bands.N_BANDS)


def test_histogram_buckets_fold_into_the_same_log2_bands():
    rng = np.random.default_rng(1)
    x = rng.lognormal(12, 3, 20000).astype(np.int64)
    folded = histogram.histogram(x).reshape(-1, histogram.SUB_BUCKETS).sum(axis=1)
    assert (folded[:bands.N_BANDS] == band_counts(x)[:len(folded)]).all()


def test_histogram_bucket_holds_its_value():
    rng = np.random.default_rng(2)
    x = rng.integers(1, 1 << 44, 10000)
    index = histogram.bucket_index(x)
    edges = histogram.bucket_lower_edges()
    assert ((edges[index] <= x) & (x < edges[index + 1])).all()


def test_labels_use_bcc_binary_steps():
    assert band_label(19) == "512 µs"
    assert band_label(20) == "1 ms"
    assert band_range_label(19, 19) == "512 µs–1 ms"
    assert band_range_label(24, 25) == "16–64 ms"


def test_shift_sentence_for_the_seed_000_pattern():
    # seed 000: most reads ~500-750 µs in both kernels, ~8% moved to 15-60 ms
    rng = np.random.default_rng(4)
    n = 100_000
    base = rng.uniform(540e3, 1000e3, n).astype(np.int64)  # band 512 µs – 1 ms
    cand = base.copy()
    moved = rng.choice(n, 8100, replace=False)
    cand[moved] = rng.uniform(17e6, 60e6, moved.size).astype(np.int64)  # band 16 – 64 ms
    shift = bands.distribution_shift(band_counts(base), band_counts(cand))
    assert shift_sentence(shift, "read") == "8.1% of read ops moved from 512 µs–1 ms into 16–64 ms"


def test_no_sentence_when_nothing_moved():
    rng = np.random.default_rng(5)
    x = rng.lognormal(13, 0.3, 50000).astype(np.int64)
    y = rng.lognormal(13, 0.3, 50000).astype(np.int64)
    shift = bands.distribution_shift(band_counts(x), band_counts(y))
    assert shift_sentence(shift, "read") is None and shift.moved < 0.01


def test_superiority_matches_brute_force():
    rng = np.random.default_rng(6)
    a = rng.lognormal(10, 1, 3000)
    b = rng.lognormal(10.3, 1, 2000)
    brute = np.mean(b[:, None] > a[None, :])  # P(candidate slower than baseline)
    got = histogram.superiority(histogram.histogram(b), histogram.histogram(a))
    assert abs(got - brute) < 0.01
