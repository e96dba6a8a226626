"""End-to-end runs of the Python workloads through the real command line."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import stallbench
from conftest import run_stallbench, stallbench_cmd

pytestmark = pytest.mark.oracle


def _only_run(results: Path, variant: str, workload: str) -> Path:
    runs = sorted((results / variant / workload).iterdir())
    assert len(runs) == 1, runs
    return runs[0]


def test_randread_records_every_operation(results, workdir):
    out = run_stallbench("run", "randread", "--variant", "a", "--results", str(results),
                         "--dir", str(workdir), "--file-size", "32M", "--threads", "2",
                         "--duration", "5", "--monitors", "none", "--no-progress", check=True)
    assert "complete" in out.stdout
    run_dir = _only_run(results, "a", "randread")
    meta = json.loads((run_dir / "run.json").read_text())
    table = pq.read_table(run_dir / "ops.parquet")
    # the workers' own counters, the stored row count and run.json all agree
    assert meta["status"] == "complete"
    assert meta["counted"]["read"] == table.num_rows == meta["samples"]["read"] > 1000
    assert 4.5 < meta["duration_s"] < 8
    latency = table.column("latency_ns").to_numpy()
    start = table.column("start_ns").to_numpy()
    worker = table.column("worker").to_numpy()
    assert (latency > 0).all()
    assert set(np.unique(worker)) == {0, 1}
    began = meta["workload_summary"]["workers_started_ns"]
    assert began <= start.min() and start.max() < began + meta["duration_s"] * 1e9
    for w in (0, 1):  # each worker's ops are stored in the order it did them
        assert (np.diff(start[worker == w]) > 0).all()
    assert table.column("intended_ns").null_count == table.num_rows
    assert meta["rusage"]["user_s"] + meta["rusage"]["system_s"] > 1.0
    assert meta["params"]["file_size"] == 32 << 20


def test_pgioperf_records_all_op_types_with_pacing(results, workdir):
    run_stallbench("run", "pgioperf", "--variant", "pg", "--results", str(results),
                   "--dir", str(workdir), "--data-size", "64M", "--wal-size", "16M",
                   "--readers", "2", "--checkpoint-fsync-every", "500", "--duration", "5",
                   "--warmup", "0",
                   "--monitors", "none", "--no-progress", check=True)
    run = stallbench.load_run(_only_run(results, "pg", "pgioperf"))
    assert run.complete
    ops = run.op_arrays()
    assert set(ops) == {"wal", "commit", "checkpoint", "checkpoint-fsync", "read"}
    for op, arrays in ops.items():
        assert run.meta.counted[op] == len(arrays.latency_ns) == run.meta.samples[op], op
    wal, commit = ops["wal"], ops["commit"]
    # every 5th WAL write is a commit, timed from the same start
    assert len(wal.latency_ns) // 5 == len(commit.latency_ns)
    assert np.isin(commit.start_ns, wal.start_ns).all()
    # paced ops carry their planned start: 1 ms apart, never after the actual start
    assert wal.intended_ns is not None and ops["checkpoint"].intended_ns is not None
    assert np.allclose(np.diff(wal.intended_ns), 1_000_000, atol=2)
    assert (wal.intended_ns <= wal.start_ns).all()
    assert ops["read"].intended_ns is None
    # roughly 1000 WAL writes a second were planned over 5 s
    assert 3000 < len(wal.latency_ns) <= 5100
    assert len(ops["checkpoint-fsync"].latency_ns) >= 1
    assert run.meta.params["wal_size"] == 16 << 20
    assert (workdir / "pgioperf.data").stat().st_size == 64 << 20


def test_files_are_reused_when_they_match(results, workdir):
    args = ["run", "randread", "--results", str(results), "--dir", str(workdir),
            "--file-size", "8M", "--duration", "1", "--monitors", "none", "--no-progress"]
    run_stallbench(*args, check=True)
    data = workdir / "randread.data"
    first = data.stat().st_mtime_ns
    run_stallbench(*args, check=True)
    assert data.stat().st_mtime_ns == first


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_run_keeps_what_was_recorded(results, workdir, signum):
    process = subprocess.Popen(
        stallbench_cmd("run", "pgioperf", "--variant", "x", "--results", str(results),
                       "--dir", str(workdir), "--data-size", "32M", "--readers", "2",
                       "--duration", "60", "--monitors", "none", "--no-progress"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    run_json = None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = list((results / "x" / "pgioperf").glob("*/run.json")) if (
            results / "x").exists() else []
        if found and (found[0].parent / ".spool").exists():
            run_json = found[0]
            break
        time.sleep(0.1)
    assert run_json, "the run did not start"
    time.sleep(2)
    process.send_signal(signum)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    run = stallbench.load_run(run_json.parent)
    assert run.status == "interrupted"
    assert run.meta.duration_s < 30
    ops = run.op_arrays()
    assert len(ops["read"].latency_ns) > 0
    for op, arrays in ops.items():
        assert run.meta.counted[op] == len(arrays.latency_ns), op
    assert not (run_json.parent / ".spool").exists()
    assert "Traceback" not in stderr


def test_a_killed_worker_fails_the_run_and_keeps_the_rest(results, workdir):
    process = subprocess.Popen(
        stallbench_cmd("run", "randread", "--variant", "k", "--results", str(results),
                       "--dir", str(workdir), "--file-size", "16M", "--threads", "2",
                       "--duration", "6", "--monitors", "none", "--no-progress"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    victim = None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and victim is None:
        out = subprocess.run(["pgrep", "-P", str(process.pid)], capture_output=True, text=True)
        kids = [int(p) for p in out.stdout.split()]
        if len(kids) >= 2:
            victim = kids[-1]
        time.sleep(0.2)
    assert victim
    time.sleep(1.5)
    subprocess.run(["kill", "-9", str(victim)], check=True)
    process.communicate(timeout=60)
    assert process.returncode == 1
    run = stallbench.load_run(_only_run(results, "k", "randread"))
    assert run.status == "failed"
    assert "killed by signal 9" in run.meta.reason
    assert len(run.op_arrays()["read"].latency_ns) > 1000


BAD_INPUT = [
    (["run", "nosuchworkload"], "invalid choice"),
    (["run", "randread", "--bogus"], "unrecognized arguments"),
    (["run", "randread", "--duration", "0"], "greater than zero"),
    (["run", "randread", "--file-size", "12Q"], "not a size"),
    (["run", "randread", "--dir", "/nonexistent/dir"], "/nonexistent/dir"),
    (["run", "randread", "--file-size", "100T", "--dir", "{workdir}"], "free"),
    (["run", "randread", "--variant", "a/b"], "not allowed"),
    (["run", "randread", "--variant", ""], "not allowed"),
    (["compare", "nosuchvariant", "other"], "nosuchvariant"),
]


@pytest.mark.parametrize("args,message", BAD_INPUT)
def test_bad_input_is_one_line_and_exit_2(results, workdir, args, message):
    args = [a.replace("{workdir}", str(workdir)) for a in args]
    out = run_stallbench(*args, "--results", str(results), timeout=60) if args[0] == "run" \
        and len(args) > 1 and args[1] != "nosuchworkload" else run_stallbench(
            *args, timeout=60, env={"STALLBENCH_RESULTS": str(results)})
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert message in lines[0]
    assert "Traceback" not in out.stderr
    assert not list(results.glob("*/*/*/ops.parquet"))
