"""The traced stalls of a run's workers (reclaim, dirty throttling) inside each op: the stall
table loaded, each worker's stalls matched to its ops streamed from ops.parquet (after the
warm-up), summed by analysis/where/tracedstalls.py.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ...analysis import monitornames
from ...analysis.where import tracedstalls as traced
from ...core.errors import RunDataError
from ...results.store import Run
from .facts import worker_pids


def stall_table(run: Run) -> pa.Table | None:
    """The run's one table of timed stalls: the reclaim monitor's, else its trace table (which
    records the same events), so no stall is counted twice."""
    try:
        table = run.monitor_table(monitornames.STALL_TABLES[monitornames.RECLAIM])
        return table if table is not None else run.trace_table()
    except RunDataError:
        return None


def stalls_in_ops(run: Run) -> dict[str, dict[str, traced.StallSum]]:
    """op -> stall kind -> StallSum for one run ({} without a stall table or stalls)."""
    table = stall_table(run)
    if table is None or not table.num_rows:
        return {}
    category = table.column("category").to_numpy(zero_copy_only=False).astype(str)
    duration = table.column("duration_ns").to_numpy()
    keep = np.isin(category, traced.STALL_CATEGORIES) & (duration > 0)
    if not keep.any():
        return {}
    tid = table.column("tid").to_numpy()[keep]
    start = table.column("t_ns").to_numpy()[keep]
    kind = table.column("kind").to_numpy(zero_copy_only=False).astype(str)[keep]
    duration = duration[keep]
    per_worker = {}
    for worker, pid in worker_pids(run, monitornames.RECLAIM).items():
        mine = tid == pid       # the worker's main thread, which does its ops
        if mine.any():
            per_worker[worker] = (start[mine], duration[mine], kind[mine])
    overlap = traced.StallOverlap(per_worker)
    if not overlap.stalls:
        return {}
    try:
        warmup_ns = run.summary().warmup_ns
        for batch in run.iter_ops(["op", "worker", "start_ns", "latency_ns"]):
            begin = batch.column("start_ns").to_numpy()
            after = begin >= warmup_ns
            if not after.any():
                continue
            names = batch.column("op").cast(pa.string()).to_numpy(zero_copy_only=False)
            overlap.add_ops(names[after], batch.column("worker").to_numpy()[after],
                            begin[after], batch.column("latency_ns").to_numpy()[after])
    except RunDataError:
        return {}
    return overlap.by_op()
