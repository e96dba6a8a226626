"""Trace Event JSON for the Perfetto UI and chrome://tracing: one process per run; in it one
track per worker with each op as a slice, the trace monitor's intervals per thread and category
(reclaim, throttle, D state with its stack, syscalls) on the same clock, block requests as async
slices, and counter tracks for PSI, kernel counters (per-second rates of cumulative ones),
diskstats rates and each op's completions per second.

Times are ns since the run start (CLOCK_MONOTONIC, like every table of the run), written as µs
with three decimals. The output is bounded: only the chosen windows are exported, and at most
`max_events` slices per export; past that the trace is cut at a time and the caller is told.
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
from ..errors import RunDataError
from ..monitors.counters import is_cumulative
from ..store import MONITOR_DIR, OPS_FILE, Run

DEFAULT_MAX_EVENTS = 500_000
SLOW_PAD_NS = 100_000_000
RATE_BIN_NS = 100_000_000
TRACE_TABLES = ("trace_full", "trace")
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


def _ops_table(run: Run, windows: list[tuple[int, int]] | None) -> pa.Table:
    """The ops overlapping the windows (all without), filtered while reading row groups."""
    path = _ops_path(run)
    if windows is None:
        return _read(path)
    start, end = pc.field("start_ns"), pc.field("start_ns") + pc.field("latency_ns")
    expression = None
    for lo, hi in windows:
        part = (end >= lo) & (start <= hi)
        expression = part if expression is None else expression | part
    try:
        return pq.read_table(path, filters=expression)
    except (pa.ArrowException, OSError) as exc:
        raise RunDataError(f"{path}: damaged ({exc})") from exc


def _trace_table(run: Run) -> pa.Table | None:
    for name in TRACE_TABLES:
        table = _read(run.path / MONITOR_DIR / f"{name}.parquet")
        if table is not None:
            return table
    return None


def _windows_for(times: pa.Table, window: tuple[int, int] | None,
                 around_slow: int | None) -> list[tuple[int, int]] | None:
    if window is not None:
        return [window]
    if around_slow:
        return win.around_slowest(times["start_ns"].to_numpy(), times["latency_ns"].to_numpy(),
                                  around_slow, SLOW_PAD_NS)
    return None


def write(runs: list[Run], out: TextIO, window: tuple[int, int] | None = None,
          around_slow: int | None = None, max_events: int = DEFAULT_MAX_EVENTS) -> ExportSummary:
    """Write the runs' trace (see the module docstring); returns what was written."""
    summary = ExportSummary()
    w = _Writer(out)
    out.write('{"displayTimeUnit":"ns","otherData":')
    out.write(json.dumps({"stallbench_version": __version__,
                          "runs": [str(r.path) for r in runs],
                          "clock": "ns since each run's start (CLOCK_MONOTONIC)"}))
    out.write(',"traceEvents":[')
    budget = max(1, max_events // max(1, len(runs)))
    for pid, run in enumerate(runs, start=1):
        _write_run(w, pid, run, window, around_slow, budget, summary)
    out.write("\n]}\n")
    return summary


def _write_run(w: _Writer, pid: int, run: Run, window, around_slow, budget: int,
               summary: ExportSummary) -> None:
    iteration = run.meta.iteration
    name = f"{run.variant}/{run.workload}/{'?' if iteration is None else iteration}"
    w.event(ph="M", pid=pid, name="process_name", args={"name": name})
    w.event(ph="M", pid=pid, name="process_sort_index", args={"sort_index": pid})
    # first only the times (16 bytes an op): the windows and the cut; then the ops they keep
    times = _read(_ops_path(run), columns=["start_ns", "latency_ns"])
    windows = _windows_for(times, window, around_slow)
    trace = _trace_table(run)

    start = times["start_ns"].to_numpy()
    latency = times["latency_ns"].to_numpy()
    keep = np.ones(start.size, dtype=bool) if windows is None else \
        win.mask(start, start + latency, windows)
    t_keep = None
    if trace is not None and trace.num_rows:
        t_start = trace["t_ns"].to_numpy()
        t_end = t_start + np.maximum(trace["duration_ns"].to_numpy(), 0)
        t_keep = np.ones(t_start.size, dtype=bool) if windows is None else \
            win.mask(t_start, t_end, windows)
    # the budget: cut at the time where the kept slices reach it
    firsts = [start[keep]] + ([t_start[t_keep]] if t_keep is not None else [])
    all_starts = np.concatenate(firsts)
    if all_starts.size > budget:
        cut = int(np.partition(all_starts, budget)[budget])
        keep &= start < cut
        if t_keep is not None:
            t_keep &= t_start < cut
        summary.notes.append(
            f"{name}: cut at {cut / 1e9:.3f} s after {budget:,} of {all_starts.size:,} slices "
            "(--max-events); use --window START-END or --around-slow N for another part")
        windows = win.merge([(lo, min(hi, cut - 1)) for lo, hi in (windows or [(0, cut)])
                             if lo < cut])
    summary.windows = windows
    del times, start, latency
    ops = _ops_table(run, windows)
    start = ops["start_ns"].to_numpy()
    latency = ops["latency_ns"].to_numpy()
    keep = np.ones(start.size, dtype=bool) if windows is None else \
        win.mask(start, start + latency, windows)

    workload_summary = run.meta.workload_summary
    roles = {int(k): str(v) for k, v in (workload_summary.get("worker_roles") or {}).items()}
    pids = {int(k): int(v) for k, v in (workload_summary.get("worker_pids") or {}).items()}
    _write_ops(w, pid, ops.filter(pa.array(keep)), roles, pids, summary)
    if t_keep is not None:
        _write_trace(w, pid, trace.filter(pa.array(t_keep)), pids, summary)
    lo = 0 if not windows else windows[0][0]
    hi = int((start + latency).max()) if start.size else 0
    if windows:
        hi = windows[-1][1]
    _write_counters(w, pid, run, lo, hi, ops.filter(pa.array(keep)), summary)


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


def _write_counters(w: _Writer, pid: int, run: Run, lo: int, hi: int, ops: pa.Table,
                    summary: ExportSummary) -> None:
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
    if ops.num_rows:
        op_col = ops["op"].cast(pa.string()) if pa.types.is_dictionary(ops["op"].type) \
            else ops["op"]
        end = (ops["start_ns"].to_numpy() + ops["latency_ns"].to_numpy())
        names = np.array(op_col.to_pylist(), dtype=object)
        for name in sorted(set(names.tolist())):
            ts, rate = series.ops_per_s(end[names == name], lo, hi, RATE_BIN_NS)
            _counter(w, pid, f"{name} ops/s", ts, rate, summary, lo, hi)
