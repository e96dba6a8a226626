"""What a variant's runs recorded about their own conditions, loaded for the where section:
the mechanism facts (run.json: memory limit and whether it was hit, I/O throttle, sysctls,
system memory, machine load; the counters) and each delay row's op time and ops so far
(ops.parquet).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

import numpy as np

from ...analysis import monitornames
from ...analysis.where.delays import op_time_before, ops_before, sleep_time_before
from ...analysis.where.mechanism import IO_LIMIT_NAMES
from ...analysis.where.section import Facts
from ...core.errors import RunDataError
from ...results.store import Run

DATA_SIZE_PARAMS = ("file_size", "data_size")
OTHER_PROCESSES = "other processes"   # the workload's processes that are no worker's


def variant_facts(runs: list[Run], counter_deltas: list[dict[str, int]]) -> Facts:
    facts = Facts()
    if not runs:
        return facts
    meta = runs[0].meta
    env = meta.environment or {}
    facts.memory_limit = (env.get("memory") or {}).get("limit")
    memories = [(r.meta.environment or {}).get("memory") or {} for r in runs]
    peaks = [m["peak"] for m in memories if m.get("peak")]
    facts.memory_peak = max(peaks) if peaks else None
    hits = [int(value) for m in memories
            if (value := m.get("failcnt", (m.get("events") or {}).get("max"))) is not None]
    facts.memory_hits = sum(hits) if hits else None
    sizes = [v for k, v in (meta.params or {}).items()
             if k in DATA_SIZE_PARAMS and isinstance(v, int)]
    facts.data_bytes = max(sizes) if sizes else None
    facts.io_limits = io_limits((env.get("io") or {}).get("files") or {})
    facts.sysctls = {k: str(v.get("new")) for k, v in (env.get("sysctls") or {}).items()
                     if isinstance(v, Mapping)}
    facts.system_memory = (env.get("system_memory") or {}).get("requested")
    loads = [r.meta.machine_load for r in runs if r.meta.machine_load]
    if loads:
        facts.cpus = float(loads[0].get("cpus") or 0)
        # processes outside the run: not the kernel's threads, which often did its writeback
        facts.others_cpus = float(np.mean([float(x.get("others_cpus") or 0)
                                           - float(x.get("kernel_cpus") or 0) for x in loads]))
        facts.own_cpus = float(np.mean([float(x.get("own_cpus") or 0) for x in loads]))
    facts.monitors = sorted({name for r in runs for name, info in (r.meta.monitors or {}).items()
                             if info.get("status") == "ok"})
    if counter_deltas:
        names = {n for d in counter_deltas for n in d}
        facts.counters = {n: float(np.mean([d.get(n, 0) for d in counter_deltas]))
                          for n in sorted(names)}
    return facts


def io_limits(files: Mapping[str, Any]) -> dict[str, str]:
    """{"riops": "1000", ...} from the I/O cgroup files a run wrote (v1 throttle or v2 io.max)."""
    out: dict[str, str] = {}
    for name, info in files.items():
        written = str((info or {}).get("written") or "")
        if name == "io.max":
            for part in written.split()[1:]:
                key, _, value = part.partition("=")
                if value and value != "max":
                    out[key] = value
        elif name.startswith("blkio.throttle."):
            kind = name.removeprefix("blkio.throttle.").removesuffix("_device")
            if kind in IO_LIMIT_NAMES and len(written.split()) > 1:
                out[IO_LIMIT_NAMES[kind]] = written.split()[-1]
    return out


class OpsSoFar(NamedTuple):
    """Per delay row, its task's ops before the row's time (NaN on rows of tasks that record no
    ops: threads other than a worker's)."""
    busy: np.ndarray                # op time so far
    asleep: np.ndarray | None       # pacing sleep so far (None: no op of the run has a plan)
    done: np.ndarray                # ops completed so far


def busy_at_rows(run: Run, columns: Mapping[str, np.ndarray], worker_of_pid: Mapping[int, int]
                 ) -> OpsSoFar:
    """Each delay row's op time so far of its task (a worker's main thread, which does the
    ops), its pacing sleep so far and its ops completed so far, streamed from ops.parquet
    (analysis/where/delays.py, oncpu.py)."""
    tid, pid = np.asarray(columns["tid"]), np.asarray(columns["pid"])
    t_ns = np.asarray(columns["t_ns"], dtype=np.int64)
    busy = np.full(tid.size, np.nan)
    done = np.full(tid.size, np.nan)
    rows_of = {w: np.flatnonzero((tid == p) & (pid == p)) for p, w in worker_of_pid.items()}
    rows_of = {w: rows for w, rows in rows_of.items() if rows.size}
    if not rows_of:
        return OpsSoFar(busy, None, done)
    sums = {w: np.zeros(rows.size) for w, rows in rows_of.items()}
    sleeps = {w: np.zeros(rows.size) for w, rows in rows_of.items()}
    counts = {w: np.zeros(rows.size) for w, rows in rows_of.items()}
    last_end: dict[int, int] = {}
    paced = False
    try:
        for table in run.iter_ops(["worker", "start_ns", "latency_ns", "intended_ns"]):
            worker = table.column("worker").to_numpy()
            start = table.column("start_ns").to_numpy()
            latency = table.column("latency_ns").to_numpy()
            intended = table.column("intended_ns").to_numpy() \
                if "intended_ns" in table.column_names else None
            for w, rows in rows_of.items():
                mine = worker == w
                if not mine.any():
                    continue
                sums[w] += op_time_before(start[mine], latency[mine], t_ns[rows])
                counts[w] += ops_before(start[mine] + latency[mine], t_ns[rows])
                if intended is not None and (intended[mine] >= 0).any():
                    paced = True
                    sleeps[w] += sleep_time_before(start[mine], latency[mine],
                                                         intended[mine], t_ns[rows],
                                                         last_end.get(w))
                last_end[w] = int((start[mine] + latency[mine]).max())
    except RunDataError:
        return OpsSoFar(busy, None, done)
    asleep = np.full(tid.size, np.nan) if paced else None
    for w, rows in rows_of.items():
        busy[rows] = sums[w]
        done[rows] = counts[w]
        if asleep is not None:
            asleep[rows] = sleeps[w]
    return OpsSoFar(busy, asleep, done)


def longest_op(run: Run) -> int | None:
    """The run's longest op or longest time without a completion of one, whichever is longer
    (what bounds any single wait of a worker's main thread); None without a summary."""
    try:
        ops = run.summary().ops
    except RunDataError:
        return None
    longest = [int(max(op.block_max.max(initial=-1), op.gap_ns)) for op in ops.values()]
    return max(longest) if longest else None


def worker_pids(run: Run, monitor: str) -> dict[int, int]:
    """worker index -> pid: the workload's own record if it has one, else the order in which
    the workers registered (they are forked in index order, so pids ascend with the index)."""
    summary = run.meta.workload_summary or {}
    recorded = summary.get("worker_pids")
    if isinstance(recorded, Mapping) and recorded:
        return {int(k): int(v) for k, v in recorded.items()}
    for name in (monitor, monitornames.DELAY, *monitornames.STACK_MONITORS):
        pids = ((run.meta.monitors or {}).get(name) or {}).get("workload_pids")
        if pids:
            return dict(enumerate(sorted(int(p) for p in pids)))
    return {}


def worker_roles(run: Run) -> dict[int, str]:
    roles = (run.meta.workload_summary or {}).get("worker_roles") or {}
    return {int(k): str(v) for k, v in roles.items()}


def task_roles(run: Run, monitor: str, pids: Iterable[int], tids: Iterable[int]) -> list[str]:
    """The worker role of each (pid, tid) of a monitor's table: by the worker's process, or,
    where the workload records each thread's id as its worker (the command workload, which
    names no worker pids), by the thread; OTHER_PROCESSES for the rest."""
    pids, tids = np.asarray(pids).tolist(), np.asarray(tids).tolist()
    roles = worker_roles(run)
    by_pid = {pid: roles.get(w, f"worker {w}") for w, pid in worker_pids(run, monitor).items()}
    by_tid: dict[int, str] = {}
    if not (run.meta.workload_summary or {}).get("worker_pids"):
        try:
            workers = {int(w) for op in run.summary().ops.values() for w in op.workers.tolist()}
        except RunDataError:
            workers = set()
        if workers & set(tids):
            by_tid = {w: roles.get(w, f"worker {w}") for w in workers}
    return [by_tid.get(tid) or by_pid.get(pid) or OTHER_PROCESSES
            for pid, tid in zip(pids, tids, strict=True)]
