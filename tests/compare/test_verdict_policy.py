"""The verdict policy's order (compare/verdicts/) on hand-made rows: which rule has the last
word when several apply, and `why` gives each finished row's reason."""

from __future__ import annotations

import math

import pytest

from stallbench.analysis import intervals as iv
from stallbench.analysis.interference import OutsideLoad
from stallbench.analysis.quantiles import MIN_TAIL_SAMPLES
from stallbench.compare import verdicts as vp
from stallbench.compare.model import CompareOptions

pytestmark = pytest.mark.quiet

BUSIER = {"a": OutsideLoad(2, 0.0, 1), "b": OutsideLoad(2, 0.6, 1)}   # b: 0.6 of 2 CPUs more


def facts(**changed) -> vp.Facts:
    """One service op `read` with a million samples a side, one run each, quiet machines."""
    base = dict(baseline="a", options=CompareOptions(),
                ops={"read": vp.OpFacts("service", {"a": 10**6, "b": 10**6})},
                runs={"a": 1, "b": 1}, regime_ratios={}, loads={"a": None, "b": None},
                busier={"b": 0}, saturated={"b": 0})
    return vp.Facts(**{**base, **changed})


def measured(change: float, low: float, high: float, p: float) -> iv.Change:
    return iv.Change(change, low, high, p_value=p, runs=(1, 1))


def judged(rows: dict[str, iv.Change], **changed) -> dict[str, iv.Change]:
    out = vp.judge({vp.Row("b", "read", stat): c for stat, c in rows.items()}, facts(**changed))
    return {row.stat: c for row, c in out.rows.items()}


def test_the_rules_are_in_their_documented_order():
    assert [name for name, _ in vp.RULES] == ["paced", "no samples", "multiplicity",
                                              "too wide", "not stationary", "machine busier"]


def test_multiplicity_then_the_words():
    # p50 +30% [+20%, +40%], p 0.001: worse; p99 +30% [+1%, +60%] p 0.04, adjusted by the two
    # p-values of its budget (BH: 0.04 * 2 / 2 = 0.04 < 0.05 stays worse); mean is no decider
    rows = judged({"p50": measured(0.3, 0.2, 0.4, 0.001), "p99": measured(0.3, 0.01, 0.6, 0.04),
                   "mean": measured(0.3, 0.2, 0.4, 0.001)})
    assert rows["p50"].verdict == iv.Verdict.WORSE and vp.why(rows["p50"]) is None
    assert math.isclose(rows["p99"].p_adjusted, 0.04) and rows["p99"].verdict == iv.Verdict.WORSE
    assert rows["mean"].verdict == iv.Verdict.INTERVAL_ONLY and rows["mean"].p_adjusted is None
    # the same p99 beside a p50 of p 0.9: BH makes it 0.08, unclear although it excludes 0
    rows = judged({"p50": measured(0.0, -0.5, 0.5, 0.9), "p99": measured(0.3, 0.01, 0.6, 0.04)})
    assert math.isclose(rows["p99"].p_adjusted, 0.08)
    assert (rows["p99"].verdict, vp.why(rows["p99"])) == (iv.Verdict.UNCLEAR, vp.ADJUSTED)
    assert vp.why(rows["p50"]) == vp.INTERVAL_HOLDS_ZERO and vp.more_runs_decide(rows["p50"])


def test_too_wide_names_an_unclear_row_and_hides_a_called_ones_interval():
    # x2 [x0.05, x40]: the interval reaches 20x beyond the estimate either way
    wide = judged({"p50": measured(1.0, -0.95, 39.0, 0.3)})["p50"]
    assert (wide.verdict, vp.why(wide), wide.interval_shown) == \
        (iv.Verdict.UNCLEAR, vp.TOO_WIDE, False)
    # x40 [x3, x500]: excludes 0 far beyond the noise, so it stays worse, interval not shown
    called = judged({"p50": measured(39.0, 2.0, 499.0, 0.001)})["p50"]
    assert (called.verdict, called.note, called.interval_shown) == \
        (iv.Verdict.WORSE, None, False)
    assert vp.why(called) == vp.TOO_WIDE


