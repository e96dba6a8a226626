"""Worker processes for the workloads written in Python (pgioperf, randread).

`run_workers` forks one process per `WorkerSpec`, each with its own `WorkerRecorder`; the parent
shows progress from the shared `ProgressBoard`, forwards a stop request (Ctrl-C, SIGTERM) to the
workers, waits, and returns what they recorded as a `WorkloadResult`.

Inside a worker, the loop checks one thing per operation besides its buffer: whether the clock
passed `next_tick`. The slow path (`Tick.due`) flushes, publishes progress and reports whether the
run is over (deadline reached or stop requested by signal).
"""

from __future__ import annotations

import ctypes
import multiprocessing
import multiprocessing.connection
import os
import resource
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The targets (randread's and pgioperf's loops) draw their offsets from numpy.random: imported
# here, in the parent before the fork, not by each worker after the start gate, inside the
# run's time (0.56 s a worker under QEMU TCG, -X importtime).
import numpy.random  # noqa: F401

from ..core.context import RunContext
from ..results.oprecorder import (
    ProgressBoard,
    SpoolChannel,
    WorkerRecorder,
    WorkerSummary,
    read_spools,
    write_spool_meta,
)
from ..results.runmeta import Status
from .base import ProgressFn, WorkloadResult

TICK_NS = 100_000_000          # worker flush/progress period
PROGRESS_PERIOD_S = 0.5        # parent's display period
END_POLL_S = 0.005             # parent's look at the workers once the deadline has passed
STOP_GRACE_S = 30.0            # how long a worker may take to notice the end (a stuck syscall)
READY_TIMEOUT_S = 60.0         # how long the workers may take to be ready before they are let go
PR_SET_PDEATHSIG = 1

_stop_requested = False


def _request_stop(signum: int, frame: Any) -> None:
    global _stop_requested
    _stop_requested = True


@dataclass
class WorkerSpec:
    """One worker: what it runs and which ops it records."""

    role: str                                   # e.g. "reader", "wal", "checkpointer"
    ops: list[str]
    layout: str                                 # record layout, see results/oprecorder.py
    target: Callable[..., dict[str, Any]]       # target(worker_ctx) -> {"late": n, ...}
    args: dict[str, Any]


@dataclass
class WorkerContext:
    """Handed to a worker's target function inside the worker process."""

    index: int
    spec: WorkerSpec
    recorder: WorkerRecorder
    deadline_ns: int
    t0_ns: int

    def tick(self, filled: int, now_ns: int) -> tuple[bool, int]:
        """Slow path: flush `filled` values, publish progress; returns (finished, next_tick)."""
        self.recorder.flush(filled)
        self.recorder.publish(now_ns)
        finished = now_ns >= self.deadline_ns or _stop_requested
        return finished, min(now_ns + TICK_NS, self.deadline_ns)


