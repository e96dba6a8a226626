"""The recorder's spool format and its merge into ops.parquet."""

from __future__ import annotations

import os
from array import array

import numpy as np
import pyarrow.parquet as pq
import pytest

from stallbench.results.oprecorder import WorkerRecorder, read_spools
from stallbench.results.store import RunWriter, load_run

pytestmark = pytest.mark.pure


def test_spools_round_trip_and_a_torn_record_is_dropped(tmp_path):
    spool = tmp_path / "spool"
    spool.mkdir()
    t0 = 1_000_000
    reader = WorkerRecorder(spool, 0, ["read"], "sl", capacity=16)
    starts = np.arange(40, dtype=np.int64) * 10 + t0 + 5
    ends = starts + np.arange(1, 41)
    for chunk in range(0, 40, 16):
        n = min(16, 40 - chunk)
        reader.starts[:n] = array("q", starts[chunk:chunk + n].tolist())
        reader.ends[:n] = array("q", ends[chunk:chunk + n].tolist())
        reader.flush(n)
    reader.close()
    writer = WorkerRecorder(spool, 1, ["wal", "commit"], "osli", capacity=8)
    records = [(0, t0 + 100, 7, t0 + 90), (1, t0 + 100, 30, t0 + 90), (0, t0 + 200, 8, t0 + 190)]
    for k, record in enumerate(records):
        writer.data[4 * k:4 * k + 4] = array("q", record)
    writer.flush(12)
    writer.close()
    with open(writer.path, "ab") as f:   # a record torn by a crash mid-write
        f.write(b"\x01" * 12)
    assert reader.counts == [40] and writer.counts == [2, 1]

    run = RunWriter(tmp_path / "results", "v", "w", {})
    counts = run.write_ops(read_spools(spool, t0, chunk_records=7))
    run.meta.ops_declared = ["read", "wal", "commit", "never"]
    run.finalize("complete")
    assert counts == {"read": 40, "wal": 2, "commit": 1}
    ops = load_run(run.path).op_arrays()
    assert np.array_equal(ops["read"].start_ns, starts - t0)
    assert np.array_equal(ops["read"].latency_ns, np.arange(1, 41))
    assert ops["read"].intended_ns is None
    assert list(ops["wal"].latency_ns) == [7, 8]
    assert list(ops["wal"].intended_ns) == [90, 190]
    assert list(ops["commit"].latency_ns) == [30]
    assert len(ops["never"].latency_ns) == 0
    assert pq.read_table(run.path / "ops.parquet").num_rows == 43
    assert not [p for p in os.listdir(run.path) if p.startswith(".")]
