"""Log2 latency bands (as bcc's histograms) and the distribution shift between two variants.

Band k holds latencies in [2**k, 2**(k+1)) ns; band 0 also holds 0. The words for bands and
shifts are report/wording.py's (band_label, shift_sentence).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import histogram as hist

N_BANDS = 50


@dataclass
class Shift:
    """How much of an op's distribution moved between bands."""

    moved: float  # share of ops that changed band (sum of the positive share differences)
    lost: tuple[int, int] | None  # band range that lost most
    gained: tuple[int, int] | None  # band range that gained most
    lost_share: float
    gained_share: float
    called: bool = False    # enough moved (min_moved) from one range into another to name them
    amount: float = 0.0     # the share that moved from `lost` into `gained`
    mixed: bool = False     # the gained range overlaps the lost one


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
                       min_moved: float = 0.01) -> Shift | None:
    """Shares per band compared: the ranges of bands that lost and gained most."""
    nb, nc = baseline_counts.sum(), candidate_counts.sum()
    if nb == 0 or nc == 0:
        return None
    diff = candidate_counts / nc - baseline_counts / nb
    moved = float(diff.clip(min=0).sum())
    lost, lost_share = _main_range(diff, moved, -1)
    gained, gained_share = _main_range(diff, moved, +1)
    if moved >= min_moved and lost and gained:
        mixed = not (gained[0] > lost[1] or gained[1] < lost[0])
        return Shift(moved, lost, gained, lost_share, gained_share, True,
                     min(lost_share, gained_share), mixed)
    return Shift(moved, lost, gained, lost_share, gained_share)


def bands_from_histogram(histogram: np.ndarray) -> np.ndarray:
    """Log2 bands from the log-linear histogram: bucket // SUB_BUCKETS is the power of two."""
    counts = histogram.reshape(-1, hist.SUB_BUCKETS).sum(axis=1)
    out = np.zeros(N_BANDS, dtype=np.int64)
    out[:min(len(counts), N_BANDS)] = counts[:N_BANDS]
    out[-1] += counts[N_BANDS:].sum()
    return out