def run_workers(ctx: RunContext, specs: list[WorkerSpec], progress: ProgressFn,
                all_ops: list[str]) -> WorkloadResult:
    spool_dir = Path(ctx.run_dir) / ".spool"
    spool_dir.mkdir(exist_ok=True)
    board = ProgressBoard(len(specs), all_ops)
    mp = multiprocessing.get_context("fork")
    start_gate = mp.Event()
    deadline = mp.RawValue("q", 0)      # set when the workers are released
    ops_done = mp.RawArray("b", len(specs))     # a worker's last op has ended
    ready = mp.RawArray("b", len(specs))        # a worker is set up and waits at the gate
    processes = []
    # made here, outside the workload's cgroups: see results/oprecorder.py SpoolChannel
    channels = [SpoolChannel(spool_dir, index, spec.layout) for index, spec in enumerate(specs)]
    for index, spec in enumerate(specs):
        write_spool_meta(spool_dir, index, spec.ops, spec.layout)
        process = mp.Process(
            target=_worker_main,
            args=(index, spec, spool_dir, board, all_ops, ctx, deadline, start_gate,
                  ops_done, ready, channels[index]),
            name=f"stallbench-{spec.role}-{index}",
            daemon=True,
        )
        process.start()
        ctx.processes.add(process.pid)
        processes.append(process)
    for channel in channels:
        channel.start()
    _wait_until_ready(ctx, processes, ready)
    ctx.workload_starting()
    t_begin = time.monotonic_ns()
    deadline_ns = t_begin + int(ctx.duration_s * 1e9)
    deadline.value = deadline_ns
    start_gate.set()
    stop_sent = False
    shown_ns = 0
    try:
        while any(p.is_alive() for p in processes):
            if ctx.stop.is_set() and not stop_sent:
                for p in processes:
                    _signal(p.pid, signal.SIGTERM)
                stop_sent = True
            now = time.monotonic_ns()
            if not stop_sent and now < deadline_ns and any(not p.is_alive() for p in processes):
                # a worker that ends before the deadline failed (ENOSPC, EIO, killed): stop the
                # others now rather than run on with part of the workload missing
                for p in processes:
                    _signal(p.pid, signal.SIGTERM)
                stop_sent = True
            if now > deadline_ns + STOP_GRACE_S * 1e9:
                for p in processes:
                    _signal(p.pid, signal.SIGKILL)
                ctx.notes.append(f"workers still busy {STOP_GRACE_S:.0f} s after the end: killed")
            if all(ops_done):
                ctx.workload_ended()    # the last op is done: the monitors' last samples now,
                                        # not after the workers' teardown (~0.1 s under load)
            if now - shown_ns >= PROGRESS_PERIOD_S * 1e9:
                progress(board.take()[0])
                shown_ns = now
            # past the deadline, look often: the workers' ops end within microseconds of it
            wait_s = PROGRESS_PERIOD_S if now < deadline_ns else END_POLL_S
            multiprocessing.connection.wait([p.sentinel for p in processes if p.is_alive()],
                                            timeout=min(wait_s, max(END_POLL_S,
                                                                    (deadline_ns - now) / 1e9)))
    finally:
        for p in processes:
            if p.is_alive():
                _signal(p.pid, signal.SIGKILL)
            p.join(5)
        for channel in channels:
            channel.close()
    elapsed_s = (time.monotonic_ns() - t_begin) / 1e9
    ctx.workload_ended()    # every worker is gone: the monitors' last samples now, not after
    progress(board.take()[0])           # the spools are read (a second or more on a busy
                                        # machine with many ops)
    result = _collect(ctx, specs, processes, spool_dir, elapsed_s, stop_sent)
    result.extra["workers_started_ns"] = t_begin - ctx.t0_ns
    return result


def _wait_until_ready(ctx: RunContext, processes: list, ready) -> None:
    """Let the run's time start when every worker is set up (its cgroup joined, its recorder
    made), not when it was forked: under QEMU TCG on a loaded host that took 1.6-2.4 s of a
    6 s run, and a guest run's reads once fell all inside the warm-up. A worker that died or
    a stop request ends the wait (the run loop below sees them)."""
    give_up = time.monotonic() + READY_TIMEOUT_S
    while not all(ready) and time.monotonic() < give_up and not ctx.stop.is_set():
        if not all(p.is_alive() for p in processes):
            return
        multiprocessing.connection.wait([p.sentinel for p in processes], timeout=0.02)


def _signal(pid: int | None, signum: int) -> None:
    if pid:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass


