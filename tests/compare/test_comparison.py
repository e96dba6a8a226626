"""compare/comparison.py against numpy on the raw ops: the pooled statistics of each variant,
the rate, the sample counts and their change, the parsers; and its refusals."""

from __future__ import annotations

import numpy as np
import pytest
from compare_fixtures import lognormal_ns, ops_span_s, write_run

from stallbench.cli.flags import parse_percentiles
from stallbench.compare.comparison import build_comparison
from stallbench.compare.model import CompareOptions
from stallbench.core.errors import UsageError
from stallbench.core.units import parse_percent
from stallbench.results.runselect import resolve_runs

pytestmark = pytest.mark.pure


@pytest.fixture(scope="module")
def two_variants(tmp_path_factory):
    results = tmp_path_factory.mktemp("cmp") / "results"
    rng = np.random.default_rng(11)
    raw: dict[str, list[np.ndarray]] = {"a": [], "b": []}
    for iteration in range(3):
        for variant, scale in (("a", 1.0), ("b", 1.5)):
            latency = lognormal_ns(rng, 20_000, 100_000, scale=scale)
            raw[variant].append(latency)
            write_run(results, variant, {"read": latency}, duration_s=2.0,
                      seed=iteration * 2 + (variant == "b"))
    return results, {k: np.concatenate(v) for k, v in raw.items()}


def test_pooled_statistics_match_numpy_on_the_raw_ops(two_variants):
    results, raw = two_variants
    comparison = build_comparison(resolve_runs("a", results), [resolve_runs("b", results)],
                                  CompareOptions(explain=False))
    assert (comparison.baseline, comparison.candidates) == ("a", ["b"])
    (op,) = comparison.ops
    assert op.op == "read" and op.kind == "service"
    for label in ("a", "b"):
        stats, ops = op.stats[label], raw[label]
        assert stats.samples == ops.size and stats.iteration_samples == [20_000] * 3
        seconds = sum(ops_span_s(p) for p in sorted((results / label).glob("*/*")))
        assert 5.9 < seconds <= 6.0                                     # three runs of ~2 s
        assert stats.rate == pytest.approx(ops.size / seconds)
        assert stats.values["min"] == ops.min() and stats.values["max"] == ops.max()
        assert stats.values["mean"] == pytest.approx(ops.mean(), rel=1e-9)
        for key, percent in (("p50", 50), ("p99", 99)):
            truth = np.percentile(ops, percent, method="inverted_cdf")
            assert stats.values[key] == pytest.approx(truth, rel=0.005)   # histogram: 0.4%
    assert op.samples_change["b"] == pytest.approx(0.0)
    p50 = op.changes["b"]["p50"]
    truth = np.median(raw["b"]) / np.median(raw["a"]) - 1              # ~ +50%
    assert p50.low < truth < p50.high and p50.verdict == "worse"


def test_refusals_and_parsers(two_variants):
    results, _ = two_variants
    a = resolve_runs("a", results)
    with pytest.raises(UsageError):
        build_comparison(a, [])
    with pytest.raises(UsageError):
        build_comparison(a, [resolve_runs("a", results)])           # a variant named twice
    assert parse_percent("10%", "--x") == pytest.approx(0.10)
    assert parse_percent("2.5", "--x") == pytest.approx(0.025)
    with pytest.raises(UsageError):
        parse_percent("ten", "--x")
    assert parse_percentiles("99.9,50,50") == (50.0, 99.9)
    with pytest.raises(UsageError):
        parse_percentiles("100")
