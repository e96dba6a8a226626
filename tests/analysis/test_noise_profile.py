"""Noise profiles (analysis/noise.py): the run-to-run spread they record is the one the runs
had, on simulated runs whose run effect is known; their files are refused when damaged."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_analysis_intervals import bursty_run

from stallbench.analysis import interference
from stallbench.analysis import intervals as iv
from stallbench.analysis import noise as nz

pytestmark = pytest.mark.quiet


@pytest.mark.parametrize("run_sd", [0.0, 0.05, 0.15])
def test_the_profile_recovers_the_run_effect_of_simulated_runs(run_sd):
    rng = np.random.default_rng(int(run_sd * 100) + 3)
    runs = [bursty_run(rng, 20_000, 1.0, run_sd=run_sd) for _ in range(24)]
    stats = [iv.quantile_statistics(r.ops["read"], r.warmup_blocks, [0.5])[0] for r in runs]
    sd, dof, within = nz.run_to_run(stats)
    assert dof == 23 and within > 0
    # the sd of a 24-run estimate of sd s is about s / sqrt(2 * 23), 0.15 s: 3 of them
    assert abs(sd - run_sd) <= 0.45 * run_sd + 0.012, (sd, run_sd)


def test_resolution_narrows_with_runs_and_with_a_smaller_spread():
    assert nz.resolution(0.02, 7, 1e-6, 3) < nz.resolution(0.02, 7, 1e-6, 1)
    assert nz.resolution(0.01, 7, 1e-6, 1) < nz.resolution(0.05, 7, 1e-6, 1)
    # hand: t(0.975, 7) = 2.365; sqrt(2 * (0.05^2 + 0)) = 0.0707 -> exp(0.1672) - 1
    assert np.isclose(nz.resolution(0.05, 7, 0.0, 1), np.expm1(2.3646 * 0.070711), rtol=1e-3)


def test_a_damaged_profile_is_refused_with_the_reason():
    good = nz.NoiseProfile("h", "randread", "randread-x", {}, {}, "base", 8, "2026-12-01T00:00",
                           0.0, 5.0, {"read": {"p50": [0.02, 7.0, 1e-6]}})
    data = json.loads(json.dumps(good.to_json()))
    assert nz.NoiseProfile.from_json(data).prior("read", "p50") == iv.Prior(0.02, 7.0,
                                                                            iv.PROFILE, 1e-6)
    data["table"]["read"]["p50"] = [0.02, 7.0]
    with pytest.raises(ValueError, match="read:p50"):
        nz.NoiseProfile.from_json(data)
    with pytest.raises(ValueError, match="version"):
        nz.NoiseProfile.from_json({**good.to_json(), "version": 99})


def test_the_saturated_floor_grows_with_the_outside_load():
    def load(others: float, saturated: int = 1):
        return interference.OutsideLoad(2, others, 1, saturated, 1.0)

    assert interference.saturated_sd([load(0.0, 0), load(0.1, 0)]) == 0.0
    # 0 at 5% of the CPUs, SATURATED_SD at 80%: 1.6 of 2 CPUs gives it, 1.0 of 2 (50%) 0.6 of it
    top = interference.SATURATED_SD
    assert np.isclose(interference.saturated_sd([load(0.0, 0), load(1.6)]), top)
    assert np.isclose(interference.saturated_sd([load(1.0), load(0.0, 0)]), top * 0.45 / 0.75)
    assert interference.saturated_sd([load(1.9), None]) > top
