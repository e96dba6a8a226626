"""randread's op loop in C and its Python fallback record the same thing: every op counted is
in ops.parquet, one worker's ops never overlap, and the bytes the kernel saw the worker read
(taskstats read_char, from the delay monitor) are the ops times the record size."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from conftest import run_stallbench
from stallbench.workloads.native import NO_C_LOOP, PYTHON_LOOP_NOTE, read_ops

pytestmark = pytest.mark.machine


@pytest.mark.parametrize("python_loop", [False, True], ids=["C", "Python"])
def test_both_loops_record_every_read_the_kernel_saw(tmp_path: Path, python_loop: bool):
    if not python_loop and read_ops()[0] is None:
        pytest.skip(f"no C loop here: {read_ops()[1]}")
    results = tmp_path / "results"
    run_stallbench("run", "randread", "--variant", "v", "--results", str(results), "--dir",
                   str(tmp_path), "--file-size", "8M", "--duration", "1", "--warmup", "0",
                   "--monitors", "delay", "--no-drop-caches", "--no-progress",
                   env={NO_C_LOOP: "1" if python_loop else "0"}, check=True)
    run = results / "v" / "randread" / "1"
    meta = json.loads((run / "run.json").read_text())
    note = PYTHON_LOOP_NOTE.format(why=f"{NO_C_LOOP}=1")
    assert (note in meta["notes"]) == python_loop, meta["notes"]
    ops = pq.read_table(run / "ops.parquet", columns=["start_ns", "latency_ns"])
    start = ops.column("start_ns").to_numpy()
    latency = ops.column("latency_ns").to_numpy()
    assert ops.num_rows == meta["counted"]["read"] > 10_000
    order = np.argsort(start, kind="stable")
    start, latency = start[order], latency[order]
    assert (latency > 0).all() and (start[1:] >= start[:-1] + latency[:-1]).all()
    delay = pq.read_table(run / "monitors" / "delay.parquet",
                          columns=["tid", "io_read_char"]).to_pydict()
    (worker,) = [int(pid) for pid in meta["workload_summary"]["worker_pids"].values()]
    read_char = [c for t, c in zip(delay["tid"], delay["io_read_char"], strict=True)
                 if t == worker]
    # the worker's last sample: its reads, plus at most a little of anything else it read
    assert ops.num_rows * 4096 <= max(read_char) <= ops.num_rows * 4096 + (1 << 20)


def test_pgioperf_readers_take_the_same_loop_and_say_when_it_is_python(tmp_path: Path):
    results = tmp_path / "results"
    run_stallbench("run", "pgioperf", "--variant", "v", "--results", str(results), "--dir",
                   str(tmp_path), "--data-size", "8M", "--wal-size", "4M", "--readers", "1",
                   "--duration", "1", "--warmup", "0", "--monitors", "none",
                   "--no-drop-caches", "--no-progress", env={NO_C_LOOP: "1"}, check=True)
    meta = json.loads((results / "v" / "pgioperf" / "1" / "run.json").read_text())
    assert PYTHON_LOOP_NOTE.format(why=f"{NO_C_LOOP}=1") in meta["notes"]
    ops = pq.read_table(results / "v" / "pgioperf" / "1" / "ops.parquet", columns=["op"])
    reads = sum(1 for op in ops.column("op").to_pylist() if op == "read")
    assert reads == meta["counted"]["read"] > 1000
