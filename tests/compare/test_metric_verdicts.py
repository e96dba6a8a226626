"""A metric asked for shows its verdict (issue 37, item 6): `compare --metric read:mean` gives
the mean row the verdict `check` gives it, where `compare` alone leaves the mean an interval
without a verdict; hand-made runs, numpy on their raw latencies as the oracle."""

from __future__ import annotations

import json

import numpy as np
import pytest
from compare_fixtures import lognormal_ns, write_run

from stallbench.cli import main

pytestmark = pytest.mark.pure


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """3 runs a side; the candidate's slowest tenth of reads 7x slower: the mean +54% or so,
    the median unmoved."""
    results = tmp_path_factory.mktemp("metric") / "results"
    rng = np.random.default_rng(37)
    raw = {"good": [], "bad": []}
    for iteration in range(3):
        for variant in ("good", "bad"):
            latency = lognormal_ns(rng, 20_000, 100_000, sigma=0.3)
            if variant == "bad":
                slow = latency >= np.quantile(latency, 0.9)
                latency = np.where(slow, latency * 7, latency)
            raw[variant].append(latency)
            write_run(results, variant, {"read": latency}, duration_s=2.0,
                      seed=2 * iteration + (variant == "bad"))
    return results, {k: np.concatenate(v) for k, v in raw.items()}


def _compare(capsys, results, *extra: str) -> dict:
    assert main(["compare", "good", "bad", "--results", str(results), "--format", "json",
                 *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_metric_asked_for_shows_its_verdict(results, capsys):
    path, raw = results
    truth = raw["bad"].mean() / raw["good"].mean() - 1
    plain = _compare(capsys, path)["ops"]["read"]["variants"]["bad"]["change"]["mean_ns"]
    assert plain["change"] == pytest.approx(truth, rel=1e-9) and truth > 0.4
    # the interval clears zero, yet the mean is not a row that decides by default
    assert plain["low"] > 0 and plain["verdict"] == "interval only"
    asked = _compare(capsys, path, "--metric", "read:mean")
    mean = asked["ops"]["read"]["variants"]["bad"]["change"]["mean_ns"]
    assert mean["verdict"] == "worse" and mean["low"] == plain["low"]
    assert "read:mean (the metrics asked for)" in asked["adjustment"]
    # the rows that decide by default keep their verdicts
    p99 = asked["ops"]["read"]["variants"]["bad"]["change"]["p99_ns"]
    assert p99["verdict"] == "worse"
    # the text shows it on the mean row
    assert main(["compare", "good", "bad", "--results", str(path), "--metric", "read:mean"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines()
               if line.split()[:1] == ["mean"])
    assert row.rstrip().endswith("worse"), row
    # as check judges it: beyond a 10% bound, exit 1
    assert main(["check", "good", "bad", "--results", str(path), "--metric", "read:mean",
                 "--max-regression", "10%"]) == 1
    capsys.readouterr()


def test_a_metric_of_no_op_is_one_line_and_exit_2(results, capsys):
    path, _ = results
    assert main(["compare", "good", "bad", "--results", str(path), "--metric",
                 "write:mean"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("stallbench: --metric write:mean"), err
