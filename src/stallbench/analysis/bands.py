"""Log2 latency bands (as bcc's histograms) and the distribution shift between two variants.

Band k holds latencies in [2**k, 2**(k+1)) ns; band 0 also holds 0. Labels use 1024 as the step
between units, as bcc does ("512 µs" is 2**19 ns = 524 µs, "1 ms" is 2**20 ns = 1.05 ms).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

N_BANDS = 50
_UNITS = ("ns", "µs", "ms", "s", "ks")


def band_counts(latency_ns: np.ndarray) -> np.ndarray:
    """Count per log2 band (length N_BANDS)."""
    values = np.maximum(np.asarray(latency_ns, dtype=np.int64), 1)
    bands = np.minimum(np.floor(np.log2(values.astype(np.float64))).astype(np.int64), N_BANDS - 1)
    # float log2 is exact for powers of two, but guard the edges against rounding anyway
    bands = np.where(np.left_shift(1, bands + 1) <= values, bands + 1, bands)
    bands = np.where(np.left_shift(1, bands) > values, bands - 1, bands)
    return np.bincount(np.clip(bands, 0, N_BANDS - 1), minlength=N_BANDS).astype(np.int64)


def edge_label(exponent: int) -> str:
    """'512 µs' for 2**19 ns, '1 ms' for 2**20 ns (bcc-style binary steps)."""
    unit = min(exponent // 10, len(_UNITS) - 1)
    return f"{2 ** (exponent - 10 * unit)} {_UNITS[unit]}"


def range_label(first: int, last: int) -> str:
    """'512 µs–1 ms' for bands 19..19, '16–64 ms' for bands 24..25."""
    low, high = edge_label(first), edge_label(last + 1)
    low_value, low_unit = low.split(" ")
    high_value, high_unit = high.split(" ")
    if low_unit == high_unit:
        return f"{low_value}–{high_value} {high_unit}"
    return f"{low}–{high}"


@dataclass
class Shift:
    """How much of an op's distribution moved between bands, in words and numbers."""

    moved: float  # share of ops that changed band (sum of the positive share differences)
    lost: tuple[int, int] | None  # band range that lost most
    gained: tuple[int, int] | None  # band range that gained most
    lost_share: float
    gained_share: float
    sentence: str | None


def _main_range(diff: np.ndarray, total: float, sign: int) -> tuple[tuple[int, int] | None, float]:
    """Smallest set of bands (largest first) holding >= 80% of the gain or loss; its span."""
    values = diff * sign
    order = [i for i in np.argsort(-values) if values[i] > 0]
    chosen: list[int] = []
    accumulated = 0.0
    for i in order:
        chosen.append(int(i))
        accumulated += float(values[i])
        if accumulated >= 0.8 * total:
            break
    if not chosen:
        return None, 0.0
    first, last = min(chosen), max(chosen)
    return (first, last), float(values[first:last + 1].clip(min=0).sum())


def distribution_shift(baseline_counts: np.ndarray, candidate_counts: np.ndarray,
                       op: str, min_moved: float = 0.01) -> Shift | None:
    """Shares per band compared; the sentence names the bands that lost and gained most."""
    nb, nc = baseline_counts.sum(), candidate_counts.sum()
    if nb == 0 or nc == 0:
        return None
    diff = candidate_counts / nc - baseline_counts / nb
    moved = float(diff.clip(min=0).sum())
    lost, lost_share = _main_range(diff, moved, -1)
    gained, gained_share = _main_range(diff, moved, +1)
    sentence = None
    if moved >= min_moved and lost and gained:
        direction = "up" if gained[0] > lost[1] else "down" if gained[1] < lost[0] else "around"
        amount = min(lost_share, gained_share)
        sentence = (f"{amount:.1%} of {op} ops moved from {range_label(*lost)} into "
                    f"{range_label(*gained)}" + (" (mixed)" if direction == "around" else ""))
    return Shift(moved, lost, gained, lost_share, gained_share, sentence)
