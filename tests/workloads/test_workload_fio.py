"""fio workload on a real fio run: percentiles of the per-IO log agree with fio's own JSON
percentiles within fio's histogram error; every IO fio counted is recorded."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from conftest import ROOT, needs_fio, run_stallbench
from stallbench.core.context import EnvState, RunContext
from stallbench.core.errors import UsageError
from stallbench.core.journal import Journal
from stallbench.results.opsfile import write_ops_file
from stallbench.workloads.fio import FioWorkload, forced_job_text

pytestmark = [pytest.mark.oracle, needs_fio]

JOB = """\
[global]
size=8m
bs=4k
ioengine=psync
runtime=500
[mixed]
rw=randrw
fsync=16
[reader]
rw=randread
"""


def _read_ops(path: Path) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    table = pq.read_table(path)
    ops = np.array(table.column("op").to_pylist())
    columns = [table.column(c).to_numpy() for c in ("latency_ns", "start_ns", "worker")]
    return {op: tuple(c[ops == op] for c in columns) for op in set(ops.tolist())}


def test_fio_percentiles_match_fio_json(tmp_path: Path) -> None:
    job = tmp_path / "job.fio"
    job.write_text(JOB)
    (tmp_path / "work").mkdir()
    (tmp_path / "run").mkdir()
    workload = FioWorkload.from_options({"job": str(job)})
    assert workload.space_needed(0) == 16 << 20
    with Journal(tmp_path) as journal:
        ctx = RunContext(run_dir=tmp_path / "run", env=EnvState(workdir=tmp_path / "work"),
                         duration_s=2.0, journal=journal)
        workload.prepare(ctx)
        ctx.start_clock()
        updates: list[dict] = []
        result = workload.run(ctx, updates.append)
        counts = write_ops_file(tmp_path / "ops.parquet", result.batches)
    assert result.status == "complete", result.reason
    fio_json = json.loads((tmp_path / "run/fio.json").read_text())
    jobs = {j["jobname"]: j for j in fio_json["jobs"]}
    # the job's own runtime=500 was overridden by --duration
    assert jobs["mixed"]["job_runtime"] < 10_000
    assert counts == result.counted
    assert counts["read"] == (jobs["mixed"]["read"]["total_ios"]
                              + jobs["reader"]["read"]["total_ios"])
    assert updates and updates[-1]["read"][0] > 0
    ops = _read_ops(tmp_path / "ops.parquet")
    for op, job_name, number in (("read", "mixed", 1), ("write", "mixed", 1),
                                 ("read", "reader", 2)):
        latency, start, worker = ops[op]
        mine = latency[worker == number]
        fio_pct = jobs[job_name][op]["lat_ns"]["percentile"]
        assert len(mine) == jobs[job_name][op]["lat_ns"]["N"]
        for pct in ("50.000000", "90.000000", "99.000000"):
            # fio's percentile: the sample at rank ceil(p*N), reported as its histogram
            # bucket's value (64 buckets per power of two: within 1/128)
            exact = np.percentile(mine, float(pct), method="inverted_cdf")
            assert abs(fio_pct[pct] - exact) <= 0.01 * exact, (op, job_name, pct)
        assert start.min() >= 0 and start.max() < 4e9
    assert jobs["mixed"]["sync"]["total_ios"] > 0
    mixed = next(j for j in result.extra["jobs"] if j["jobname"] == "mixed")
    assert mixed["sync"]["count"] == jobs["mixed"]["sync"]["total_ios"]
    assert not (tmp_path / "run/.fio-logs").exists()


def test_forced_options_win_in_every_section(tmp_path: Path) -> None:
    text = forced_job_text(JOB, tmp_path / "w", tmp_path / "l", 3)
    sections = text.split("[")
    assert all("log_avg_msec=0" in s and "runtime=3" in s for s in sections[1:])


def test_bad_job_files(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--job"):
        FioWorkload.from_options({})
    with pytest.raises(UsageError, match="cannot read"):
        FioWorkload.from_options({"job": str(tmp_path / "nope.fio")})
    empty = tmp_path / "empty.fio"
    empty.write_text("[global]\nbs=4k\n")
    with pytest.raises(UsageError, match="no job section"):
        FioWorkload.from_options({"job": str(empty)})


def test_run_pg_like_example_through_cli(tmp_path: Path) -> None:
    results = tmp_path / "results"
    small = tmp_path / "pg-like-small.fio"
    # the shipped example, with smaller files so the test stays short
    small.write_text((ROOT / "examples/pg-like.fio").read_text()
                     .replace("size=512m", "size=32m").replace("size=64m", "size=8m"))
    out = run_stallbench("run", "fio", "--job", str(small), "--duration", "2",
                         "--results", str(results), "--variant", "pglike", "--monitors", "none",
                         "--no-progress", timeout=120)
    assert out.returncode == 0, out.stderr
    meta = json.loads((results / "pglike/fio/1/run.json").read_text())
    assert meta["status"] == "complete"
    assert meta["samples"]["read"] > 0 and meta["samples"]["write"] > 0
    names = [j["jobname"] for j in meta["workload_summary"]["jobs"]]
    assert names == ["wal", "checkpointer", "reader", "reader", "reader", "reader"]
    wal = meta["workload_summary"]["jobs"][0]
    assert wal["sync"]["count"] > 0          # fdatasync latencies, from fio's JSON only
    assert any("sync" in note for note in meta["notes"])


def test_stop_keeps_what_fio_recorded(tmp_path: Path) -> None:
    """ctx.stop (Ctrl-C) makes fio stop its jobs; it still writes its logs and JSON."""
    job = tmp_path / "job.fio"
    job.write_text("[global]\nsize=4m\nbs=4k\nioengine=psync\n[r]\nrw=randread\n")
    (tmp_path / "work").mkdir()
    (tmp_path / "run").mkdir()
    workload = FioWorkload.from_options({"job": str(job)})
    with Journal(tmp_path) as journal:
        ctx = RunContext(run_dir=tmp_path / "run", env=EnvState(workdir=tmp_path / "work"),
                         duration_s=60.0, journal=journal)
        workload.prepare(ctx)
        ctx.start_clock()
        timer = threading.Timer(1.5, ctx.stop.set)
        timer.start()
        result = workload.run(ctx, lambda update: None)
        counts = write_ops_file(tmp_path / "ops.parquet", result.batches)
        assert journal.entries == []
    assert result.status == "interrupted"
    assert result.rusage["elapsed_s"] < 30
    assert counts["read"] > 0 and counts == result.counted
