"""fio's json+ latency bins and write_hist_log histogram logs imported from one real fio run:
the rebuilt samples give fio's own percentiles (exactly with fio's rank rule, within one bucket
with stallbench's interpolated percentiles), fio's exact mean within the bin error, and the
per-IO lat logs of the same run (the real latencies) within the bin error; the lat-log import
keeps every IO's offset and block size in monitors/fio_io.parquet."""

from __future__ import annotations

import json
import math
import subprocess
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from conftest import needs_fio, run_stallbench
from stallbench.core.errors import UsageError
from stallbench.importers import import_log, parse_log
from stallbench.importers.fiohist import BIN_ERROR, column_bounds
from stallbench.results.store import load_run

pytestmark = [pytest.mark.oracle, needs_fio]
SIZE = 16 << 20


@pytest.fixture(scope="module")
def fio_run(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("fio")
    for name in ("lat", "hist"):
        (base / name).mkdir()
    job = base / "job.fio"
    job.write_text(f"""[global]
ioengine=psync
size={SIZE}
bs=4k
runtime=2
time_based=1
lat_percentiles=1
directory={base}
[reader]
rw=randread
write_lat_log={base / 'lat' / 'x'}
log_avg_msec=0
log_offset=1
write_hist_log={base / 'hist' / 'x'}
log_hist_msec=250
[writer]
rw=randwrite
size=4M
fsync=8
""")
    out = subprocess.run(["fio", "--output-format=json+", f"--output={base / 'plus.json'}",
                          str(job)], capture_output=True, text=True, timeout=60, cwd=base)
    assert out.returncode == 0, out.stderr
    return base


def _fio(base: Path) -> dict:
    return json.loads((base / "plus.json").read_text())


def _ops(run_dir: Path) -> dict[tuple[str, int], np.ndarray]:
    table = pq.read_table(run_dir / "ops.parquet")
    op = np.array(table.column("op").to_pylist())
    worker = table.column("worker").to_numpy()
    latency = table.column("latency_ns").to_numpy()
    return {(o, int(w)): np.sort(latency[(op == o) & (worker == w)])
            for o, w in set(zip(op.tolist(), worker.tolist(), strict=True))}


def _check_against_fio(latency: np.ndarray, stats: dict) -> None:
    assert len(latency) == stats["N"]
    ordered = np.sort(latency)
    for p, value in stats["percentile"].items():
        # fio's rank rule (stat.c: the first bucket whose cumulative count reaches p / 100 * N,
        # in long double, from p's binary value): 99.95 of 18,000 is the 17,992nd, where
        # numpy's inverted_cdf, in double, takes the 17,991st
        rank = math.ceil(Fraction(float(p)) * len(latency) / 100)
        assert ordered[max(rank, 1) - 1] == value, p
    assert latency.mean() == pytest.approx(stats["mean"], rel=BIN_ERROR)


def test_json_plus_import_gives_fios_percentiles(fio_run: Path, tmp_path: Path) -> None:
    data = _fio(fio_run)
    results = tmp_path / "results"
    run_dir = import_log("fio", fio_run / "plus.json", "plus", results)
    meta = load_run(run_dir).meta
    derived = meta.histogram_derived
    assert derived["bin_error"] == BIN_ERROR == 1 / 128 and derived["latency"] == ["lat"]
    assert any(n.startswith("histogram-derived") for n in meta.notes)
    ops = _ops(run_dir)
    reader, writer = data["jobs"]
    _check_against_fio(ops[("read", 1)], reader["read"]["lat_ns"])
    _check_against_fio(ops[("write", 2)], writer["write"]["lat_ns"])
    assert len(ops[("sync", 2)]) == writer["sync"]["lat_ns"]["N"] > 0
    assert meta.duration_s == pytest.approx(max(j["job_runtime"] for j in data["jobs"]) / 1e3)

    # stallbench's own (interpolated) percentiles: within one bucket of fio's, and within the
    # bin error of the real latencies from the same run's per-IO log
    import_log("fio", fio_run / "lat", "exact", results)
    out = run_stallbench("compare", "exact", "plus", "--results", str(results),
                         "--format", "json", check=True)
    read = json.loads(out.stdout)["ops"]["read"]["variants"]
    assert read["plus"]["samples"] == read["exact"]["samples"] == reader["read"]["total_ios"]
    # a bucket's midpoint is a monotone map of the real latency, so every order statistic, and
    # any interpolation between two, is within the bin error of the real one
    for stat in ("min_ns", "p50_ns", "p90_ns", "p95_ns", "p99_ns", "max_ns"):
        assert read["plus"][stat] == pytest.approx(read["exact"][stat], rel=BIN_ERROR), stat
    # fio's median is a bucket midpoint; the interpolated one lies within that bucket's
    # neighbours (where samples are dense, as at the median)
    fio_median = reader["read"]["lat_ns"]["percentile"]["50.000000"]
    assert read["plus"]["p50_ns"] == pytest.approx(fio_median, rel=2 * BIN_ERROR)


def test_histogram_logs_match_the_real_completion_latencies(fio_run: Path,
                                                           tmp_path: Path) -> None:
    """Oracle: the per-IO clat log of the same job (real completion latencies). fio writes no
    line for the last partial interval, so only IOs up to the last line's time count."""
    data = _fio(fio_run)
    run_dir = import_log("fio", fio_run / "hist", "hist", tmp_path / "results")
    meta = load_run(run_dir).meta
    derived = meta.histogram_derived
    assert derived["latency"] == ["clat"] and derived["coarseness"] == [0]
    assert derived["bin_error"] == BIN_ERROR
    rebuilt = _ops(run_dir)[("read", 1)]
    lines = next((fio_run / "hist").iterdir()).read_text().splitlines()
    last_ms = max(int(line.split(",")[0]) for line in lines)
    assert derived["last_ms"] == {"1": last_ms}
    assert len(rebuilt) == sum(sum(int(c) for c in line.split(",")[3:]) for line in lines)
    real = []
    for line in (fio_run / "lat" / "x_clat.1.log").read_text().splitlines():
        t_ms, value = (int(f) for f in line.split(",")[:2])
        if t_ms <= last_ms:
            real.append(value)
    real = np.sort(real)
    assert len(rebuilt) == pytest.approx(len(real), rel=0.01)      # window edges, to the ms
    assert len(real) <= data["jobs"][0]["read"]["clat_ns"]["N"]     # a last window may be missing
    for p in (10, 50, 90, 99):
        assert np.percentile(rebuilt, p) == pytest.approx(np.percentile(real, p),
                                                          rel=2 * BIN_ERROR), p
    assert rebuilt.mean() == pytest.approx(real.mean(), rel=0.02)
    # samples stay inside the interval their line covers: completions never beyond the run
    table = pq.read_table(run_dir / "ops.parquet")
    ends = table.column("start_ns").to_numpy() + table.column("latency_ns").to_numpy()
    assert ends.max() <= last_ms * 1_000_000


def test_lat_log_import_keeps_offsets_and_block_sizes(fio_run: Path, tmp_path: Path) -> None:
    run = load_run(import_log("fio", fio_run / "lat", "io", tmp_path / "results"))
    io = pq.read_table(run.path / "monitors" / "fio_io.parquet")
    ops = run.op_arrays()                     # readers of ops.parquet are untouched
    assert io.num_rows == len(ops["read"].latency_ns) > 1000
    offsets = io.column("offset").to_numpy()
    assert io.column("offset").null_count == 0
    assert (offsets % 4096 == 0).all() and offsets.max() < SIZE and len(np.unique(offsets)) > 100
    assert set(io.column("bs").to_pylist()) == {4096}
    assert np.array_equal(np.sort(io.column("latency_ns").to_numpy()),
                          np.sort(ops["read"].latency_ns))
    # the same order as the ops: t_ns is the op's start
    assert np.array_equal(np.sort(io.column("t_ns").to_numpy()), np.sort(ops["read"].start_ns))


def test_coarse_columns_and_bad_input(tmp_path: Path) -> None:
    low, high = column_bounds(1856 >> 2)                   # log_hist_coarseness=2
    assert low[0] == 0 and (high[:-1] == low[1:]).all()   # contiguous, no gaps
    log = tmp_path / "x_clat_hist.1.log"
    log.write_text("100, 0, 4096, " + ", ".join(["0"] * 100) + "\n")
    with pytest.raises(UsageError, match="100 histogram columns"):
        parse_log("fio", log)
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"jobs": [{"read": {"lat_ns": {"N": 1}}}]}))
    with pytest.raises(UsageError, match="json\\+"):
        parse_log("fio", plain)


def test_fio_workload_keeps_offsets_and_says_rate_jobs_have_no_schedule(tmp_path: Path) -> None:
    job = tmp_path / "rated.fio"
    job.write_text("[global]\nsize=4m\nbs=8k\nioengine=psync\n[r]\nrw=randread\nrate_iops=400\n")
    (tmp_path / "work").mkdir()
    out = run_stallbench("run", "fio", "--job", str(job), "--duration", "2", "--dir",
                         str(tmp_path / "work"), "--results", str(tmp_path / "results"),
                         "--variant", "rated", "--monitors", "none", "--no-progress")
    assert out.returncode == 0, out.stderr
    run = load_run(next((tmp_path / "results/rated/fio").iterdir()))
    io = pq.read_table(run.path / "monitors" / "fio_io.parquet")
    assert io.num_rows == len(run.op_arrays()["read"].latency_ns) == pytest.approx(800, rel=0.1)
    assert set(io.column("bs").to_pylist()) == {8192}
    assert (io.column("offset").to_numpy() % 8192 == 0).all()
    assert any("fio logs no scheduled start" in note for note in run.meta.notes)
