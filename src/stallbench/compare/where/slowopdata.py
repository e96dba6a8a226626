"""Where the slow ops' time went: each variant's ops slower than SLOW_FACTOR x its median, read
back from ops.parquet only in runs whose trace or stack samples can say where their time went
(elsewhere the summaries' histograms count them), and each run's monitors loaded and labelled
once for all its ops (analysis/where/slowops.py splits their time).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ...analysis import histogram as hist
from ...analysis import monitornames
from ...analysis.where import section as ws
from ...analysis.where import slowops
from ...core.errors import RunDataError
from ...results.store import Run
from .facts import worker_pids

SLOW_FACTOR = 10.0


def slow_ops(runs: list[Run], op_totals: dict[str, tuple[int, int, np.ndarray]]
             ) -> dict[str, ws.SlowOps]:
    """Per op of the variant (`op_totals`: samples, latency sum, pooled histogram), its ops
    slower than SLOW_FACTOR x its median: how many, and where their time went where a run's
    trace or stack samples can say."""
    breakdowns: dict[int, _Breakdown] = {}
    result: dict[str, ws.SlowOps] = {}
    for op, (samples, _, histogram) in op_totals.items():
        if samples == 0:
            continue
        median = hist.quantiles_from_counts(histogram, np.array([0.5]),
                                            hist.bucket_lower_edges())[0, 0]
        threshold = slowops.slow_threshold(median, SLOW_FACTOR)
        if threshold is None or threshold <= 0:
            continue
        breakdown: dict[str, int] = {}
        source = None
        count = 0
        for run in runs:
            if not _can_break_down(run):
                try:
                    data = run.summary().ops.get(op)
                except RunDataError:
                    continue
                if data is not None:
                    count += hist.count_above(data.histogram, threshold)
                continue
            try:
                slow = _slow_ops(run, op, threshold)
            except RunDataError:
                continue
            count += int(slow["latency_ns"].size)
            if not slow["latency_ns"].size:
                continue
            if id(run) not in breakdowns:
                breakdowns[id(run)] = _Breakdown(run)
            explain = breakdowns[id(run)]
            if explain.source:
                source = source or explain.source
                part = explain.of(slow["start_ns"], slow["latency_ns"], slow["worker"])
                for k, v in part.items():
                    breakdown[k] = breakdown.get(k, 0) + v
        if count:
            result[op] = slowops.slow_ops(threshold, count, source, breakdown)
    return result


def _can_break_down(run: Run) -> bool:
    """Slow ops are read back from ops.parquet only where a trace or stack samples can say
    where their time went; elsewhere the histogram counts them."""
    return run.trace_table_name() is not None or \
        (run.path / "monitors" / "stacks.parquet").exists()


def _slow_ops(run: Run, op: str, threshold: int) -> dict[str, np.ndarray]:
    """start, latency and worker of the op's ops slower than threshold, after the warm-up,
    streamed from ops.parquet in row-group batches."""
    warmup_ns = run.summary().warmup_ns
    parts: dict[str, list[np.ndarray]] = {"start_ns": [], "latency_ns": [], "worker": []}
    for table in run.iter_ops(["op", "worker", "start_ns", "latency_ns"], threshold):
        if not table.num_rows:
            continue
        names = table.column("op").cast(pa.string()).to_numpy(zero_copy_only=False)
        start = table.column("start_ns").to_numpy()
        keep = (names == op) & (start >= warmup_ns)
        for name in parts:
            parts[name].append(table.column(name).to_numpy()[keep])
    if not parts["start_ns"]:
        return {name: np.empty(0, np.int64) for name in parts}
    return {name: np.concatenate(chunks) for name, chunks in parts.items()}


class _Breakdown:
    """What one run's monitors say about where its ops' time went, loaded and labelled once
    for all its ops: the trace's intervals, else the stack samples."""

    def __init__(self, run: Run):
        self.source: str | None = None
        self.task_of_worker = worker_pids(run, monitornames.TRACE) or \
            worker_pids(run, monitornames.STACKS)
        try:
            trace = run.trace_table()
        except RunDataError:
            trace = None
        if trace is not None and trace.num_rows:
            self.source = "trace"
            columns = {name: trace.column(name).to_numpy()
                       for name in ("t_ns", "duration_ns", "pid")}
            columns.update({name: _coded(trace.column(name))
                            for name in ("category", "kind", "stack")})
            self.intervals, self.device = slowops.trace_intervals(columns)
            return
        try:
            stacks = run.monitor_table("stacks")
        except RunDataError:
            stacks = None
        if stacks is not None and stacks.num_rows:
            self.source = "stacks"
            self.interval_ns = int(float((run.meta.monitors or {}).get(monitornames.STACKS, {})
                                         .get("interval_s", 0.02)) * 1e9)
            labels = slowops.stack_labels(_coded(stacks.column("stack")))
            self.samples = (stacks.column("t_ns").to_numpy(), stacks.column("pid").to_numpy(),
                            labels.decoded())

    def of(self, start: np.ndarray, latency: np.ndarray, worker: np.ndarray) -> dict[str, int]:
        task = slowops.lookup(worker, self.task_of_worker)
        if self.source == "trace":
            return slowops.slow_op_breakdown(start, latency, task, self.intervals, self.device)
        if self.source == "stacks":
            return slowops.sampled_breakdown(start, latency, task, *self.samples,
                                             self.interval_ns)
        return {}


def _coded(column: pa.ChunkedArray) -> slowops.Coded:
    """A text column dictionary-encoded by Arrow: codes (-1 for null) and distinct values."""
    encoded = column.combine_chunks().dictionary_encode()
    codes = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    return slowops.Coded(codes, encoded.dictionary.to_pylist())
