"""Which trace table a reader takes is one rule (rundirs.TRACE_TABLES, Run.trace_table_name),
applied to each run: a variant whose runs differ (one recorded trace-full and trace, another
trace only) gives the where section the same D-state time as `export --format folded`.
The oracle is the durations written, summed by hand."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest
from compare_fixtures import write_run

from stallbench.compare import blocked
from stallbench.compare.where.variantdata import VariantData as _VariantData
from stallbench.monitors.trace import rows_to_table
from stallbench.results.rundirs import MONITOR_DIR
from stallbench.results.store import load_run

pytestmark = pytest.mark.quiet


def _dstate(duration_ns: int, stack: str) -> dict:
    return {"t_ns": 1_000, "duration_ns": duration_ns, "pid": 7, "tid": 7, "comm": "w",
            "category": "dstate", "kind": "D", "stack": stack, "device": "", "detail": ""}


def test_each_run_gives_its_own_preferred_trace_table(tmp_path) -> None:
    results = tmp_path / "results"
    latency = {"read": np.full(10, 1_000_000, dtype=np.int64)}
    both = write_run(results, "v", latency, duration_s=1.0, seed=1)
    trace_only = write_run(results, "v", latency, duration_s=1.0, seed=2)
    tables = {(both, "trace_full"): [_dstate(5_000_000, "a;io_schedule")],
              (both, "trace"): [_dstate(3_000_000, "a;io_schedule")],  # the same D state, cut
              (trace_only, "trace"): [_dstate(7_000_000, "b;io_schedule")]}
    for (run, name), rows in tables.items():
        (run / MONITOR_DIR).mkdir(exist_ok=True)
        pq.write_table(rows_to_table(rows), run / MONITOR_DIR / f"{name}.parquet")
    runs = [load_run(both), load_run(trace_only)]
    assert [r.trace_table_name() for r in runs] == ["trace_full", "trace"]

    durations = _VariantData(runs).trace_durations()
    where_ns = sorted(int(d) for categories, values in durations
                      for c, d in zip(categories, values, strict=True) if c == "dstate")
    assert where_ns == [5_000_000, 7_000_000]        # trace_full of the first, trace of the other

    profile = blocked.profile("v", runs, "trace")
    assert profile is not None and profile.runs == 2
    assert set(profile.counts) == {"w;a;io_schedule", "w;b;io_schedule"}
