"""The Trace Event records of a perfetto export (perfetto.py chooses what is kept): the
streaming writer, and one writer per kind of track: a worker's op slices, the trace monitor's
intervals per thread and category (block requests as async slices), the profile monitor's
on-CPU samples per thread (instant events named by the function running), and the counter
tracks (PSI, kernel counters, diskstats rates, each op's completions per second)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TextIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..analysis import ratetracks
from ..core.errors import RunDataError
from ..monitors.counters import is_cumulative
from ..results.rundirs import MONITOR_DIR
from ..results.store import Run

RATE_BIN_NS = 100_000_000
CATEGORY_ORDER = {"reclaim": 1, "throttle": 2, "dstate": 3, "syscall": 4}
DISK_RATES = ("reads", "writes", "read_sectors", "write_sectors", "io_ms")


@dataclass
class ExportSummary:
    ops: dict[str, int] = field(default_factory=dict)      # op slices written per op
    intervals: dict[str, int] = field(default_factory=dict)  # trace slices per category
    counters: int = 0
    samples: int = 0                                         # on-CPU samples (profile)
    windows: list[tuple[int, int]] | None = None
    notes: list[str] = field(default_factory=list)


def _us(ns) -> str:
    return f"{ns / 1000:.3f}"


class Writer:
    def __init__(self, out: TextIO):
        self.out = out
        self.first = True

    def raw(self, text: str) -> None:
        self.out.write(("\n" if self.first else ",\n") + text)
        self.first = False

    def event(self, **fields) -> None:
        self.raw(json.dumps(fields, separators=(",", ":")))


def read_table(path, columns=None) -> pa.Table | None:
    if not path.exists():
        return None
    try:
        return pq.read_table(path, columns=columns)
    except (pa.ArrowException, OSError) as exc:
        raise RunDataError(f"{path}: damaged ({exc})") from exc


def write_ops(w: Writer, pid: int, ops: pa.Table, roles: dict[int, str],
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


def write_trace(w: Writer, pid: int, trace: pa.Table, worker_pids: dict[int, int],
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


def write_samples(w: Writer, pid: int, samples: pa.Table, roles: list[str],
                  summary: ExportSummary) -> None:
    """The profile monitor's on-CPU samples: an instant event per sample on a track per
    thread, named by the function running (the innermost frame), its stack in args."""
    rows = samples.to_pydict()
    tracks: dict[int, int] = {}
    for k in range(samples.num_rows):
        tid = rows["tid"][k]
        track = tracks.get(tid)
        if track is None:
            track = tracks[tid] = 2_000_000 + len(tracks)
            label = f"{rows['comm'][k]} {tid}: on a CPU ({roles[k]}, perf samples)"
            w.event(ph="M", pid=pid, tid=track, name="thread_name", args={"name": label})
            w.event(ph="M", pid=pid, tid=track, name="thread_sort_index",
                    args={"sort_index": 200_000 + tid})
        stack = rows["stack"][k] or ""
        w.raw(f'{{"ph":"i","s":"t","pid":{pid},"tid":{track},"cat":"oncpu",'
              f'"name":{json.dumps(stack.rsplit(";", 1)[-1])},"ts":{_us(rows["t_ns"][k])},'
              f'"args":{{"stack":{json.dumps(stack)}}}}}')
        summary.samples += 1


def _counter(w: Writer, pid: int, name: str, t_ns, values, summary: ExportSummary,
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


def write_counters(w: Writer, pid: int, run: Run, lo: int, hi: int, op_names: list[str],
                    codes: np.ndarray, end: np.ndarray, summary: ExportSummary) -> None:
    psi = read_table(run.path / MONITOR_DIR / "psi.parquet")
    if psi is not None and psi.num_rows:
        d = psi.to_pydict()
        series_of: dict[str, tuple[list, list]] = {}
        for t, scope, resource, kind, total in zip(d["t_ns"], d["scope"], d["resource"],
                                                   d["kind"], d["total_ns"], strict=True):
            entry = series_of.setdefault(f"PSI {scope} {resource} {kind} (% stalled)", ([], []))
            entry[0].append(t)
            entry[1].append(total)
        for name, (t, total) in sorted(series_of.items()):
            ts, rate = ratetracks.rate_per_s(np.array(t), np.array(total))
            if ratetracks.changed(rate) or rate.any():
                _counter(w, pid, name, ts, rate / 1e7, summary, lo, hi)  # ns/s -> %
    counters = read_table(run.path / MONITOR_DIR / "counters.parquet")
    if counters is not None and counters.num_rows > 1:
        t = counters["t_ns"].to_numpy()
        for column in counters.column_names:
            if column == "t_ns":
                continue
            values = counters[column].to_numpy(zero_copy_only=False).astype(np.float64)
            if np.isnan(values).any() or not ratetracks.changed(values):
                continue
            if is_cumulative(column):
                ts, rate = ratetracks.rate_per_s(t, values)
                _counter(w, pid, f"{column} /s", ts, rate, summary, lo, hi)
            else:
                _counter(w, pid, column, t, values, summary, lo, hi)
    disk = read_table(run.path / MONITOR_DIR / "diskstats.parquet")
    if disk is not None and disk.num_rows > 1:
        for device in sorted(set(disk["device"].to_pylist())):
            part = disk.filter(pc.equal(disk["device"], device))
            t = part["t_ns"].to_numpy()
            for column in DISK_RATES:
                if column in part.column_names:
                    ts, rate = ratetracks.rate_per_s(t, part[column].to_numpy())
                    if ratetracks.changed(rate):
                        _counter(w, pid, f"{device} {column} /s", ts, rate, summary, lo, hi)
    for code, name in enumerate(op_names):
        if not (codes == code).any():
            continue
        ts, rate = ratetracks.ops_per_s(end[codes == code], lo, hi, RATE_BIN_NS)
        _counter(w, pid, f"{name} ops/s", ts, rate, summary, lo, hi)
