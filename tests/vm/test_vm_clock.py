"""Guest runs whose workload starts late (issue 37, item 0): under QEMU TCG a guest's first op
comes 2.1-13 s after its run's clock started (the monitors and pgioperf's Python workers
starting), past the end of a warm-up counted from the clock. Two variants of two real guest
runs each (the fewest that measure a run-to-run spread): each run's rate against numpy on its
raw ops, the warm-up counted from the first op, and an interval no wider than the runs' own
values allow (the issue's were x40 wider)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from reliability_support import sb
from scipy import stats as scipy_stats
from vm_support import guest_kernels, qemu_pids, requires_vm

import stallbench
from stallbench.analysis import intervals as iv
from stallbench.compare.comparison import LATE_START_S

# quiet, not guest: it judges an interval's width, and since a guest run's machine_load is the
# host's, the suite's other lanes beside it make its runs MACHINE SATURATED (widened on purpose)
pytestmark = [pytest.mark.quiet, requires_vm, pytest.mark.slow]
WARMUP_NS = 1_000_000_000


def _plan(tmp_path: Path) -> Path:
    """pgioperf, whose Python workers take a guest under TCG seconds to start (the issue's
    workload); the candidate with two readers instead of one."""
    (_, _), (kernel, _) = guest_kernels()
    variants = "".join(f"""
[[variants]]
name = "{name}"
kernel = "{kernel}"
vm_cpus = 1
vm_memory = "512M"
workload_options = {{ readers = {readers} }}
""" for name, readers in (("one", 1), ("two", 2)))
    path = tmp_path / "plan.toml"
    path.write_text(f"""
workload = "pgioperf"
# 4 s: under the suite's load a 3 s guest run once held too few time blocks after its warm-up
# for a within-run variance (CI, 2026-12-05: no interval at all); this test runs alone now.
# No monitors: their start and end took 4.7 of a guest run's 24.9 s under TCG here, and the
# workers' own start still puts the first op a block or more after the clock (0.96 s seen,
# 1.9-2.3 s with the default monitors), which a warm-up counted from the clock miscounts
duration = "4s"
warmup = "1s"
monitors = "none"
iterations = 2
[options]
data_size = "16M"
wal_size = "8M"
{variants}""")
    return path


def _qemu_of(tmp_path: Path) -> list[int]:
    """QEMU processes of this test (other engineers' guests may run beside it)."""
    mine = []
    for pid in qemu_pids():
        try:
            if str(tmp_path) in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                mine.append(pid)
        except OSError:
            continue
    return mine


def _numpy_run(run_dir: Path, block_ns: int) -> tuple[float, float, int, int]:
    """The oracle: (first op, read rate after the warm-up, reads after it, its span in ns),
    numpy on the raw ops: the warm-up in whole blocks from the block of the run's first op (any
    op), to the run's last completion."""
    table = pq.read_table(run_dir / "ops.parquet", columns=["op", "start_ns", "latency_ns"])
    start, latency = (table.column(c).to_numpy() for c in ("start_ns", "latency_ns"))
    read = np.asarray(table.column("op").to_pylist()) == "read"
    first = int(start.min())
    warmup_end = (first // block_ns) * block_ns + WARMUP_NS
    ops = int(((start >= warmup_end) & read).sum())
    span = int((start + latency).max()) - warmup_end
    return first / 1e9, ops / span * 1e9, ops, span


def test_guest_runs_that_start_late_rates_and_intervals_from_their_own_spread(tmp_path):
    results = tmp_path / "results"
    out = sb("run", "--plan", str(_plan(tmp_path)), "--results", str(results), "--no-progress",
             state=tmp_path / "state", timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert not _qemu_of(tmp_path)
    logs: dict[str, list[float]] = {}
    totals: dict[str, tuple[int, int]] = {}
    late: list[float] = []
    for variant in ("one", "two"):
        for run_dir in sorted((results / variant / "pgioperf").iterdir()):
            meta = json.loads((run_dir / "run.json").read_text())
            assert meta["status"] == "complete", meta["reason"]
            summary = stallbench.load_run(run_dir).summary()
            first, rate, ops, span = _numpy_run(run_dir, summary.block_ns)
            # seen here under TCG: 2.1-13 s, and 1.5-1.9 s since the workers are let go when
            # ready and import nothing after the gate: not asserted (a faster host is welcome)
            late.append(first)
            op = summary.ops["read"]
            own = iv.rate_statistic(op, summary.warmup_blocks,
                                    summary.block_durations_ns() / 1e9)
            assert np.exp(own.log_value) == pytest.approx(rate, rel=1e-9), run_dir
            logs.setdefault(variant, []).append(float(np.log(rate)))
            n, s = totals.get(variant, (0, 0))
            totals[variant] = (n + ops, s + span)
    compare = sb("compare", "one", "two", "--results", str(results), "--format", "json",
                 state=tmp_path / "state")
    assert compare.returncode == 0, compare.stderr
    data = json.loads(compare.stdout)
    read = data["ops"]["read"]["variants"]
    for variant, (n, span) in totals.items():
        assert read[variant]["rate"] == pytest.approx(n / span * 1e9, rel=1e-9)
    change = read["two"]["change"]["rate"]
    truth = (totals["two"][0] / totals["two"][1]) / (totals["one"][0] / totals["one"][1])
    assert change["change"] == pytest.approx(truth - 1, rel=1e-9)
    if change.get("note") == "too few for an interval":
        # seen with three busy loops beside this machine kind's two CPUs: the guests' reads
        # came in a few bursts, too few time blocks of them for any interval
        pytest.skip(f"the guests' reads came in too few time blocks for an interval: {logs}")
    assert change["run_sd_measured"]
    # the widest interval the runs' own values allow: their whole variance at most the upper
    # end of its 95% interval from their sum of squares, or the A/A table's prior pooled with
    # it at the weight two runs a side leave it (analysis/intervals.py assumed_prior)
    df = 2
    ss = sum(float(((np.array(x) - np.mean(x)) ** 2).sum()) for x in logs.values())
    prior_dof = iv.PRIOR_DOF * (1 - df / iv.ASSUMED_FADE_DOF)
    pooled = (prior_dof * iv.RUN_TO_RUN_SD["rate"] ** 2 + ss) / (prior_dof + df)
    widest = max(ss / scipy_stats.chi2.ppf(0.025, df), pooled)
    half = (np.log1p(change["high"]) - np.log1p(change["low"])) / 2
    limit = scipy_stats.t.ppf(0.975, prior_dof + df) * np.sqrt(widest * (1 / 2 + 1 / 2))
    assert half <= limit * (1 + 1e-9), (half, limit, logs)
    assert change["run_sd"] ** 2 <= widest
    # a first op a second or more late is named
    named = any("first op came" in note for note in data["notes"])
    assert named == any(first >= LATE_START_S for first in late), (late, data["notes"])