def test_not_stationary_has_the_word_over_machine_busier():
    """A worse p50 (+30% [+20%, +40%]) whose candidate mixes regimes x1.5 apart (log 0.405,
    beyond log 1.4 = 0.336) on a busier machine: both distrust rules apply, the first wins."""
    row = {"p50": measured(0.3, 0.2, 0.4, 0.001)}
    both = dict(regime_ratios={("b", "read"): math.log(1.5)}, loads=BUSIER, busier={"b": 1})
    [note] = vp.judge({vp.Row("b", "read", "p50"): row["p50"]}, facts(**both)).notes
    assert (judged(row, **both)["p50"].verdict, vp.why(judged(row, **both)["p50"])) == \
        (iv.Verdict.UNCLEAR, vp.NOT_STATIONARY)
    assert "'worse' verdicts for b are left unclear" in note and "beyond" not in note
    # each alone
    alone = judged(row, loads=BUSIER, busier={"b": 1})["p50"]
    assert vp.why(alone) == vp.MACHINE_BUSIER and not vp.more_runs_decide(alone)
    assert vp.why(judged(row, regime_ratios={("a", "read"): math.log(1.5)})["p50"]) == \
        vp.NOT_STATIONARY
    # a change beyond the regimes' ratio on both ends stands (x3 [x2.5, x3.5] against x1.5)
    assert judged({"p50": measured(2.0, 1.5, 2.5, 0.001)},
                  regime_ratios={("b", "read"): math.log(1.5)})["p50"].verdict == \
        iv.Verdict.WORSE
    # and three runs a side measure a mix in their spread: no distrust
    assert judged(row, regime_ratios={("b", "read"): math.log(1.5)},
                  runs={"a": 3, "b": 3})["p50"].verdict == iv.Verdict.WORSE


def test_a_baseline_busier_distrusts_better_only():
    rows = judged({"p50": measured(-0.3, -0.4, -0.2, 0.001), "p99": measured(0.3, 0.2, 0.4, 0.001)},
                  loads={"a": BUSIER["b"], "b": BUSIER["a"]}, busier={"b": -1})
    assert vp.why(rows["p50"]) == vp.MACHINE_BUSIER
    assert rows["p99"].verdict == iv.Verdict.WORSE


def test_paced_comes_before_no_samples_and_behind_schedule_can_be_distrusted():
    paced = dict(ops={"wal": vp.OpFacts("service", {"a": 5000, "b": 0}, "wal",
                                        {"a": 1.0, "b": None}),
                      "wal (response)": vp.OpFacts("response", {"a": 5000, "b": 0}, "wal")})

    def rows(kept: dict, **changed) -> dict[vp.Row, iv.Change]:
        ops = {**paced["ops"], "wal": vp.OpFacts("service", {"a": 5000, "b": 4000}, "wal", kept)}
        return vp.judge({vp.Row("b", "wal", "rate"): measured(-0.2, -0.3, -0.1, 0.001),
                         vp.Row("b", "wal (response)", "rate"): iv.Change(-0.5, -0.9, 0.1)},
                        facts(ops=ops, **changed)).rows

    # the candidate completed no wal writes: its rate is the schedule's (paced), not 'worse'
    out = vp.judge({vp.Row("b", "wal", "rate"): iv.Change(-1.0, note="no samples"),
                    vp.Row("b", "wal", "p50"): iv.Change(None, note="no samples")},
                   facts(**paced)).rows
    assert out[vp.Row("b", "wal", "rate")].verdict == iv.Verdict.PACED
    assert (out[vp.Row("b", "wal", "p50")].verdict, vp.why(out[vp.Row("b", "wal", "p50")])) == \
        (iv.Verdict.NA, "no samples")
    # kept 60% of its schedule where the baseline kept all: worse (behind schedule), the
    # service op's estimate on both rows, no interval
    behind = rows({"a": 1.0, "b": 0.6})
    for row in behind.values():
        assert (row.change, row.low, row.verdict, vp.why(row)) == \
            (-0.2, None, iv.Verdict.WORSE, vp.BEHIND_SCHEDULE)
    assert {r.verdict for r in rows({"a": 1.0, "b": 0.95}).values()} == {iv.Verdict.PACED}
    # a mix of regimes takes it back (no interval to clear the ratio with)
    mixed = rows({"a": 1.0, "b": 0.6}, regime_ratios={("a", "wal"): 0.1})
    assert {vp.why(r) for r in mixed.values()} == {vp.NOT_STATIONARY}


def test_a_stopped_rate_is_worse_and_a_busier_machine_takes_it_back():
    ops = {"read": vp.OpFacts("service", {"a": 5000, "b": 0})}
    rows = {vp.Row("b", "read", "rate"): iv.Change(-1.0, note="no samples"),
            vp.Row("b", "read", "p50"): iv.Change(None, note="no samples")}
    out = vp.judge(rows, facts(ops=ops)).rows
    assert (out[vp.Row("b", "read", "rate")].verdict, vp.why(out[vp.Row("b", "read", "rate")])) \
        == (iv.Verdict.WORSE, "no samples")
    out = vp.judge(rows, facts(ops=ops, loads=BUSIER, busier={"b": 1})).rows
    assert vp.why(out[vp.Row("b", "read", "rate")]) == vp.MACHINE_BUSIER
    # too few baseline ops to call it: no verdict
    ops = {"read": vp.OpFacts("service", {"a": MIN_TAIL_SAMPLES - 1, "b": 0})}
    assert vp.judge(rows, facts(ops=ops)).rows[vp.Row("b", "read", "rate")].verdict == \
        iv.Verdict.NA
