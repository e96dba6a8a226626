"""The rules of analysis/transient.py on hand-made runs whose truth is known by construction:
a cold start of a known length is left out and no more than it plus a few blocks; a steady run
loses nothing; a level that steps after half the run is not a warm-up (nothing left out, and
analysis/stationarity.py still reports the step); a stated minimum is kept; a stated warm-up
(find_warmup off) is obeyed exactly. numpy on the hand-made ops is the oracle of every number
compared (the pooled p50 of the ops kept), never the code's own."""

from __future__ import annotations

import numpy as np
import pytest
from summary_support import summarize_arrays

from stallbench.analysis import histogram as hist
from stallbench.analysis import stationarity
from stallbench.analysis import summary as sm

pytestmark = pytest.mark.pure

BLOCK_NS = 100_000_000
FIRST_OP_NS = 250_000_000        # the workload starts a little after the run's clock
SPAN_NS = 3_000_000_000
PLANNED_NS = 3_000_000_000


def made_run(rng: np.random.Generator, level_of, rate: float = 20_000.0
             ) -> tuple[np.ndarray, np.ndarray]:
    """Starts spread evenly at `rate` ops/s over SPAN_NS from FIRST_OP_NS; each latency
    lognormal around level_of(time since the first op) (ns)."""
    since = np.sort(rng.uniform(0, SPAN_NS, int(rate * SPAN_NS / 1e9))).astype(np.int64)
    level = np.asarray([level_of(t) for t in since], dtype=np.float64)
    latency = (level * rng.lognormal(0.0, 0.2, since.size)).astype(np.int64)
    return FIRST_OP_NS + since, latency


def found(start: np.ndarray, latency: np.ndarray, warmup_ns: int = 0,
          find: bool = True) -> sm.RunSummary:
    return summarize_arrays({"read": (start, latency, None)}, BLOCK_NS, warmup_ns,
                            find_warmup=find, planned_ns=PLANNED_NS)


def numpy_p50(start: np.ndarray, latency: np.ndarray, from_ns: int) -> float:
    return float(np.quantile(latency[start >= from_ns], 0.5, method="inverted_cdf"))


def pooled_p50(summary: sm.RunSummary) -> float:
    return float(hist.quantiles(summary.ops["read"].histogram, [0.5])[0])


def test_a_cold_start_is_left_out_and_the_ops_kept_are_the_warm_ones():
    rng = np.random.default_rng(7)
    cold_ns = 700_000_000
    start, latency = made_run(rng, lambda t: 60_000.0 if t < cold_ns else 1_000.0)
    summary = found(start, latency)
    assert summary.transient is not None and summary.transient.outcome == sm.SETTLED
    ends = summary.warmup_ns
    # after the cold ops, within two blocks of their end
    assert FIRST_OP_NS + cold_ns <= ends <= FIRST_OP_NS + cold_ns + 2 * BLOCK_NS
    kept = start >= ends
    assert summary.ops["read"].histogram.sum() == kept.sum()
    assert summary.ops["read"].warmup_samples == (~kept).sum()
    assert pooled_p50(summary) == pytest.approx(numpy_p50(start, latency, ends), rel=0.005)
    assert pooled_p50(summary) < 1_100
    assert stationarity.level_shift(summary.ops["read"], summary) is None


def test_a_steady_run_loses_nothing():
    rng = np.random.default_rng(11)
    start, latency = made_run(rng, lambda t: 1_000.0)
    summary = found(start, latency)
    assert summary.transient is not None and summary.transient.outcome == sm.STEADY
    assert summary.warmup_blocks == FIRST_OP_NS // BLOCK_NS
    assert summary.ops["read"].histogram.sum() == start.size


def test_a_step_after_half_the_run_is_not_a_warm_up_and_stays_not_stationary():
    rng = np.random.default_rng(13)
    step_ns = 2_000_000_000      # two thirds into the run
    start, latency = made_run(rng, lambda t: 1_000.0 if t < step_ns else 3_000.0)
    summary = found(start, latency)
    assert summary.transient is not None and summary.transient.outcome == sm.UNSETTLED
    assert summary.ops["read"].histogram.sum() == start.size
    shift = stationarity.level_shift(summary.ops["read"], summary)
    assert shift is not None and abs(shift.at_ns - (FIRST_OP_NS + step_ns)) <= BLOCK_NS
    assert shift.after / shift.before == pytest.approx(3.0, rel=0.1)


def test_a_transient_longer_than_half_the_run_is_not_cut():
    rng = np.random.default_rng(17)
    start, latency = made_run(rng, lambda t: 60_000.0 if t < 1_700_000_000 else 1_000.0)
    summary = found(start, latency)
    assert summary.transient.outcome == sm.UNSETTLED
    assert summary.warmup_blocks == FIRST_OP_NS // BLOCK_NS
    # the stated bound: MAX_SHARE of the span from the first op
    assert stationarity.level_shift(summary.ops["read"], summary) is not None


def test_the_stated_minimum_is_kept_and_a_longer_transient_found_beyond_it():
    rng = np.random.default_rng(19)
    start, latency = made_run(rng, lambda t: 1_000.0)
    summary = found(start, latency, warmup_ns=500_000_000)
    assert summary.warmup_ns == FIRST_OP_NS // BLOCK_NS * BLOCK_NS + 500_000_000
    assert summary.transient.outcome == sm.STEADY
    cold_ns = 900_000_000
    start, latency = made_run(rng, lambda t: 50_000.0 if t < cold_ns else 1_000.0)
    summary = found(start, latency, warmup_ns=500_000_000)
    assert summary.transient.outcome == sm.SETTLED
    assert summary.warmup_ns >= FIRST_OP_NS + cold_ns
    assert pooled_p50(summary) == pytest.approx(numpy_p50(start, latency, summary.warmup_ns),
                                                rel=0.005)


def test_a_stated_warm_up_is_obeyed_whatever_the_run_shows():
    rng = np.random.default_rng(23)
    start, latency = made_run(rng, lambda t: 60_000.0 if t < 700_000_000 else 1_000.0)
    for stated in (0, 300_000_000):
        summary = found(start, latency, warmup_ns=stated, find=False)
        assert summary.transient is None
        first = FIRST_OP_NS // BLOCK_NS * BLOCK_NS
        assert summary.warmup_ns == first + stated
        assert pooled_p50(summary) == pytest.approx(
            numpy_p50(start, latency, first + stated), rel=0.005)


def test_a_cold_start_is_cut_even_where_the_level_steps_again_later():
    rng = np.random.default_rng(29)
    cold_ns, step_ns = 500_000_000, 2_200_000_000
    start, latency = made_run(rng, lambda t: 60_000.0 if t < cold_ns else
                              (1_000.0 if t < step_ns else 2_000.0))
    summary = found(start, latency)
    assert summary.transient.outcome == sm.SETTLED
    assert FIRST_OP_NS + cold_ns <= summary.warmup_ns <= FIRST_OP_NS + cold_ns + 2 * BLOCK_NS
    shift = stationarity.level_shift(summary.ops["read"], summary)
    assert shift is not None and abs(shift.at_ns - (FIRST_OP_NS + step_ns)) <= BLOCK_NS
