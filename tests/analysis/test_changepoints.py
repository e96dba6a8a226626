"""The change-point detector (analysis/changepoints.py) on hand-made series whose truth is known:
a step at a known point is found there and nowhere else, with an interval that holds the true
change; a flat series has none; and the axis order of kernel releases (analysis/axis.py)."""

from __future__ import annotations

import numpy as np
import pytest

from stallbench.analysis.axis import axis_order, version_key
from stallbench.analysis.changepoints import change_points, split_change
from stallbench.analysis.intervals import RunStatistic, assumed_prior
from stallbench.compare.verdicts import change_point

pytestmark = pytest.mark.pure

RUN_SD = 0.05       # each run's level wanders this much (log scale), as runs of this machine do
WITHIN_VAR = 0.02 ** 2


def _series(levels: list[float], runs: int, seed: int) -> list[list[RunStatistic]]:
    rng = np.random.default_rng(seed)
    return [[RunStatistic(level + rng.normal(0, RUN_SD), WITHIN_VAR, 8) for _ in range(runs)]
            for level in levels]


def _value(points: list[list[RunStatistic]]):
    """The pooled statistic of points lo..hi-1: the geometric mean of their runs."""
    return lambda lo, hi: float(np.exp(np.mean([r.log_value for p in points[lo:hi]
                                                for r in p])))


def _find(points, family=3):
    return change_points(points, _value(points), lambda dof: assumed_prior(0.25, dof), 0.02,
                         family)


def _verdict(point, higher_is_better=False) -> str:
    """The policy's verdict of a change point on a quiet machine, between other settings."""
    return change_point(point.change, higher_is_better, None, False).verdict


def test_a_step_is_found_at_its_point_and_seldom_anywhere_else():
    step = np.log(1.3)                       # +30%
    found_right, elsewhere, covered, trials = 0, 0, 0, 0
    for knee in (1, 4, 8, 9):
        levels = [0.0 if i < knee else step for i in range(10)]
        for seed in range(25):
            found = _find(_series(levels, 2, seed))
            trials += 1
            at_knee = [c for c in found if abs(c.index - knee) <= 1]
            found_right += bool(at_knee)
            elsewhere += any(abs(c.index - knee) > 1 for c in found)
            if at_knee:
                assert _verdict(at_knee[0]) == "worse"       # a latency that grew
                covered += at_knee[0].change.low < 0.3 < at_knee[0].change.high
    assert found_right == trials                  # every step, at its point (+-1, the brief's)
    # the 95% interval holds the true change; another point in a flat stretch only at the
    # false-alarm level of its segments (each 5% over the 3 statistics of the family: 1.7%,
    # 2-4% of such series in 400 simulated)
    assert covered >= 0.9 * trials
    assert elsewhere <= 0.06 * trials


def test_a_rate_that_fell_is_worse_and_one_that_rose_is_better():
    fell = _find(_series([0.0] * 5 + [np.log(0.7)] * 5, 2, 1))
    rose = _find(_series([0.0] * 5 + [np.log(1.4)] * 5, 2, 1))
    assert [(c.index, _verdict(c, True)) for c in fell] == [(5, "worse")]
    assert [(c.index, _verdict(c, True)) for c in rose] == [(5, "better")]


def test_two_steps_are_both_found():
    levels = [0.0] * 4 + [np.log(1.5)] * 4 + [np.log(3.0)] * 4
    found = _find(_series(levels, 2, 7))
    assert [c.index for c in found] == [4, 8]
    # each against the segment before it, back to the previous change point: +50%, then x2
    assert found[0].change.low < 0.5 < found[0].change.high
    assert found[1].change.low < 1.0 < found[1].change.high


def test_a_flat_series_has_no_change_point_in_at_least_95_of_100():
    flat = [0.0] * 10
    called = sum(bool(_find(_series(flat, runs, seed)))
                 for seed in range(50) for runs in (1, 2))
    assert called <= 5


def test_a_change_smaller_than_the_noise_threshold_is_no_change_point():
    # +1.5% with runs that hardly differ: the interval excludes 0, the threshold (2%) decides
    points = [[RunStatistic(np.log(1.015) if i >= 5 else 0.0, 1e-6, 8)
               for _ in range(3)] for i in range(10)]
    for point in points:   # a little spread so the runs' variance is not zero
        point[0] = RunStatistic(point[0].log_value + 1e-3, 1e-6, 8)
    change = split_change(points, _value(points), lambda dof: assumed_prior(0.25, dof), 0, 5, 10)
    assert change.low > 0
    assert _find(points) == []


def test_kernel_releases_sort_as_versions():
    releases = ["6.1.0-57-amd64", "6.1.0-9-amd64", "6.10.0", "6.8.0", "6.8.0-rc3", "6.1.0-56-amd64",
                "6.8.0-rc10"]
    assert axis_order(releases) == ["6.1.0-9-amd64", "6.1.0-56-amd64", "6.1.0-57-amd64",
                                    "6.8.0-rc3", "6.8.0-rc10", "6.8.0", "6.10.0"]
    assert version_key("5.15.0") < version_key("5.15.0-1")
    assert axis_order([268435456, 16777216, 33554432]) == [16777216, 33554432, 268435456]
