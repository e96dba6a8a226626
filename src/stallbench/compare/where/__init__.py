"""Where did the time go: loads what the monitors of each variant's runs left (tables, run.json,
ops above a threshold) and hands it to the steps of analysis/where/ (and analysis/montables.py
for the tables' totals) in the order that package's face lists them.

`build` returns the typed WhereSection (the comparison's `where`), `explain` its JSON form;
report/where.py builds the report's tables from the typed one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from ...analysis import histogram as hist
from ...analysis import monitornames, montables
from ...analysis.folded import parse_folded
from ...analysis.summary import RESPONSE_SUFFIX, op_totals
from ...analysis.where import section as ws
from ...analysis.where import slowops
from ...analysis.where.counters import counter_rows
from ...analysis.where.delays import RunDelays, role_delays, role_io
from ...analysis.where.device import device_vs_above
from ...analysis.where.disk import disk_summaries
from ...analysis.where.growth import TailChange
from ...analysis.where.histograms import histograms
from ...analysis.where.lines import (
    explanations,
    impossible_warnings,
    off_cpu_warnings,
    variant_lines,
)
from ...analysis.where.longest import beyond_ops, longest_per_kind, merge_runs
from ...analysis.where.mechanism import limit_warning
from ...analysis.where.pressure import pressure
from ...analysis.where.stacks import blocked_stacks, dstate_stacks
from ...analysis.where.stalls import merge as merge_stalls
from ...analysis.where.stalls import op_stalls
from ...core.errors import RunDataError
from ...monitors.base import table_columns
from ...monitors.counters import COUNTERS
from ...results.store import Run
from .facts import busy_at_rows, longest_op, variant_facts, worker_pids, worker_roles
from .stalls import stalls_in_ops

SLOW_FACTOR = 10.0
SKIPPED_STATUSES = ("skipped", "failed")
TRACE = "(trace table)"    # _tables: each run's own trace table (no table has this name)


def explain(baseline_runs: list[Run], candidate_runs_by_label: dict[str, list[Run]],
            baseline_label: str, tail_changes: dict[str, dict[str, TailChange]]
            ) -> dict:
    """The "where did the time go" section as JSON (see `build`)."""
    return build(baseline_runs, candidate_runs_by_label, baseline_label, tail_changes).to_json()


def build(baseline_runs: list[Run], candidate_runs_by_label: dict[str, list[Run]],
          baseline_label: str, tail_changes: dict[str, dict[str, TailChange]]
          ) -> ws.WhereSection:
    """The "where did the time go" section.

    `tail_changes[label][op]` is (statistic, relative change against the baseline: 0.31 =
    +31%, whether the comparison decided it) as the comparison computed it, the statistic from
    analysis/where/growth.py `growth`; ops whose tail or mean grew get a one-line explanation,
    marked "if real" where the change was not decided.
    """
    variants: dict[str, list[Run]] = {baseline_label: baseline_runs, **candidate_runs_by_label}
    data = {label: _VariantData(runs) for label, runs in variants.items()}
    base = data[baseline_label]
    section = ws.WhereSection(baseline=baseline_label, variants=list(variants),
                              slow_factor=SLOW_FACTOR)
    for label, variant in data.items():
        for monitor, reason in variant.skipped.items():
            section.skipped.append(ws.Skipped(label, monitor, reason))
        if variant.used(monitornames.TRACE_FULL):
            section.warnings.append(
                f"{label}: trace-full ran (block requests and every syscall traced); it perturbs "
                "the run, so its latencies are not comparable with untraced runs")
        facts = section.facts[label] = variant.facts()
        warning = limit_warning(label, facts)
        if warning:
            section.warnings.append(warning)
        section.psi[label] = pressure(variant.psi(), variant.seconds)
        section.diskstats[label] = disk_summaries(variant.diskstats())
        section.delay[label] = role_delays(variant.delays(), variant.ops_by_role())
        section.warnings += impossible_warnings(label, section.delay[label])
        section.warnings += off_cpu_warnings(label, section.delay[label])
        totals = {op: (n, total) for op, (n, total, _) in variant.op_totals.items()}
        section.stalls[label] = op_stalls(
            merge_stalls(stalls_in_ops(run) for run in variant.runs), totals)
        section.device[label] = device_vs_above(
            section.diskstats[label], totals, len(variant.runs),
            role_io(section.delay[label]), variant.roles_of_ops(), facts,
            {op: {kind: stall.share or 0.0 for kind, stall in kinds.items()}
             for op, kinds in section.stalls[label].items()},
            section.device.get(baseline_label) if label != baseline_label else None)
        per_run, missing = variant.delay_max()
        longest = longest_per_kind(per_run)
        if longest:
            section.delay_max[label] = longest
        dropped = sorted(kind for kind, entry in merge_runs(per_run).items()
                         if entry["impossible"])
        if dropped:
            section.warnings.append(
                f"{label}: taskstats accounted more {', '.join(dropped)} delay to some tasks "
                "than they lived, or a longest wait longer than the run or than any op of "
                "the worker's run: those tasks' maxima are not shown (a kernel accounting "
                "fault, not a measurement)")
        if missing:
            section.skipped.append(ws.Skipped(label, "delay maximum", missing))
        section.stacks[label] = blocked_stacks(variant.folded(), variant.trace_dstate())
        section.histograms[label] = histograms(variant.trace_durations())
        section.slow_ops[label] = variant.slow_ops()
        if label == baseline_label:
            continue
        base_deltas, cand_deltas = base.counter_deltas(), variant.counter_deltas()
        missing_in = [name for name, deltas in ((baseline_label, base_deltas),
                                                (label, cand_deltas)) if not deltas]
        if missing_in and (base_deltas or cand_deltas):
            # one side without the counters monitor would read as every counter -> 0
            section.warnings.append(
                f"counters not collected in {', '.join(missing_in)}: {baseline_label} and "
                f"{label} are not compared on kernel counters")
        section.counters[label] = [] if missing_in else counter_rows(
            base_deltas, cand_deltas, base.seconds, variant.seconds, base.op_count,
            variant.op_count, COUNTERS.unit)
        section.explanations += explanations(
            label, tail_changes.get(label, {}), section.slow_ops[label], section.delay[label],
            variant.roles_of_ops(), section.delay_max.get(label, {}),
            section.delay_max.get(baseline_label, {}), facts, section.device[label],
            section.delay.get(baseline_label, []), section.facts.get(baseline_label),
            section.stalls[label], section.stalls.get(baseline_label, {}),
            section.device.get(baseline_label, {}),
            totals, {op: (n, total) for op, (n, total, _) in base.op_totals.items()})
        section.explanations += variant_lines(
            label, section.psi.get(label, {}), section.psi.get(baseline_label, {}),
            section.stacks[label], section.stacks.get(baseline_label))
    return section


class _VariantData:
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
        self._breakdowns: dict[int, _Breakdown] = {}
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
            busy, asleep = busy_at_rows(run, columns, worker_of_pid)
            out.append(RunDelays(columns, pid_role, busy,
                                    int(started) if started is not None else None, asleep))
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
        """Ops recorded per worker role (all of them, as the delays cover the whole run)."""
        result: dict[str, int] = {}
        for run in self.runs:
            roles = worker_roles(run)
            try:
                ops = run.summary().ops
            except RunDataError:
                continue
            for op, data in ops.items():
                if op.endswith(RESPONSE_SUFFIX):
                    continue
                for worker, n in zip(data.workers.tolist(), data.worker_count.tolist(),
                                     strict=True):
                    role = roles.get(worker, f"worker {worker}")
                    result[role] = result.get(role, 0) + int(n)
        return result

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

    # -- slow ops -----------------------------------------------------------------------------
    def _breakdown(self, run: Run) -> _Breakdown:
        if id(run) not in self._breakdowns:
            self._breakdowns[id(run)] = _Breakdown(run)
        return self._breakdowns[id(run)]

    def slow_ops(self) -> dict[str, ws.SlowOps]:
        result: dict[str, ws.SlowOps] = {}
        for op, (samples, _, histogram) in self.op_totals.items():
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
            for run in self.runs:
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
                explain = self._breakdown(run)
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
