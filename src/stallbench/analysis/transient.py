"""A run's start-up transient, found from its own time blocks where no warm-up was stated.

Why: a run that starts with a cold page cache reads from the device until the cache holds the
file, then from memory (randread of a 64 MiB file: p50 62 µs for the first 0.6 s, then 1 µs).
Pooled, the two regimes describe neither, and the comparison can only say "not stationary".
pyperf and JMH warm up by default and fio has steady-state detection; stallbench cuts the
transient each run shows, in that run, so the user need not guess a `--warmup`.

Method: MSER, the marginal standard error rule (White 1997; Hoad, Robinson and Davies, 2010,
recommend MSER-5 among the automatic warm-up rules they compared), on the levels of each
deciding statistic (quantiles.DECIDING_STATS) of each op, on the log scale: the p50 and the p99
of every time block that holds enough ops for them (stationarity.quantile_levels: TAIL_OPS
beyond the quantile, 500 for the p99), and the rate of windows of whole blocks
(stationarity.rate_levels).
A block holds hundreds to millions of ops, so the blocks play the part of MSER-5's batches of
five. For a series y_0..y_{m-1} MSER chooses the truncation d that minimises

    MSER(d) = Σ_{i>=d} (y_i - ȳ_d)² / (m - d)²,

an estimate of the squared standard error of the mean of what is kept: cutting more removes
bias but keeps fewer levels, and the minimum balances the two. d is searched while at least
a quarter of the levels (and MIN_KEPT) remain. MSER's minimum, once past the transient,
is flat, and noise alone can put it a few levels later; so the cut moves back over the
levels just before it that already lie within SETTLED_SD standard deviations of the levels
it keeps from their median: the series settled at the first level from which on every level
is within the noise of what follows (the noise: the larger of the kept levels' sd and the
series' block-to-block sd, 1.4826 MAD of its differences / √2, which a step does not move).
Then three rules make it a warm-up:

- it must matter: MSER(d) at most MATERIAL times MSER(0), so that the levels left out move
  the mean by at least about the noise of the levels kept (a cold cache's is a hundredth of
  MSER(0)), and what is left out must be a level of its own: its mean at least MIN_T
  standard errors (the noise sd, √(1/d + 1/(m - d))) from the mean kept. MSER alone cuts
  steady series by chance, most often late, where few levels remain and their variance is
  small by luck (a steady rate's last 9 levels of 25 with a third of its sd); else the series
  is steady;
- it must end within the run's first MAX_SHARE (half, MSER's classic rule) of the span from
  the first op to the last completion: d is searched there (a cold start that ends early is
  found even where the level moves again later); a series whose only cut lies beyond is a
  level that stepped later in the run, not a warm-up: nothing is left out for it
  (UNSETTLED), and analysis/stationarity.py reports the run NOT STATIONARY as before;
- the run's warm-up ends where the last of its series settled (the largest d over the ops
  and statistics), counted in whole blocks on the run's clock, never before the stated
  minimum (a workload's own default warm-up, summarybuilder.py's `warmup_ns`), and only
  when MIN_DATA_BLOCKS blocks remain after it, the fewest a run's own error is estimated
  from (runstats.py): a run of 1 s in 100 ms blocks whose transient took half of it keeps
  it (TOO_SHORT, and NOT STATIONARY where it is large), or it would have no interval at all.

The outcomes (summary.py, which holds the record): SETTLED (a transient left out), STEADY
(none that matters), UNSETTLED (a level that moved only beyond MAX_SHARE: nothing left out),
TOO_SHORT.

A series with fewer than stationarity.MIN_BLOCKS levels is not looked at (a run too short, or
an op too rare); a run without any such series, or whose transient would leave fewer than
MIN_DATA_BLOCKS, is TOO_SHORT. Pure: a run summary in, a
Transient out (summarybuilder.py applies it; the report says what was found, per variant).
"""

from __future__ import annotations

import numpy as np

from . import summary as sm
from .quantiles import DECIDING_STATS, RATE, stat_named
from .runstats import MIN_BLOCKS_PER_GROUP, MIN_GROUPS
from .stationarity import MIN_BLOCK_OPS, Levels, quantile_levels, rate_levels
from .summary import SETTLED, STEADY, TOO_SHORT, UNSETTLED, Transient

MAX_SHARE = 0.5           # a warm-up ends within the first half of the run's span
MATERIAL = 0.5            # MSER(d) / MSER(0) at most this: the cut matters
KEPT_SHARE = 0.25         # d is searched while a quarter of the levels remain
MIN_KEPT = 4
TAIL_OPS = 5              # a block's quantile from at least 5 ops beyond it (p99: 500 ops)
SETTLED_SD = 3.0          # a level within 3 sd of the levels kept has settled
MIN_SD = 1e-3             # the levels' noise sd at least 0.1% (as stationarity.py's)
# the blocks a cut must leave: the fewest a run's own error is estimated from (runstats.py)
MIN_DATA_BLOCKS = MIN_GROUPS * MIN_BLOCKS_PER_GROUP
MIN_T = 4.0               # what is left out differs from what is kept by 4 noise sd / √n


