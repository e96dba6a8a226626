"""What one variant's runs left for the where section, loaded once (I/O only, no analysis):
its monitor tables (counters, PSI, diskstats, delay, the trace table), the monitors skipped,
run.json's delay maxima with the worker role that had each, and from the summaries each op's
totals and the worker roles that record it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ...analysis import monitornames, montables
from ...analysis.folded import parse_folded
from ...analysis.summary import RESPONSE_SUFFIX, op_totals
from ...analysis.where import section as ws
from ...analysis.where.delays import RunDelays
from ...analysis.where.longest import beyond_ops
from ...analysis.where.perfstat import role_counts
from ...analysis.where.stacks import dstate_stacks
from ...core.errors import RunDataError
from ...monitors.base import table_columns
from ...monitors.counters import COUNTERS
from ...results.store import Run
from .facts import (
    busy_at_rows,
    longest_op,
    task_roles,
    variant_facts,
    worker_pids,
    worker_roles,
)

SKIPPED_STATUSES = ("skipped", "failed")
TRACE = "(trace table)"    # _tables: each run's own trace table (no table has this name)


class VariantData:
    """The runs of one variant and what their monitors left (loading only)."""

    def __init__(self, runs: list[Run]):
        self.runs = runs
        self.seconds = sum(r.duration_s for r in runs)
        self.op_count = sum(int(n) for r in runs for n in (r.meta.samples or {}).values())
        self.skipped: dict[str, str] = {}
        for run in runs:
            for name, info in (run.meta.monitors or {}).items():
                if info.get("status") in SKIPPED_STATUSES:
                    self.skipped.setdefault(name, info.get("reason") or info["status"])
        self._cache: dict[str, list[tuple[Run, dict[str, np.ndarray]]]] = {}
        self.op_totals = self._op_totals()

    def facts(self) -> ws.Facts:
        """What the runs recorded about their conditions (analysis/where/mechanism.py)."""
        return variant_facts(self.runs, self.counter_deltas())

    def used(self, monitor: str) -> bool:
        return any((r.meta.monitors or {}).get(monitor, {}).get("status") == "ok"
                   for r in self.runs)

    def _tables(self, name: str) -> list[tuple[Run, dict[str, np.ndarray]]]:
        """(run, numpy columns) of each run with a non-empty table `name`; TRACE: each run's
        own trace table (Run.trace_table_name, the rule of every reader), so a run with only
        `trace` counts beside one that also has `trace_full`."""
        if name not in self._cache:
            found = []
            for run in self.runs:
                try:
                    table = run.trace_table() if name == TRACE else run.monitor_table(name)
                except RunDataError:
                    continue
                if table is not None and table.num_rows:
                    found.append((run, table_columns(table)))
            self._cache[name] = found
        return self._cache[name]

    # -- counters, psi, diskstats ---------------------------------------------------------
    def counter_deltas(self) -> list[dict[str, int]]:
        return [montables.counter_deltas(columns, montables.declared_counters(columns, COUNTERS))
                for _run, columns in self._tables("counters")]

    def psi(self) -> list[dict[str, int]]:
        return [montables.psi_stall_totals(c["scope"], c["resource"], c["kind"], c["total_ns"])
                for _run, c in self._tables("psi")]

    def diskstats(self) -> list[tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]]:
        return [(c["device"], c["t_ns"],
                 {k: v for k, v in c.items() if k not in ("t_ns", "device")})
                for _run, c in self._tables("diskstats")]

    def _op_totals(self) -> dict[str, tuple[int, int, np.ndarray]]:
        """op -> (samples, latency sum, pooled histogram) after the warm-up, from summaries."""
        merged: dict[str, tuple[int, int, np.ndarray]] = {}
        for run in self.runs:
            try:
                summary = run.summary()
            except RunDataError:
                continue
            for op, data in summary.ops.items():
                if op.endswith(RESPONSE_SUFFIX):
                    continue
                n, total, _, _ = op_totals(data, summary.warmup_blocks)
                before = merged.get(op, (0, 0, np.zeros_like(data.histogram)))
                merged[op] = (before[0] + n, before[1] + total, before[2] + data.histogram)
        return merged

    # -- delay ----------------------------------------------------------------------------
    def delays(self) -> list[RunDelays]:
        out = []
        for run, columns in self._tables("delay"):
            roles = worker_roles(run)
            worker_of_pid = {p: w for w, p in worker_pids(run, monitornames.DELAY).items()}
            pid_role = {p: roles.get(w, f"worker {w}") for p, w in worker_of_pid.items()}
            started = (run.meta.workload_summary or {}).get("workers_started_ns")
            so_far = busy_at_rows(run, columns, worker_of_pid)
            try:
                data_start: int | None = run.summary().data_start_ns
            except RunDataError:
                data_start = None
            out.append(RunDelays(columns, pid_role, so_far.busy,
                                 int(started) if started is not None else None, so_far.asleep,
                                 so_far.done, data_start))
        return out

    def delay_max(self) -> tuple[list[dict[str, dict[str, Any]]], str | None]:
        """Each run's longest single delays per kind (run.json, from montables.delay_longest)
        with the worker role whose task had it as "run"; and why there is none, if none."""
        per_run, reasons = [], []
        for run in self.runs:
            summary = (run.meta.monitors or {}).get(monitornames.DELAY) or {}
            if summary.get("status") != "ok":
                continue
            if isinstance(summary.get("max_ns"), Mapping):
                roles = worker_roles(run)
                role_of = {pid: roles.get(w, f"worker {w}")
                           for w, pid in worker_pids(run, monitornames.DELAY).items()}
                longest = longest_op(run)
                per_run.append({kind: {**(beyond_ops(entry, longest)
                                          if entry.get("tid") in role_of else entry),
                                       "run": role_of.get(entry.get("tid"))}
                                for kind, entry in summary["max_ns"].items()})
            else:
                reasons.append(summary.get("max_unavailable")
                               or "recorded by a stallbench without per-kind maxima")
        return per_run, (reasons[0] if reasons and not per_run else None)

    def ops_by_role(self) -> dict[str, int]:
        """Ops recorded per worker role, warm-up included (as the delays and perf's counts
        cover the whole run): each op's count in all its blocks, shared among the workers as
        their counts after the warm-up are (the summary keeps no worker's warm-up apart)."""
        result: dict[str, float] = {}
        for run in self.runs:
            roles = worker_roles(run)
            try:
                ops = run.summary().ops
            except RunDataError:
                continue
            for op, data in ops.items():
                if op.endswith(RESPONSE_SUFFIX):
                    continue
                after = int(data.worker_count.sum())
                scale = int(data.block_count.sum()) / after if after else 0.0
                for worker, n in zip(data.workers.tolist(), data.worker_count.tolist(),
                                     strict=True):
                    role = roles.get(worker, f"worker {worker}")
                    result[role] = result.get(role, 0.0) + n * scale
        return {role: int(round(n)) for role, n in result.items()}

    def roles_of_ops(self) -> dict[str, list[str]]:
        """Which worker roles record each op (from the summaries' worker columns)."""
        result: dict[str, set[str]] = {}
        for run in self.runs:
            roles = worker_roles(run)
            for op, data in run.summary().ops.items():
                for worker in data.workers.tolist():
                    result.setdefault(op, set()).add(roles.get(worker, f"worker {worker}"))
        return {op: sorted(names) for op, names in result.items()}

    # -- stacks and trace -------------------------------------------------------------------
    def folded(self) -> list[dict[str, int]]:
        return [parse_folded(text) for run in self.runs if (text := run.stacks_folded())]

    def trace_dstate(self) -> list[np.ndarray]:
        return [dstate_stacks(c["category"], c["stack"]) for _run, c in self._tables(TRACE)]

    def trace_durations(self) -> list[tuple[np.ndarray, np.ndarray]]:
        return [(c["category"], c["duration_ns"]) for _run, c in self._tables(TRACE)]

    # -- on a CPU: the profile and perfstat monitors ------------------------------------------
    def profile_stacks(self) -> tuple[dict[str, dict[str, int]], list[str]]:
        """The profile monitor's samples of every run: role -> folded stack -> samples (a
        process that is no worker's: facts.OTHER_PROCESSES), and the events perf sampled."""
        out: dict[str, dict[str, int]] = {}
        events: list[str] = []
        for run, columns in self._tables(monitornames.PROFILE):
            event = ((run.meta.monitors or {}).get(monitornames.PROFILE) or {}).get("event")
            if event and event not in events:
                events.append(event)
            roles = task_roles(run, monitornames.PROFILE, columns["pid"], columns["tid"])
            for role, stack in zip(roles, np.asarray(columns["stack"]).tolist(), strict=True):
                stacks = out.setdefault(role, {})
                stacks[stack] = stacks.get(stack, 0) + 1
        return out, events

    def perf_counts(self) -> list[dict[str, dict[str, int]]]:
        """Each run's perfstat counts: role -> event -> count."""
        return [role_counts(np.asarray(c["event"]).tolist(),
                            np.asarray(c["count"], dtype=np.float64).tolist(),
                            task_roles(run, monitornames.PERFSTAT, c["pid"], c["tid"]))
                for run, c in self._tables(monitornames.PERFSTAT)]

    def monitor_statuses(self, monitor: str) -> list[dict[str, Any]]:
        """run.json's account of `monitor` in each run that ran it."""
        return [status for r in self.runs
                if (status := (r.meta.monitors or {}).get(monitor) or {}).get("status") == "ok"]
