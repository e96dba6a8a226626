"""A run's clock starts with its workload (issue 37, item 0), on hand-made runs shaped like the
issue's guest runs: the first op 1.8 s after the run's clock started (past the 1 s warm-up),
rates that agree within 4% between runs (good 1970, 2038, 2146 ops/s), and the candidate's rate
stepping down from ~2,500 to ~1,400 ops/s half way through every run. numpy on the hand-made
ops is the oracle; nothing here reads the code's own numbers back as the truth."""

from __future__ import annotations

import numpy as np
import pytest
from compare_fixtures import compare_summaries
from scipy import stats as scipy_stats
from summary_support import summarize_arrays

from stallbench.analysis import intervals as iv
from stallbench.analysis import stationarity
from stallbench.analysis import summary as sm
from stallbench.analysis.summarybuilder import SummaryBuilder

pytestmark = pytest.mark.pure

FIRST_OP_NS = 1_800_000_000      # the workload's first op, on the run's clock
WARMUP_NS = 1_000_000_000
SPAN_NS = 6_000_000_000          # first op to the last op's start
BLOCK_NS = 100_000_000
STEP_NS = FIRST_OP_NS + 2_500_000_000


def evenly(rate_of, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Starts at the given rate (ops/s, a function of the time since the first op), latencies
    of ~0.4 ms."""
    starts, t = [], 0.0
    while t < SPAN_NS:
        starts.append(t)
        t += 1e9 / rate_of(t)
    start = FIRST_OP_NS + np.asarray(starts, dtype=np.int64)
    latency = rng.lognormal(np.log(400e3), 0.3, start.size).astype(np.int64)
    return start, latency


def runs(rng: np.random.Generator) -> dict[str, list[tuple[np.ndarray, np.ndarray]]]:
    good = [evenly(lambda t, r=r: r, rng) for r in (1970.0, 2038.0, 2146.0)]
    bad = [evenly(lambda t, f=f: f * (2500.0 if t < STEP_NS - FIRST_OP_NS else 1400.0), rng)
           for f in (1.0, 1.03, 0.98)]
    return {"good": good, "bad": bad}


def summarize(start: np.ndarray, latency: np.ndarray) -> sm.RunSummary:
    return summarize_arrays({"read": (start, latency, None)}, BLOCK_NS, WARMUP_NS)


def numpy_rate(start: np.ndarray, latency: np.ndarray) -> float:
    """The oracle: ops after the warm-up (whole blocks from the first op's block) over the
    time from the warm-up's end to the last completion."""
    warmup_end = (start.min() // BLOCK_NS) * BLOCK_NS + WARMUP_NS
    after = start >= warmup_end
    return after.sum() / ((start + latency).max() - warmup_end) * 1e9


@pytest.fixture(scope="module")
def made():
    raw = runs(np.random.default_rng(37))
    return raw, {k: [summarize(*r) for r in v] for k, v in raw.items()}


def test_the_warmup_and_the_span_count_from_the_first_op(made):
    raw, summaries = made
    for (start, latency), summary in zip(raw["good"] + raw["bad"],
                                         summaries["good"] + summaries["bad"], strict=True):
        assert summary.start_ns == start.min() == FIRST_OP_NS
        assert summary.warmup_ns == FIRST_OP_NS + WARMUP_NS
        assert summary.end_ns == (start + latency).max()
        op = summary.ops["read"]
        after = start >= summary.warmup_ns
        assert op.warmup_samples == (~after).sum() and op.histogram.sum() == after.sum()
        # the blocks before the first op are no time of the run: no block of the span is empty
        seconds = summary.block_durations_ns()
        assert not seconds[:FIRST_OP_NS // BLOCK_NS].any()
        assert seconds[summary.warmup_blocks:].sum() == summary.measured_ns
        assert (op.block_count[summary.warmup_blocks:-1] > 0).all()
        rate = iv.rate_statistic(op, summary.warmup_blocks, seconds / 1e9)
        assert np.exp(rate.log_value) == pytest.approx(numpy_rate(start, latency), rel=1e-9)
        # the longest time without a completion starts at the first op, not at the clock's
        assert op.gap_start_ns >= FIRST_OP_NS


def test_the_run_to_run_spread_stays_within_what_the_runs_show(made):
    raw, summaries = made
    change = compare_summaries(summaries["good"], summaries["bad"], "read")["rate"]
    logs = {k: np.log([numpy_rate(*r) for r in v]) for k, v in raw.items()}
    ss = sum(float(((x - x.mean()) ** 2).sum()) for x in logs.values())
    # the upper end of the whole run variance's 95% interval from the runs' own values
    bound = ss / scipy_stats.chi2.ppf(0.025, 4)
    assert change.run_sd_measured and change.run_sd ** 2 <= bound, (change.run_sd, bound)
    truth = np.exp(logs["bad"]).sum() / np.exp(logs["good"]).sum()
    assert change.change == pytest.approx(truth - 1, abs=0.01)
    # from runs 4% apart: an interval clear of zero around the change (the runs got
    # [-89%, +367%])
    assert change.low < truth - 1 < change.high < 0, (change.low, change.high)
    assert np.log1p(change.high) - np.log1p(change.low) < 0.3


def test_a_rate_that_steps_down_is_not_stationary_with_its_time(made):
    _, summaries = made
    for summary in summaries["bad"]:
        shift = stationarity.level_shift(summary.ops["read"], summary)
        assert shift is not None and shift.stat == stationarity.RATE
        assert abs(shift.at_ns - STEP_NS) <= 3 * BLOCK_NS, shift.at_ns
        assert 2300 < shift.before < 2700 and 1250 < shift.after < 1550
    for summary in summaries["good"]:
        assert stationarity.level_shift(summary.ops["read"], summary) is None


def test_ops_in_any_order_give_the_same_summary(made):
    """Batches come a spool per worker: an earlier first op found late moves the warm-up's
    end, and the ops held back for it land where they belong."""
    raw, summaries = made
    start, latency = raw["bad"][0]
    later = start >= FIRST_OP_NS + 3 * WARMUP_NS
    worker = np.arange(start.size) % 3
    builder = SummaryBuilder(BLOCK_NS, WARMUP_NS)
    for part in (later, ~later):    # the late ops first: their warm-up would end at 5.8 s
        builder.add(["read"], np.zeros(part.sum(), np.int64), worker[part], start[part],
                    latency[part])
    shuffled = builder.finish()
    whole = summaries["bad"][0]
    assert shuffled.warmup_blocks == whole.warmup_blocks
    for name in ("histogram", "block_count", "block_sum"):
        assert np.array_equal(getattr(shuffled.ops["read"], name),
                              getattr(whole.ops["read"], name)), name
    after = start >= whole.warmup_ns
    assert shuffled.ops["read"].warmup_samples == (~after).sum()
    assert shuffled.ops["read"].worker_count.tolist() == np.bincount(worker[after]).tolist()
