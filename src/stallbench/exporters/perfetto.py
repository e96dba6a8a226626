"""Trace Event JSON for the Perfetto UI and chrome://tracing: one process per run; in it one
track per worker with each op as a slice, the trace monitor's intervals per thread and category
(reclaim, throttle, D state with its stack, syscalls) on the same clock, block requests as async
slices, and counter tracks for PSI, kernel counters (per-second rates of cumulative ones),
diskstats rates and each op's completions per second.

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
from dataclasses import dataclass, field
from typing import TextIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .. import __version__
from ..analysis import series
from ..analysis import windows as win
from ..errors import RunDataError, UsageError
from ..monitors.counters import is_cumulative
from ..opsfile import OPS_ROW_GROUP
from ..rundirs import MONITOR_DIR, OPS_FILE
from ..runmeta import run_end_s
from ..store import Run

DEFAULT_MAX_EVENTS = 500_000
SLOW_PAD_NS = 100_000_000
RATE_BIN_NS = 100_000_000
ALWAYS_KEPT = ("reclaim", "throttle", "dstate")   # trace categories never thinned
CATEGORY_ORDER = {"reclaim": 1, "throttle": 2, "dstate": 3, "syscall": 4}
DISK_RATES = ("reads", "writes", "read_sectors", "write_sectors", "io_ms")


@dataclass
class ExportSummary:
    ops: dict[str, int] = field(default_factory=dict)      # op slices written per op
    intervals: dict[str, int] = field(default_factory=dict)  # trace slices per category
    counters: int = 0
    windows: list[tuple[int, int]] | None = None
    notes: list[str] = field(default_factory=list)


def _us(ns) -> str:
    return f"{ns / 1000:.3f}"


class _Writer:
    def __init__(self, out: TextIO):
        self.out = out
        self.first = True

    def raw(self, text: str) -> None:
        self.out.write(("\n" if self.first else ",\n") + text)
        self.first = False

    def event(self, **fields) -> None:
        self.raw(json.dumps(fields, separators=(",", ":")))


def _read(path, columns=None) -> pa.Table | None:
    if not path.exists():
        return None
    try:
        return pq.read_table(path, columns=columns)
    except (pa.ArrowException, OSError) as exc:
        raise RunDataError(f"{path}: damaged ({exc})") from exc


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
    w = _Writer(out)
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


def _write_run(w: _Writer, pid: int, run: Run, window, around_slow, budget: int,
               summary: ExportSummary) -> None:
    name = _name(run)
    w.event(ph="M", pid=pid, name="process_name", args={"name": name})
    w.event(ph="M", pid=pid, name="process_sort_index", args={"sort_index": pid})
    # first only the op, start and latency columns (20 bytes an op): what to keep; then the
    # kept ops' other columns, row group by row group
    path = _ops_path(run)
    times = _read(path, columns=["op", "start_ns", "latency_ns"])
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
    _write_ops(w, pid, ops, roles, pids, summary)
    if trace is not None and trace.num_rows:
        _write_trace(w, pid, trace.filter(pa.array(chosen.trace)), pids, summary)
    end = start + latency
    lo, hi = (chosen.windows[0][0], chosen.windows[-1][1]) if chosen.windows else \
        (0, int(end.max()) if end.size else 0)
    # the op rates count every op in the windows, the ones thinned out too
    in_windows = np.ones(end.size, dtype=bool) if chosen.windows is None else \
        win.mask(start, end, chosen.windows)
    _write_counters(w, pid, run, lo, hi, op_names, op_codes[in_windows], end[in_windows],
                    summary)


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


def _write_ops(w: _Writer, pid: int, ops: pa.Table, roles: dict[int, str],
               pids: dict[int, int], summary: ExportSummary) -> None:
    op_col = ops["op"]
    if op_col.num_chunks:
        op_col = pa.concat_arrays(op_col.unify_dictionaries().chunks) \
            if pa.types.is_dictionary(op_col.type) else op_col.combine_chunks()
    codes = op_col.indices.to_numpy(zero_copy_only=False) if ops.num_rows else np.empty(0, int)
    names = [json.dumps(n) for n in op_col.dictionary.to_pylist()] if ops.num_rows else []
    worker = ops["worker"].to_numpy()
    start = ops["start_ns"].to_numpy()
    latency = ops["latency_ns"].to_numpy()
    intended_col = ops["intended_ns"]
    intended = intended_col.fill_null(-1).to_numpy() if intended_col.null_count < len(
        intended_col) else None
    for worker_id in sorted(set(worker.tolist()) | set(pids)):
        role = roles.get(worker_id, "worker")
        os_pid = pids.get(worker_id)
        label = f"worker {worker_id} ({role})" + (f" pid {os_pid}" if os_pid else "") + ": ops"
        w.event(ph="M", pid=pid, tid=_ops_tid(worker_id), name="thread_name",
                args={"name": label})
        w.event(ph="M", pid=pid, tid=_ops_tid(worker_id), name="thread_sort_index",
                args={"sort_index": worker_id * 10})
    order = np.argsort(start, kind="stable")
    counts = np.bincount(codes, minlength=len(names)) if codes.size else []
    for i in order.tolist():
        args = f'"latency_ns":{latency[i]}'
        if intended is not None and intended[i] >= 0:
            response = start[i] + latency[i] - intended[i]
            args += f',"intended_start_ns":{intended[i]},"response_ns":{response}'
        w.raw(f'{{"ph":"X","pid":{pid},"tid":{_ops_tid(int(worker[i]))},"cat":"op",'
              f'"name":{names[codes[i]]},"ts":{_us(start[i])},"dur":{_us(latency[i])},'
              f'"args":{{{args}}}}}')
    for code, n in enumerate(counts):
        if n:
            name = json.loads(names[code])
            summary.ops[name] = summary.ops.get(name, 0) + int(n)


def _ops_tid(worker: int) -> int:
    return 1 + worker


def _write_trace(w: _Writer, pid: int, trace: pa.Table, worker_pids: dict[int, int],
                 summary: ExportSummary) -> None:
    rows = trace.sort_by("t_ns").to_pydict()
    worker_of = {p: k for k, p in worker_pids.items()}
    tracks: dict[tuple[int, str], int] = {}
    ends: dict[int, int] = {}
    block_id = 0
    for k in range(trace.num_rows):
        category = rows["category"][k]
        t, duration = rows["t_ns"][k], max(0, rows["duration_ns"][k])
        kind, detail = rows["kind"][k], rows["detail"][k]
        tid_real = rows["tid"][k]
        summary.intervals[category] = summary.intervals.get(category, 0) + 1
        if category == "block":
            block_id += 1
            args = {"device": rows["device"][k], "detail": detail, "issuer": tid_real,
                    "duration_ns": duration}
            w.event(ph="b", pid=pid, cat="block", name=kind, id=block_id, ts=round(t / 1000, 3),
                    args=args)
            w.event(ph="e", pid=pid, cat="block", name=kind, id=block_id,
                    ts=round((t + duration) / 1000, 3))
            continue
        key = (tid_real, category)
        track = tracks.get(key)
        if track is None:
            track = tracks[key] = 1_000_000 + len(tracks)
            owner = worker_of.get(rows["pid"][k], worker_of.get(tid_real))
            label = f"{rows['comm'][k]} {tid_real}: {category}" + \
                (f" (worker {owner})" if owner is not None else "")
            order = (owner * 10 if owner is not None else 100_000 + tid_real * 10) + \
                CATEGORY_ORDER.get(category, 9)
            w.event(ph="M", pid=pid, tid=track, name="thread_name", args={"name": label})
            w.event(ph="M", pid=pid, tid=track, name="thread_sort_index",
                    args={"sort_index": order})
        args = {"duration_ns": duration, "tid": tid_real}
        # mm_vmscan_throttled reports its delay in jiffies, so intervals rebuilt from it may
        # overlap the one before partly; viewers drop such slices: start it where that ended
        last = ends.get(track, 0)
        if t < last < t + duration:
            args["start_clipped_from_ns"] = t
            t, duration = last, t + duration - last
        ends[track] = max(last, t + duration)
        name = kind
        if category == "dstate":
            stack = rows["stack"][k] or ""
            name = "D: " + (stack.rsplit(";", 1)[-1] if stack else "?")
            args["stack"] = stack
        elif detail:
            args["detail"] = detail
        w.raw(f'{{"ph":"X","pid":{pid},"tid":{track},"cat":{json.dumps(category)},'
              f'"name":{json.dumps(name)},"ts":{_us(t)},"dur":{_us(duration)},'
              f'"args":{json.dumps(args, separators=(",", ":"))}}}')


def _counter(w: _Writer, pid: int, name: str, t_ns, values, summary: ExportSummary,
             lo: int, hi: int) -> None:
    t = np.asarray(t_ns)
    inside = (t >= lo) & (t <= hi)
    if not inside.any():
        return
    # one sample before the window so the track has a value from its start
    first = int(np.argmax(inside))
    if first > 0:
        inside[first - 1] = True
    label = json.dumps(name)
    for ts, value in zip(t[inside].tolist(), np.asarray(values)[inside].tolist(),
                         strict=True):
        w.raw(f'{{"ph":"C","pid":{pid},"name":{label},"ts":{_us(ts)},'
              f'"args":{{"value":{value:.6g}}}}}')
        summary.counters += 1


def _write_counters(w: _Writer, pid: int, run: Run, lo: int, hi: int, op_names: list[str],
                    codes: np.ndarray, end: np.ndarray, summary: ExportSummary) -> None:
    psi = _read(run.path / MONITOR_DIR / "psi.parquet")
    if psi is not None and psi.num_rows:
        d = psi.to_pydict()
        series_of: dict[str, tuple[list, list]] = {}
        for t, scope, resource, kind, total in zip(d["t_ns"], d["scope"], d["resource"],
                                                   d["kind"], d["total_ns"], strict=True):
            entry = series_of.setdefault(f"PSI {scope} {resource} {kind} (% stalled)", ([], []))
            entry[0].append(t)
            entry[1].append(total)
        for name, (t, total) in sorted(series_of.items()):
            ts, rate = series.rate_per_s(np.array(t), np.array(total))
            if series.changed(rate) or rate.any():
                _counter(w, pid, name, ts, rate / 1e7, summary, lo, hi)  # ns/s -> %
    counters = _read(run.path / MONITOR_DIR / "counters.parquet")
    if counters is not None and counters.num_rows > 1:
        t = counters["t_ns"].to_numpy()
        for column in counters.column_names:
            if column == "t_ns":
                continue
            values = counters[column].to_numpy(zero_copy_only=False).astype(np.float64)
            if np.isnan(values).any() or not series.changed(values):
                continue
            if is_cumulative(column):
                ts, rate = series.rate_per_s(t, values)
                _counter(w, pid, f"{column} /s", ts, rate, summary, lo, hi)
            else:
                _counter(w, pid, column, t, values, summary, lo, hi)
    disk = _read(run.path / MONITOR_DIR / "diskstats.parquet")
    if disk is not None and disk.num_rows > 1:
        for device in sorted(set(disk["device"].to_pylist())):
            part = disk.filter(pc.equal(disk["device"], device))
            t = part["t_ns"].to_numpy()
            for column in DISK_RATES:
                if column in part.column_names:
                    ts, rate = series.rate_per_s(t, part[column].to_numpy())
                    if series.changed(rate):
                        _counter(w, pid, f"{device} {column} /s", ts, rate, summary, lo, hi)
    for code, name in enumerate(op_names):
        if not (codes == code).any():
            continue
        ts, rate = series.ops_per_s(end[codes == code], lo, hi, RATE_BIN_NS)
        _counter(w, pid, f"{name} ops/s", ts, rate, summary, lo, hi)
