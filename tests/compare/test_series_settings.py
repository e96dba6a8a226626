"""A series of single runs (issue 45 item 2): the spread between runs from all the runs of the
series, robust to its steps (analysis/changepoints.series_spread), and a change point between
points that ran the same settings said to be the machine's ('same settings'), not worse or
better. Hand-made runs: numpy draws them, and their known levels are the oracle."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from compare_fixtures import lognormal_ns, write_run

from conftest import run_stallbench
from stallbench.analysis.changepoints import series_spread

pytestmark = pytest.mark.pure


def test_the_spread_of_single_runs_is_robust_to_the_steps():
    rng = np.random.default_rng(3)
    sd = 0.03
    estimates = []
    for _ in range(200):
        levels = rng.normal(0.0, sd, 20) + np.where(np.arange(20) >= 12, 0.25, 0.0)
        found = series_spread([[level] for level in levels])
        assert found is not None
        estimates.append(found[0])
    # the step (8 sd) is one difference of 19: the median estimate within 15% of the truth
    assert np.median(estimates) == pytest.approx(sd, rel=0.15)
    # the plain sd of the runs, which the step inflates, is 4 times it
    assert np.std(levels, ddof=1) > 3 * sd


def test_the_spread_of_repeated_runs_is_their_own_around_each_point():
    rng = np.random.default_rng(4)
    sd = 0.05
    estimates = [series_spread([list(rng.normal(step, sd, 3)) for step in
                                (0.0, 0.0, 0.5, 0.5, 1.0, 1.0)])[0] for _ in range(300)]
    assert np.median(estimates) == pytest.approx(sd, rel=0.15)


def test_too_few_runs_have_no_spread_of_their_own():
    assert series_spread([[0.0], [0.1], [0.0], [0.1], [0.0]]) is None
    assert series_spread([[0.0], [0.1], [0.0], [0.1], [0.0], [0.1]]) is not None


def _step_series(root: Path, changed: dict | None) -> list[str]:
    """6 points of 2 runs, p50 and p99 x1.6 from point 3 on; every run with a plan record of
    the same settings, or `changed` settings from point 3 on."""
    rng = np.random.default_rng(5)
    names = []
    for i in range(6):
        names.append(f"p{i}")
        for _ in range(2):
            scale = (1.6 if i >= 3 else 1.0) * np.exp(rng.normal(0, 0.02))
            path = write_run(root, f"p{i}", {"read": lognormal_ns(rng, 20000, 5e4, 0.4, scale)},
                             duration_s=2.0)
            meta = json.loads((path / "run.json").read_text())
            settings = changed if changed is not None and i >= 3 else {"memory": 128 << 20}
            meta["plan"] = {"hash": "0123456789abcdef", "file": None, "settings": settings}
            (path / "run.json").write_text(json.dumps(meta))
    return names


@pytest.mark.parametrize("changed", [None, {"memory": 96 << 20}])
def test_a_step_between_points_that_ran_the_same_is_said_to_be_the_machines(tmp_path, changed):
    names = _step_series(tmp_path, changed)
    proc = run_stallbench("series", "--results", str(tmp_path), *names, "--format", "json")
    points = json.loads(proc.stdout)["change_points"]
    assert {c["metric"] for c in points} == {"read:p50", "read:p99"}, proc.stderr
    for c in points:
        assert c["variant"] == "p3" and c["low"] < 0.6 < c["high"]
        if changed is None:
            assert c["verdict"] == "unclear" and c["note"] == "same settings", c
        else:
            assert c["verdict"] == "worse", c
    # as check: a regression exits 1; a step the settings cannot explain cannot decide
    assert proc.returncode == (125 if changed is None else 1), proc.stderr
    text = run_stallbench("series", "--results", str(tmp_path), *names).stdout
    assert ("same settings" in text) == (changed is None), text
