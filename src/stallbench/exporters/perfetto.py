"""Trace Event JSON for the Perfetto UI and chrome://tracing: one process per run; in it one
track per worker with each op as a slice, the trace monitor's intervals per thread and category
(reclaim, throttle, D state with its stack, syscalls) on the same clock, block requests as async
slices, the profile monitor's on-CPU samples per thread (an instant each, named by the function
running, its stack in args), and counter tracks for PSI, kernel counters (per-second rates of
cumulative ones), diskstats rates and each op's completions per second.

Times are ns since the run start (CLOCK_MONOTONIC, like every table of the run), written as µs
with three decimals. The output is bounded: only the chosen windows (all of the run by
default) are exported, and at most `max_events` slices per export. Within that budget the
slowest ops asked for (--around-slow) and every reclaim, throttle and D-state interval are
always kept; the other slices (ops, syscalls, block requests) are thinned to the longest that
fit. Only when the always-kept ones alone exceed the budget is the trace cut at a time. Either
way the caller is told in one line what was left out and which --max-events keeps everything
(the line is also in the trace's otherData.notes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TextIO

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..analysis import monitornames
from ..analysis import windows as win
from ..compare.cpuprofile import sample_roles
from ..core.errors import RunDataError, UsageError
from ..core.version import __version__
from ..results.opsfile import OPS_ROW_GROUP
from ..results.rundirs import OPS_FILE
from ..results.runmeta import run_end_s
from ..results.store import Run
from . import DEFAULT_MAX_EVENTS
from .perfettoevents import (
    ExportSummary,
    Writer,
    read_table,
    write_counters,
    write_ops,
    write_samples,
    write_trace,
)

SLOW_PAD_NS = 100_000_000
ALWAYS_KEPT = ("reclaim", "throttle", "dstate")   # trace categories never thinned


def _ops_path(run: Run):
    path = run.path / OPS_FILE
    if not path.exists():
        raise RunDataError(f"{run.path}: no {OPS_FILE} ({run.describe_status()})")
    return path


def run_end_ns(run: Run) -> int:
    """Where the run ends on its clock (runmeta.run_end_s), or the last op's start (from the
    Parquet statistics, without reading the ops) when that is later or nothing is recorded."""
    end = int(run_end_s(run.meta.workload_summary, run.meta.duration_s) * 1e9)
    try:
        metadata = pq.ParquetFile(_ops_path(run)).metadata
    except (pa.ArrowException, OSError) as exc:
        raise RunDataError(f"{run.path / OPS_FILE}: damaged ({exc})") from exc
    column = metadata.schema.to_arrow_schema().get_field_index("start_ns")
    for group in range(metadata.num_row_groups):
        stats = metadata.row_group(group).column(column).statistics
        if stats is not None and stats.has_min_max:
            end = max(end, int(stats.max))
    return end


def check_window(runs: list[Run], window: tuple[int, int], text: str) -> None:
    """A window that starts after the end of every run shows nothing: a usage error."""
    ends = [(run_end_ns(run), index) for index, run in enumerate(runs)]
    if ends and all(window[0] >= end for end, _ in ends):
        end, index = max(ends)
        run = runs[index]
        what = f"the run lasts {end / 1e9:.3f} s" if len(runs) == 1 else \
            f"the longest of its {len(runs)} runs lasts {end / 1e9:.3f} s"
        raise UsageError(f"--window {text}: starts after the end of {_name(run)} ({what}); "
                         "give a window inside it")


def _name(run: Run) -> str:
    iteration = run.meta.iteration
    return f"{run.variant}/{run.workload}/{'?' if iteration is None else iteration}"


def _windows_for(start: np.ndarray, latency: np.ndarray, window: tuple[int, int] | None,
                 around_slow: int | None) -> list[tuple[int, int]] | None:
    if window is not None:
        return [window]
    if around_slow:
        return win.around_slowest(start, latency, around_slow, SLOW_PAD_NS)
    return None


def write(runs: list[Run], out: TextIO, window: tuple[int, int] | None = None,
          around_slow: int | None = None, max_events: int = DEFAULT_MAX_EVENTS) -> ExportSummary:
    """Write the runs' trace (see the module docstring); returns what was written."""
    summary = ExportSummary()
    w = Writer(out)
    out.write('{"displayTimeUnit":"ns","traceEvents":[')
    budget = max(1, max_events // max(1, len(runs)))
    for pid, run in enumerate(runs, start=1):
        _write_run(w, pid, run, window, around_slow, budget, summary)
    out.write('\n],"otherData":')
    out.write(json.dumps({"stallbench_version": __version__,
                          "runs": [str(r.path) for r in runs],
                          "clock": "ns since each run's start (CLOCK_MONOTONIC)",
                          "notes": summary.notes}))
    out.write("}\n")
    return summary


@dataclass
class _Selection:
    """What one run's export keeps: masks over its ops and its trace rows."""

    ops: np.ndarray
    trace: np.ndarray
    windows: list[tuple[int, int]] | None
    note: str | None = None


def _select(name: str, start: np.ndarray, latency: np.ndarray, t_start: np.ndarray,
            t_duration: np.ndarray, t_always: np.ndarray, windows: list[tuple[int, int]] | None,
            around_slow: int | None, budget: int) -> _Selection:
    """Within the windows: the slowest ops asked for and every reclaim, throttle and D-state
    interval always; of the other slices (ops, syscalls, block requests) the longest that fit
    in the budget. Only when the kept ones alone exceed it is the trace cut at a time."""
    def inside(t, end):
        return np.ones(t.size, dtype=bool) if windows is None else win.mask(t, end, windows)

    ops = inside(start, start + latency)
    trace = inside(t_start, t_start + t_duration)
    slow = np.zeros(start.size, dtype=bool)
    if around_slow:
        slow[win.slowest(latency, around_slow)] = True
    must = int(slow.sum()) + int((trace & t_always).sum())
    thinnable_ops = ops & ~slow
    thinnable_trace = trace & ~t_always
    others = int(thinnable_ops.sum()) + int(thinnable_trace.sum())
    if must + others <= budget:
        return _Selection(ops, trace, windows)
    everything = f"--max-events {must + others} exports them all"
    slowest = f"the {around_slow} slowest ops with their windows, " if around_slow else ""
    if must <= budget:
        durations = np.concatenate([latency[thinnable_ops], t_duration[thinnable_trace]])
        keep = win.longest(durations, budget - must)
        n_ops = int(thinnable_ops.sum())
        ops = slow | _scatter(thinnable_ops, keep[:n_ops])
        trace = (trace & t_always) | _scatter(thinnable_trace, keep[n_ops:])
        kept = int(keep.sum())
        shortest = f" ({int(durations[keep].min()) / 1000:.1f} µs and longer)" if kept else ""
        return _Selection(ops, trace, windows, (
            f"{name}: thinned to {budget:,} slices (--max-events): kept {slowest}every "
            f"reclaim, throttle and D-state interval and the {kept:,} longest of {others:,} "
            f"other op, syscall and block slices{shortest}; left out {others - kept:,} shorter "
            f"ones; {everything}"))
    # the intervals always kept do not fit: the slowest ops asked for, and the rest up to the
    # time where the budget ends
    rest_ops = ops & ~slow
    firsts = np.concatenate([start[rest_ops], t_start[trace]])
    room = budget - int(slow.sum())
    cut = int(np.partition(firsts, room)[room]) if room < firsts.size else None
    if cut is not None:
        ops = slow | (rest_ops & (start < cut))
        trace &= t_start < cut
    kept = f"kept the {around_slow} slowest ops, but " if around_slow else ""
    at = f"{cut / 1e9:.3f} s" if cut is not None else "the end"
    return _Selection(ops, trace, windows, (
        f"{name}: {kept}{must - int(slow.sum()):,} reclaim, throttle and D-state intervals "
        f"exceed {budget:,} slices (--max-events): cut at {at}; {everything}, "
        "--window START-END shows another part"))


def _scatter(where: np.ndarray, values: np.ndarray) -> np.ndarray:
    """A mask as long as `where`, True at the positions of `where` that `values` keeps."""
    out = np.zeros(where.size, dtype=bool)
    out[np.flatnonzero(where)[values]] = True
    return out


def _write_run(w: Writer, pid: int, run: Run, window, around_slow, budget: int,
               summary: ExportSummary) -> None:
    name = _name(run)
    w.event(ph="M", pid=pid, name="process_name", args={"name": name})
    w.event(ph="M", pid=pid, name="process_sort_index", args={"sort_index": pid})
    # first only the op, start and latency columns (20 bytes an op): what to keep; then the
    # kept ops' other columns, row group by row group
    path = _ops_path(run)
    times = read_table(path, columns=["op", "start_ns", "latency_ns"])
    start = times["start_ns"].to_numpy()
    latency = times["latency_ns"].to_numpy()
    op_names, op_codes = _codes(times["op"])
    del times
    windows = _windows_for(start, latency, window, around_slow)
    trace = run.trace_table()
    if trace is not None:
        t_start = trace["t_ns"].to_numpy()
        t_duration = np.maximum(trace["duration_ns"].to_numpy(), 0)
        t_always = np.isin(trace["category"].to_numpy(zero_copy_only=False), ALWAYS_KEPT)
    else:
        t_start = t_duration = np.empty(0, dtype=np.int64)
        t_always = np.empty(0, dtype=bool)
    chosen = _select(name, start, latency, t_start, t_duration, t_always, windows, around_slow,
                     budget)
    if chosen.note:
        summary.notes.append(chosen.note)
    summary.windows = chosen.windows
    ops = _kept_ops(path, chosen.ops)

    workload_summary = run.meta.workload_summary
    roles = {int(k): str(v) for k, v in (workload_summary.get("worker_roles") or {}).items()}
    pids = {int(k): int(v) for k, v in (workload_summary.get("worker_pids") or {}).items()}
    write_ops(w, pid, ops, roles, pids, summary)
    if trace is not None and trace.num_rows:
        write_trace(w, pid, trace.filter(pa.array(chosen.trace)), pids, summary)
    _write_samples(w, pid, run, name, chosen.windows, budget, summary)
    end = start + latency
    lo, hi = (chosen.windows[0][0], chosen.windows[-1][1]) if chosen.windows else \
        (0, int(end.max()) if end.size else 0)
    # the op rates count every op in the windows, the ones thinned out too
    in_windows = np.ones(end.size, dtype=bool) if chosen.windows is None else \
        win.mask(start, end, chosen.windows)
    write_counters(w, pid, run, lo, hi, op_names, op_codes[in_windows], end[in_windows],
                    summary)


def _write_samples(w: Writer, pid: int, run: Run, name: str,
                   windows: list[tuple[int, int]] | None, budget: int,
                   summary: ExportSummary) -> None:
    """The run's on-CPU samples in the windows; beyond the budget, evenly spaced ones (a note
    says how many)."""
    samples = run.monitor_table(monitornames.PROFILE)
    if samples is None or samples.num_rows == 0:
        return
    t_ns = samples["t_ns"].to_numpy()
    keep = np.ones(t_ns.size, dtype=bool) if windows is None else win.mask(t_ns, t_ns, windows)
    chosen = np.flatnonzero(keep)
    if chosen.size > budget:
        chosen = chosen[np.linspace(0, chosen.size - 1, budget).astype(np.int64)]
        summary.notes.append(
            f"{name}: {budget:,} of {int(keep.sum()):,} on-CPU samples, evenly spaced "
            f"(--max-events); --max-events {int(keep.sum()):,} exports them all")
    samples = samples.take(pa.array(chosen))
    roles = sample_roles(run, samples["pid"].to_numpy(), samples["tid"].to_numpy())
    write_samples(w, pid, samples, roles, summary)


def _codes(column: pa.ChunkedArray) -> tuple[list[str], np.ndarray]:
    """A string column as (distinct names, a code per row)."""
    if not pa.types.is_dictionary(column.type):
        column = column.dictionary_encode()
    if column.num_chunks == 0:
        return [], np.empty(0, dtype=np.int64)
    array = pa.concat_arrays(column.unify_dictionaries().chunks)
    return (array.dictionary.to_pylist(),
            array.indices.to_numpy(zero_copy_only=False).astype(np.int64))


def _kept_ops(path, keep: np.ndarray) -> pa.Table:
    """The rows of ops.parquet where `keep` (over all rows, in file order) is True."""
    parts = []
    offset = 0
    try:
        parquet = pq.ParquetFile(path, pre_buffer=False)
        for batch in parquet.iter_batches(batch_size=OPS_ROW_GROUP):
            part = keep[offset:offset + batch.num_rows]
            offset += batch.num_rows
            if part.any():
                parts.append(pa.Table.from_batches([batch]).filter(pa.array(part)))
        if not parts:
            return parquet.schema_arrow.empty_table()
    except (pa.ArrowException, OSError) as exc:
        raise RunDataError(f"{path}: damaged ({exc})") from exc
    return pa.concat_tables(parts)