def _worker_main(index: int, spec: WorkerSpec, spool_dir: Path, board: ProgressBoard,
                 all_ops: list[str], ctx: RunContext, deadline, start_gate, ops_done, ready,
                 channel: SpoolChannel | None = None) -> None:
    global _stop_requested
    _stop_requested = False
    signal.signal(signal.SIGINT, _request_stop)
    signal.signal(signal.SIGTERM, _request_stop)
    _stop_with_parent()
    summary = WorkerSummary(worker=index, role=spec.role, counted={op: 0 for op in spec.ops})
    recorder = None
    try:
        ctx.env.child_setup()
        recorder = WorkerRecorder(spool_dir, index, spec.ops, spec.layout, board=None,
                                  channel=channel)
        recorder.board = _BoardView(board, all_ops, spec.ops)
        ready[index] = 1
        while not start_gate.wait(0.2) and not _stop_requested:
            pass
        worker_ctx = WorkerContext(index, spec, recorder, deadline.value, ctx.t0_ns)
        extra = spec.target(worker_ctx, **spec.args) or {}
        summary.counted = extra.pop("counted")
        summary.late = int(extra.pop("late", 0))
        if _stop_requested:
            summary.status = Status.INTERRUPTED
    except OSError as exc:
        summary.status = Status.FAILED
        summary.reason = f"{spec.role} worker {index}: {exc.strerror or exc}".lower()
        summary.counted = getattr(exc, "counted", summary.counted)
    except BaseException as exc:  # noqa: BLE001 - report, never hang the parent
        summary.status = Status.FAILED
        summary.reason = f"{spec.role} worker {index}: {type(exc).__name__}: {exc}"
    finally:
        ops_done[index] = 1
        if recorder is not None:
            recorder.close()
        usage = resource.getrusage(resource.RUSAGE_SELF)
        summary.user_s, summary.system_s = usage.ru_utime, usage.ru_stime
        summary.save(spool_dir)
        os._exit(0)


def _stop_with_parent() -> None:
    """SIGTERM when stallbench dies (kill -9): stop and flush rather than run on unattended
    for the rest of --duration; `stallbench cleanup` then merges what was flushed."""
    parent = multiprocessing.parent_process()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        return
    if parent is not None and os.getppid() != parent.pid:   # died before prctl took effect
        _request_stop(signal.SIGTERM, None)


class _BoardView:
    """Maps a worker's own op indices onto the board's columns."""

    def __init__(self, board: ProgressBoard, all_ops: list[str], ops: list[str]):
        self.board = board
        self.columns = [all_ops.index(op) for op in ops]
        self.n = len(all_ops)

    def publish(self, worker: int, now_ns: int, counts: list[int], recent: list[int]) -> None:
        full_counts = [0] * self.n
        full_recent = [0] * self.n
        for k, column in enumerate(self.columns):
            full_counts[column] = counts[k]
            full_recent[column] = recent[k]
        self.board.publish(worker, now_ns, full_counts, full_recent)


def _collect(ctx: RunContext, specs: list[WorkerSpec], processes: list, spool_dir: Path,
             elapsed_s: float, stop_sent: bool) -> WorkloadResult:
    counted: dict[str, int] = {}
    late = 0
    user = system = 0.0
    failures: list[str] = []
    interrupted = stop_sent
    roles: dict[int, str] = {}
    for index, (spec, process) in enumerate(zip(specs, processes, strict=True)):
        roles[index] = spec.role
        summary = WorkerSummary.load(spool_dir, index)
        if summary is None:
            code = process.exitcode
            how = f"killed by signal {-code}" if code and code < 0 else f"exit code {code}"
            failures.append(f"{spec.role} worker {index} died ({how})")
            continue
        for op, n in summary.counted.items():
            counted[op] = counted.get(op, 0) + n
        late += summary.late
        user += summary.user_s
        system += summary.system_s
        if summary.status == Status.FAILED:
            failures.append(summary.reason or f"{spec.role} worker {index} failed")
        elif summary.status == Status.INTERRUPTED:
            interrupted = True
    status, reason = Status.COMPLETE, None
    if failures:
        status, reason = Status.FAILED, "; ".join(dict.fromkeys(failures))
    elif interrupted:
        status, reason = Status.INTERRUPTED, "stopped by signal"
    return WorkloadResult(
        batches=read_spools(spool_dir, ctx.t0_ns),
        counted=counted,
        rusage={"user_s": user, "system_s": system, "elapsed_s": elapsed_s},
        extra={"late_ops": late, "worker_roles": roles,
               "worker_pids": {index: p.pid for index, p in enumerate(processes)}},
        status=status,
        reason=reason,
    )
