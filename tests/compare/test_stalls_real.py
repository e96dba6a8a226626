"""Stalls over time on real pgioperf runs: the episodes the comparison reports against the
runs' own ops.parquet counted with numpy, per interval of the run."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest

from stallbench.results.runselect import resolve_runs

pytestmark = [pytest.mark.oracle_beside_guest, pytest.mark.root]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "stallbench", *args], capture_output=True,
                          text=True, timeout=300)


def test_edge_intervals_of_a_pgioperf_run_are_not_episodes(tmp_path) -> None:
    results, work = tmp_path / "results", tmp_path / "work"
    work.mkdir()
    for variant in ("a", "b"):
        proc = _cli("run", "pgioperf", "--results", str(results), "--no-progress", "--variant",
                    variant, "--memory", "96M", "--readers", "2", "--duration", "3",
                    "--warmup", "0", "--monitors", "none", "--dir", str(work))
        assert proc.returncode == 0, proc.stderr
    proc = _cli("compare", "a", "b", "--results", str(results), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    comparison = json.loads(proc.stdout)
    edge_seen = False
    for label in ("a", "b"):
        (run,) = resolve_runs(label, results).runs
        table = pq.read_table(run.path / "ops.parquet")
        names = np.array(table["op"].cast("string").to_pylist(), dtype=object)
        start = table["start_ns"].to_numpy()
        for op, entry in comparison["ops"].items():
            if op.endswith("(response)"):   # (checkpoint-fsync, every 100000 writes: none)
                continue
            stalls = entry["variants"][label]["stalls"]
            interval = stalls["interval_ns"]
            slot = start // interval
            mine = np.bincount(slot[names == op], minlength=int(slot.max()) + 1)
            others = np.bincount(slot[names != op], minlength=int(slot.max()) + 1)
            # the run's last interval is cut by its end: an op may well have none there
            last = int(slot.max())
            edge_seen |= bool(mine[last] == 0 and others[last] > 0)
            for episode in stalls["episodes"]:
                first = episode["start_ns"] // interval
                stop = first + episode["duration_ns"] // interval
                assert episode["start_ns"] + episode["duration_ns"] <= run.duration_s * 1e9, \
                    (label, op, episode, run.duration_s)
                if episode["kind"] == "starved":   # numpy agrees: none of this op, others ran
                    assert (mine[first:stop] == 0).all() and (others[first:stop] > 0).all()
    assert edge_seen, "some op had nothing in a run's last, partial interval"