def mser(levels: np.ndarray) -> np.ndarray:
    """MSER(d) for each d from 0 while KEPT_SHARE of the levels (and MIN_KEPT) remain."""
    m = levels.size
    kept = max(MIN_KEPT, int(np.ceil(KEPT_SHARE * m)))
    if m < kept + 1:
        return np.empty(0)
    tail_sum = np.cumsum(levels[::-1])[::-1]
    tail_squares = np.cumsum((levels ** 2)[::-1])[::-1]
    d = np.arange(m - kept + 1)
    n = (m - d).astype(np.float64)
    squares = np.maximum(tail_squares[d] - tail_sum[d] ** 2 / n, 0.0)
    return squares / n ** 2


def noise_sd(levels: np.ndarray, kept: np.ndarray) -> float:
    """The levels' noise: the larger of the kept levels' sd and the block-to-block one of the
    whole series (1.4826 MAD of the differences / √2, blind to a step), at least MIN_SD."""
    steps = np.diff(levels)
    local = 1.4826 * float(np.median(np.abs(steps - np.median(steps)))) / np.sqrt(2.0)
    spread = float(np.std(kept, ddof=1)) if kept.size > 1 else 0.0
    return max(spread, local, MIN_SD)


def truncation(levels: np.ndarray, last: int | None = None) -> int:
    """Where one series settled, at most at level `last`: MSER's truncation, moved back over
    the levels just before it that are already within SETTLED_SD noise sd of the levels it
    keeps; 0 when that cut does not matter (MATERIAL) or what it leaves out is not a level of
    its own (MIN_T)."""
    curve = mser(levels)
    if last is not None:
        curve = curve[:last + 1]
    if curve.size == 0:
        return 0
    d = int(np.argmin(curve))
    if d == 0:
        return 0
    centre = float(np.median(levels[d:]))
    sd = noise_sd(levels, levels[d:])
    while d > 0 and abs(levels[d - 1] - centre) <= SETTLED_SD * sd:
        d -= 1
    if d == 0 or curve[d] > MATERIAL * curve[0]:
        return 0
    m = levels.size
    t = abs(float(levels[:d].mean() - levels[d:].mean())) / (sd * np.sqrt(1 / d + 1 / (m - d)))
    return d if t >= MIN_T else 0


def deciding_levels(op: sm.OpSummary, run: sm.RunSummary, first: int) -> list[Levels]:
    """The series of an op's deciding statistics from block `first` on (see the docstring)."""
    series: list[Levels | None] = []
    for key in DECIDING_STATS:
        stat = stat_named(key)
        if stat.probability is None:
            series.append(rate_levels(op, run, first) if stat == RATE else None)
            continue
        beyond = min(stat.probability, 1.0 - stat.probability)
        min_ops = max(MIN_BLOCK_OPS, int(np.ceil(TAIL_OPS / beyond)))
        series.append(quantile_levels(op, first, stat.probability, min_ops, stat.key))
    return [s for s in series if s is not None]


def find_transient(run: sm.RunSummary, first: int) -> Transient:
    """The run's warm-up in blocks, from its ops' deciding statistics (see the docstring):
    `first` is the first block after the stated minimum; the warm-up found ends within
    MAX_SHARE of the run's span, else nothing beyond `first` is left out."""
    bound_ns = run.start_ns + MAX_SHARE * (run.end_ns - run.start_ns)
    settled: list[tuple[int, str, str]] = []
    late: tuple[str, str] | None = None
    looked = False
    for name, op in run.ops.items():
        for levels in deciding_levels(op, run, first):
            looked = True
            within = int(np.searchsorted(levels.first_block * run.block_ns, bound_ns,
                                         side="right")) - 1
            d = truncation(levels.log_level, within)
            if d > 0:
                settled.append((int(levels.first_block[d]), name, levels.stat))
            elif late is None and truncation(levels.log_level) > within:
                late = (name, levels.stat)
    if settled:
        block, name, stat = max(settled, key=lambda found: found[0])
        if -(-run.end_ns // run.block_ns) - block < MIN_DATA_BLOCKS:
            return Transient(first, TOO_SHORT, name, stat)
        return Transient(block, SETTLED, name, stat)
    if late is not None:
        return Transient(first, UNSETTLED, *late)
    return Transient(first, STEADY if looked else TOO_SHORT)
