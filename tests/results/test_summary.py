"""The per-run summary (summary.parquet) against numpy on the raw ops of real runs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import stallbench
from conftest import run_stallbench
from stallbench.analysis import histogram as hist
from stallbench.analysis import summary as sm
from stallbench.results import summaryfile

pytestmark = pytest.mark.pure

PROBABILITIES = [0.5, 0.9, 0.95, 0.99, 0.999]


@pytest.fixture(scope="module")
def pg_run(tmp_path_factory) -> Path:
    """A real pgioperf run with a warm-up: paced ops (response time) and readers."""
    results = tmp_path_factory.mktemp("results")
    work = tmp_path_factory.mktemp("work")
    run_stallbench("run", "pgioperf", "--variant", "s", "--results", str(results),
                   "--dir", str(work), "--data-size", "64M", "--wal-size", "16M",
                   "--readers", "2", "--duration", "3", "--warmup", "1s", "--monitors", "none",
                   "--no-progress", check=True)
    return next((results / "s" / "pgioperf").iterdir())


def _raw(run_dir: Path) -> dict[str, dict[str, np.ndarray]]:
    table = pq.read_table(run_dir / "ops.parquet")
    ops = table.column("op").cast(pa.string()).to_numpy(zero_copy_only=False)
    out = {}
    for name in np.unique(ops):
        mine = ops == name
        out[str(name)] = {c: table.column(c).to_numpy(zero_copy_only=False)[mine]
                          for c in ("worker", "start_ns", "latency_ns", "intended_ns")}
    return out


def test_summary_matches_numpy_on_the_raw_ops(pg_run):
    meta = json.loads((pg_run / "run.json").read_text())
    assert meta["warmup_s"] == 1.0
    summary = stallbench.load_run(pg_run).summary()
    raw = _raw(pg_run)
    # the warm-up counts from the run's first op, in whole blocks from its block; the run
    # spans its ops: the first op's start to the last completion
    first = min(int(cols["start_ns"].min()) for cols in raw.values())
    end = max(int((cols["start_ns"] + cols["latency_ns"]).max()) for cols in raw.values())
    block = summary.block_ns
    warmup_ns = (first // block) * block + 1_000_000_000
    assert (summary.start_ns, summary.end_ns, summary.warmup_ns) == (first, end, warmup_ns)
    assert summary.measured_ns == end - warmup_ns
    assert set(raw) <= set(summary.ops)
    for name, cols in raw.items():
        op = summary.ops[name]
        after = cols["start_ns"] >= warmup_ns
        latency = cols["latency_ns"][after].astype(np.int64)
        n, total, low, high = sm.op_totals(op, summary.warmup_blocks)
        # counts, sums, min and max exact
        assert (n, total) == (latency.size, int(latency.sum()))
        assert op.warmup_samples == int((~after).sum())
        if latency.size:
            assert (low, high) == (int(latency.min()), int(latency.max()))
        # per block counts exact
        blocks = cols["start_ns"] // summary.block_ns
        assert np.array_equal(np.bincount(blocks, minlength=op.blocks)[:op.blocks],
                              op.block_count)
        # per worker counts exact
        ids, counts = np.unique(cols["worker"][after], return_counts=True)
        assert op.workers.tolist() == ids.tolist() and op.worker_count.tolist() == counts.tolist()
        # quantiles within the stated relative error where the samples resolve them
        for p in PROBABILITIES:
            if latency.size * (1 - p) < 10:
                continue
            estimate = hist.quantiles_from_counts(op.histogram, np.array([p]),
                                                  hist.bucket_lower_edges())[0, 0]
            truth = np.quantile(latency, p, method="inverted_cdf")
            assert abs(estimate / truth - 1) <= hist.QUANTILE_RELATIVE_ERROR, (name, p)
    # paced ops: a response-time op from the planned start
    wal = raw["wal"]
    after = wal["start_ns"] >= warmup_ns
    response = wal["start_ns"] + wal["latency_ns"] - wal["intended_ns"]
    planned_after = wal["intended_ns"] >= warmup_ns
    n, total, _, _ = sm.op_totals(summary.ops["wal (response)"], summary.warmup_blocks)
    assert n == int(planned_after.sum())
    assert total == int(np.maximum(response[planned_after], 0).sum())
    assert after.sum() > 0


def test_a_stale_or_damaged_summary_is_rebuilt_never_trusted(pg_run, tmp_path):
    import shutil
    run_dir = tmp_path / "copy"
    shutil.copytree(pg_run, run_dir)
    good = stallbench.load_run(run_dir).summary()
    path = run_dir / summaryfile.SUMMARY_FILE
    # damaged: cut in half
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    rebuilt = stallbench.load_run(run_dir).summary()
    assert rebuilt.ops["read"].block_count.tolist() == good.ops["read"].block_count.tolist()
    assert summaryfile.read(run_dir, summaryfile.fingerprint(run_dir / "ops.parquet")) is not None
    # stale: ops.parquet rewritten without half of the reads; the old summary is not used
    table = pq.read_table(run_dir / "ops.parquet")
    ops = table.column("op").cast(pa.string()).to_numpy(zero_copy_only=False)
    keep = (ops != "read") | (np.arange(len(ops)) % 2 == 0)
    pq.write_table(table.filter(pa.array(keep)), run_dir / "ops.parquet")
    stale = stallbench.load_run(run_dir).summary()
    expected = int(((ops == "read") & keep).sum())
    assert int(stale.ops["read"].block_count.sum()) == expected
    # another schema version: rebuilt
    table = pq.read_table(path)
    meta = dict(table.schema.metadata)
    meta[b"summary_schema_version"] = b"999"
    pq.write_table(table.replace_schema_metadata(meta), path)
    assert summaryfile.read(run_dir, summaryfile.fingerprint(run_dir / "ops.parquet")) is None
    again = stallbench.load_run(run_dir).summary()
    assert int(again.ops["read"].block_count.sum()) == expected


def test_an_old_run_without_summary_gets_one_on_first_use(pg_run, tmp_path):
    import shutil
    run_dir = tmp_path / "old"
    shutil.copytree(pg_run, run_dir)
    (run_dir / summaryfile.SUMMARY_FILE).unlink()
    out = run_stallbench("show", str(run_dir), check=True)
    assert "read" in out.stdout
    assert (run_dir / summaryfile.SUMMARY_FILE).exists()
