"""`stallbench calibrate`: A/A runs of a plan's baseline become this host's noise profile; the
spread it records is the one numpy finds between the runs' raw latencies, and a later comparison
of one run each uses it and says so."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from conftest import run_stallbench

pytestmark = pytest.mark.quiet

PLAN = """
workload = "randread"
duration = "1s"
monitors = "none"
warmup = "0s"

[workload_options]
file_size = "32M"

[[variants]]
name = "base"
dir = "{dir}"
drop_caches = false
"""
# the warm-up stated, not found: the oracle's medians are over every op of each run
RUN = ["--duration", "1s", "--warmup", "0s", "--monitors", "none", "--no-progress",
       "--no-drop-caches", "--file-size", "32M"]


@pytest.mark.root
def test_calibrate_saves_the_measured_spread_and_compare_uses_it(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN.format(dir=data))
    results = tmp_path / "results"
    out = run_stallbench("calibrate", str(plan), "--runs", "4", "--results", str(results),
                         "--no-progress", timeout=300, check=True)
    assert "noise profile of 4 A/A runs of base" in out.stdout
    files = list((results / "noise-profiles").glob("*/randread-*.json"))
    assert len(files) == 1, out.stdout
    profile = json.loads(files[0].read_text())
    assert profile["runs"] == 4 and profile["variant"] == "base"

    # the oracle: numpy's median of each run's raw latencies, its spread between the runs
    logs = []
    for run_dir in sorted((results / "calibrate-base" / "randread").iterdir()):
        latency = pq.read_table(run_dir / "ops.parquet").column("latency_ns").to_numpy()
        logs.append(np.log(np.quantile(latency, 0.5, method="inverted_cdf")))
    between = float(np.var(logs, ddof=1))
    sd, dof, within = profile["table"]["read"]["p50"]
    assert dof == 3
    assert abs(sd ** 2 - max(0.0, between - within)) <= 3e-5 + 0.25 * between, \
        (sd, within, between)

    # one run each of the same shape: the profile is the prior, and the report names it
    for variant, extra in (("base", []), ("bigger", ["--record-size", "8K"])):
        run_stallbench("run", "randread", "--variant", variant, "--results", str(results),
                       "--dir", str(data), *RUN, *extra, check=True)
    report = json.loads(run_stallbench("compare", "base", "bigger", "--results", str(results),
                                       "--format", "json", check=True).stdout)
    p50 = report["ops"]["read"]["variants"]["bigger"]["change"]["p50_ns"]
    assert p50["prior_source"] == "profile" and p50["prior_dof"] == 3
    assert "noise profile of 4 A/A runs of base" in report["noise_profile"]
    text = run_stallbench("compare", "base", "bigger", "--results", str(results),
                          check=True).stdout
    assert "run-to-run spread: noise profile of 4 A/A runs of base" in " ".join(text.split())


def test_calibrate_refuses_too_few_runs_in_one_line(tmp_path):
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN.format(dir=tmp_path))
    out = run_stallbench("calibrate", str(plan), "--runs", "2")
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "between 3 and 1000" in out.stderr
