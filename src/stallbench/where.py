"""Where did the time go: loads the monitor tables of runs and calls analysis/monitors.py.

`explain` builds the JSON-able "where" section of a comparison; report/where.py renders it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from .analysis import histogram as hist
from .analysis import monitors as am
from .analysis.summary import RESPONSE_SUFFIX, op_totals
from .errors import RunDataError
from .monitors.counters import counter_unit, is_cumulative
from .store import Run

SLOW_FACTOR = 10.0
SKIPPED_STATUSES = ("skipped", "failed")


def explain(baseline_runs: list[Run], candidate_runs_by_label: dict[str, list[Run]],
            baseline_label: str, tail_changes: dict[str, dict[str, float | None]]) -> dict:
    """The "where did the time go" section.

    `tail_changes[label][op]` is the relative change of the op's p99 against the baseline
    (0.31 = +31%) as the comparison computed it; ops whose tail grew get a one-line explanation.
    """
    variants: dict[str, list[Run]] = {baseline_label: baseline_runs, **candidate_runs_by_label}
    data = {label: _VariantData(runs) for label, runs in variants.items()}
    base = data[baseline_label]
    section: dict[str, Any] = {"baseline": baseline_label, "variants": list(variants),
                               "slow_factor": SLOW_FACTOR, "skipped": [], "warnings": [],
                               "counters": {}, "psi": {}, "diskstats": {}, "device": {},
                               "delay": {}, "stacks": {}, "histograms": {}, "slow_ops": {},
                               "explanations": []}
    for label, variant in data.items():
        for monitor, reason in variant.skipped.items():
            section["skipped"].append({"variant": label, "monitor": monitor, "reason": reason})
        if variant.used("trace-full"):
            section["warnings"].append(
                f"{label}: trace-full ran (block requests and every syscall traced); it perturbs "
                "the run, so its latencies are not comparable with untraced runs")
        section["psi"][label] = variant.psi()
        section["diskstats"][label] = variant.diskstats()
        section["device"][label] = variant.device_vs_above(section["diskstats"][label])
        section["delay"][label] = variant.delay()
        section["stacks"][label] = variant.stacks()
        section["histograms"][label] = variant.histograms()
        section["slow_ops"][label] = variant.slow_ops()
        if label != baseline_label:
            base_deltas, cand_deltas = base.counter_deltas(), variant.counter_deltas()
            missing = [name for name, deltas in ((baseline_label, base_deltas),
                                                 (label, cand_deltas)) if not deltas]
            if missing and (base_deltas or cand_deltas):
                # one side without the counters monitor would read as every counter -> 0
                section["warnings"].append(
                    f"counters not collected in {', '.join(missing)}: {baseline_label} and "
                    f"{label} are not compared on kernel counters")
            section["counters"][label] = [] if missing else [
                {**row, "unit": counter_unit(row["counter"])}
                for row in am.counters_comparison(base_deltas, cand_deltas, base.seconds,
                                                  variant.seconds, base.op_count,
                                                  variant.op_count)]
            delay_by_role = {row["role"]: row["delays"] for row in section["delay"][label]}
            roles_of_op = variant.roles_of_ops()
            for op, change in sorted(tail_changes.get(label, {}).items()):
                slow = section["slow_ops"][label].get(op)
                line = None
                if slow:
                    line = am.explanation(op, change, slow["breakdown_ns"], slow["source"])
                roles = roles_of_op.get(op, [])
                if line is None and len(roles) == 1 and roles[0] in delay_by_role:
                    line = am.delay_explanation(op, change, roles[0], delay_by_role[roles[0]])
                if line:
                    section["explanations"].append({"variant": label, "op": op, "text": line})
    return _jsonable(section)


class _VariantData:
    """The runs of one variant and what their monitors left."""

    def __init__(self, runs: list[Run]):
        self.runs = runs
        self.seconds = sum(r.duration_s for r in runs)
        self.op_count = sum(int(n) for r in runs for n in (r.meta.get("samples") or {}).values())
        self.skipped: dict[str, str] = {}
        for run in runs:
            for name, info in (run.meta.get("monitors") or {}).items():
                if info.get("status") in SKIPPED_STATUSES:
                    self.skipped.setdefault(name, info.get("reason") or info["status"])

    def used(self, monitor: str) -> bool:
        return any((r.meta.get("monitors") or {}).get(monitor, {}).get("status") == "ok"
                   for r in self.runs)

    def _tables(self, name: str) -> list[tuple[Run, pa.Table]]:
        found = []
        for run in self.runs:
            try:
                table = run.monitor_table(name)
            except RunDataError:
                continue
            if table is not None and table.num_rows:
                found.append((run, table))
        return found

    # -- counters, psi, diskstats ---------------------------------------------------------
    def counter_deltas(self) -> list[dict[str, int]]:
        result = []
        for _run, table in self._tables("counters"):
            columns = {c: table.column(c).to_numpy(zero_copy_only=False).astype(np.float64)
                       for c in table.column_names if c != "t_ns" and is_cumulative(c)}
            result.append(am.counter_deltas(columns, columns))
        return result

    def psi(self) -> dict[str, Any]:
        per_run = []
        for _run, table in self._tables("psi"):
            per_run.append(am.psi_stall_totals(
                table.column("scope").to_pylist(), table.column("resource").to_pylist(),
                table.column("kind").to_pylist(), table.column("total_ns").to_numpy()))
        if not per_run:
            return {}
        keys = sorted({k for run in per_run for k in run})
        seconds = self.seconds or 1.0
        return {key: {"stall_ns": sum(r.get(key, 0) for r in per_run) / len(per_run),
                      "share_of_time": sum(r.get(key, 0) for r in per_run) / 1e9 / seconds}
                for key in keys}

    def diskstats(self) -> dict[str, Any]:
        per_device: dict[str, list[dict[str, Any]]] = {}
        for _run, table in self._tables("diskstats"):
            devices = np.array(table.column("device").to_pylist(), dtype=object)
            t_ns = table.column("t_ns").to_numpy()
            for device in sorted(set(devices.tolist())):
                rows = devices == device
                counters = {c: table.column(c).to_numpy()[rows] for c in table.column_names
                            if c not in ("t_ns", "device")}
                summary = am.diskstats_summary(t_ns[rows], counters)
                if summary:
                    per_device.setdefault(device, []).append(summary)
        return {device: _mean_dicts(items) for device, items in per_device.items()}

    def device_vs_above(self, diskstats: dict[str, Any]) -> dict[str, Any]:
        if not diskstats:
            return {}
        requests = sum((d.get("reads", 0) + d.get("writes", 0)) for d in diskstats.values())
        device_ns = sum((d.get("ns_per_request") or 0) * (d.get("reads", 0) + d.get("writes", 0))
                        for d in diskstats.values())
        per_request = device_ns / requests if requests else None
        result = {}
        for op, (samples, total, _) in self._op_totals().items():
            if samples == 0:
                continue
            mean = total / samples
            share = am.device_share(total, requests / max(1, len(self.runs)), per_request)
            verdict = None
            if per_request is not None:
                verdict = ("in the device" if per_request >= 0.5 * mean
                           else "above the device (page cache, reclaim, locks, CPU)")
            result[op] = {"op_mean_ns": mean, "device_ns_per_request": per_request,
                          "device_share_upper_bound": share, "verdict": verdict}
        return result

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
    def delay(self) -> list[dict[str, Any]]:
        delays_by_pid: dict[int, dict[str, int]] = {}
        role_of_pid: dict[int, str] = {}
        latency_by_role: dict[str, int] = {}
        found = False
        for run, table in self._tables("delay"):
            found = True
            key_base = id(run) << 32  # pids of different runs must not collide
            tid = table.column("tid").to_numpy()
            pid = table.column("pid").to_numpy()
            born = table.column("born_in_run").to_numpy(zero_copy_only=False)
            delays = {k: table.column(f"{k}_ns").to_numpy(zero_copy_only=False).astype(np.float64)
                      for k in am.DELAY_KINDS if f"{k}_ns" in table.column_names}
            per_tid = am.task_delays(tid, born, delays, table.column("t_ns").to_numpy())
            pid_of_tid = dict(zip(tid.tolist(), pid.tolist(), strict=True))
            worker_pid = _worker_pids(run, "delay")
            roles = _worker_roles(run)
            pid_role = {p: roles.get(w, f"worker {w}") for w, p in worker_pid.items()}
            for t, values in per_tid.items():
                p = pid_of_tid[t]
                role = pid_role.get(p)
                if role is None:
                    continue
                bucket = delays_by_pid.setdefault(key_base + p, {})
                for kind, value in values.items():
                    bucket[kind] = bucket.get(kind, 0) + value
                role_of_pid[key_base + p] = role
            for worker, total in _latency_by_worker(run).items():
                role = roles.get(worker, f"worker {worker}")
                latency_by_role[role] = latency_by_role.get(role, 0) + total
        if not found:
            return []
        return am.delay_attribution(delays_by_pid, role_of_pid, latency_by_role)

    def roles_of_ops(self) -> dict[str, list[str]]:
        """Which worker roles record each op (from ops.parquet's worker column)."""
        result: dict[str, set[str]] = {}
        for run in self.runs:
            roles = _worker_roles(run)
            for op, data in run.summary().ops.items():
                for worker in data.workers.tolist():
                    result.setdefault(op, set()).add(roles.get(worker, f"worker {worker}"))
        return {op: sorted(names) for op, names in result.items()}

    # -- stacks -------------------------------------------------------------------------------
    def stacks(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        source = "stacks"
        for run in self.runs:
            text = run.stacks_folded()
            if text:
                for stack, n in am.parse_folded(text).items():
                    # the leading frame is the task's comm: not part of the wait
                    key = stack.split(";", 1)[1] if ";" in stack else stack
                    counts[key] = counts.get(key, 0) + n
        if not counts:
            source = "trace"
            for _run, table in self._trace_tables():
                for category, stack in zip(table.column("category").to_pylist(),
                                           table.column("stack").to_pylist(), strict=True):
                    if category == "dstate" and stack:
                        counts[stack] = counts.get(stack, 0) + 1
        return {"source": source if counts else None, "top": am.top_stacks(counts)}

    def _trace_tables(self) -> list[tuple[Run, pa.Table]]:
        return self._tables("trace_full") or self._tables("trace")

    # -- histograms and slow ops ------------------------------------------------------------
    def histograms(self) -> dict[str, Any]:
        groups: dict[str, list[np.ndarray]] = {"reclaim": [], "throttle": [], "block": []}
        for _run, table in self._trace_tables():
            category = np.array(table.column("category").to_pylist(), dtype=object)
            duration = table.column("duration_ns").to_numpy()
            for name in groups:
                groups[name].append(duration[category == name])
        return {name: am.log2_histogram(np.concatenate(parts)) for name, parts in groups.items()
                if parts and sum(len(p) for p in parts)}

    def slow_ops(self) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for op, (samples, _, histogram) in self._op_totals().items():
            if samples == 0:
                continue
            median = hist.quantiles_from_counts(histogram, np.array([0.5]),
                                                hist.bucket_lower_edges())[0, 0]
            threshold = am.slow_threshold(median, SLOW_FACTOR)
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
                if slow is None:
                    continue
                count += int(slow["latency_ns"].size)
                if not slow["latency_ns"].size:
                    continue
                part, part_source = _run_breakdown(run, slow["start_ns"], slow["latency_ns"],
                                                   slow["worker"])
                if part_source:
                    source = source or part_source
                    for k, v in part.items():
                        breakdown[k] = breakdown.get(k, 0) + v
            if count:
                total = sum(breakdown.values())
                result[op] = {"threshold_ns": threshold, "count": count, "source": source,
                              "breakdown_ns": breakdown,
                              "shares": {k: v / total for k, v in breakdown.items()}
                              if total else {}}
        return result


def _can_break_down(run: Run) -> bool:
    """Slow ops are read back from ops.parquet only where a trace or stack samples can say
    where their time went; elsewhere the histogram counts them."""
    files = [run.path / "monitors" / f"{name}.parquet" for name in ("trace_full", "trace",
                                                                      "stacks")]
    return any(f.exists() for f in files)


def _slow_ops(run: Run, op: str, threshold: int) -> dict[str, np.ndarray] | None:
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


def _run_breakdown(run: Run, start: np.ndarray, latency: np.ndarray,
                   worker: np.ndarray) -> tuple[dict[str, int], str | None]:
    """Break down one run's slow ops with its trace table, else its stack samples."""
    worker_pid = _worker_pids(run, "trace") or _worker_pids(run, "stacks")
    task = np.array([worker_pid.get(int(w), -1) for w in worker], dtype=np.int64)
    try:
        trace = run.monitor_table("trace_full") or run.monitor_table("trace")
    except RunDataError:
        trace = None
    if trace is not None and trace.num_rows:
        category = np.array(trace.column("category").to_pylist(), dtype=object)
        kind = np.array(trace.column("kind").to_pylist(), dtype=object)
        stack = trace.column("stack").to_pylist()
        pid = trace.column("pid").to_numpy()
        t = trace.column("t_ns").to_numpy()
        duration = trace.column("duration_ns").to_numpy()
        valid = duration >= 0
        labels = np.empty(len(category), dtype=object)
        for i in range(len(category)):
            c = category[i]
            if c == "reclaim":
                labels[i] = kind[i]
            elif c == "throttle":
                labels[i] = ("dirty throttling" if kind[i] == "balance_dirty_pages"
                             else "reclaim throttling")
            elif c == "dstate":
                labels[i] = am.classify_stack(stack[i] or "")
            else:
                labels[i] = None
        intervals: dict[str, dict[int, tuple[np.ndarray, np.ndarray]]] = {}
        for label in {lb for lb in labels.tolist() if lb}:
            rows = valid & (labels == label)
            per_task: dict[int, tuple[np.ndarray, np.ndarray]] = {}
            for p in np.unique(pid[rows]):
                sel = rows & (pid == p)
                per_task[int(p)] = (t[sel], t[sel] + duration[sel])
            intervals[label] = per_task
        device = None
        block = valid & (category == "block")
        if block.any():
            device = (t[block], t[block] + duration[block])
        return am.slow_op_breakdown(start, latency, task, intervals, device), "trace"
    try:
        stacks = run.monitor_table("stacks")
    except RunDataError:
        stacks = None
    if stacks is not None and stacks.num_rows:
        interval_ns = int(float((run.meta.get("monitors") or {}).get("stacks", {})
                                .get("interval_s", 0.02)) * 1e9)
        labels = [am.classify_stack(s) for s in stacks.column("stack").to_pylist()]
        return am.sampled_breakdown(start, latency, task, stacks.column("t_ns").to_numpy(),
                                    stacks.column("pid").to_numpy(), labels, interval_ns), "stacks"
    return {}, None


def _worker_pids(run: Run, monitor: str) -> dict[int, int]:
    """worker index -> pid: the workload's own record if it has one, else the order in which
    the workers registered (they are forked in index order, so pids ascend with the index)."""
    summary = run.meta.get("workload_summary") or {}
    recorded = summary.get("worker_pids")
    if isinstance(recorded, Mapping) and recorded:
        return {int(k): int(v) for k, v in recorded.items()}
    for name in (monitor, "delay", "stacks", "trace", "trace-full"):
        pids = ((run.meta.get("monitors") or {}).get(name) or {}).get("workload_pids")
        if pids:
            return dict(enumerate(sorted(int(p) for p in pids)))
    return {}


def _worker_roles(run: Run) -> dict[int, str]:
    roles = (run.meta.get("workload_summary") or {}).get("worker_roles") or {}
    return {int(k): str(v) for k, v in roles.items()}


def _latency_by_worker(run: Run) -> dict[int, int]:
    totals: dict[int, int] = {}
    try:
        summary = run.summary()
    except RunDataError:
        return totals
    for name, data in summary.ops.items():
        if name.endswith(RESPONSE_SUFFIX):
            continue
        for worker, total in zip(data.workers.tolist(), data.worker_sum.tolist(), strict=True):
            if total:
                totals[worker] = totals.get(worker, 0) + int(total)
    return totals


def _mean_dicts(items: list[dict[str, Any]]) -> dict[str, Any]:
    keys = items[0].keys()
    result = {}
    for key in keys:
        values = [i.get(key) for i in items if i.get(key) is not None]
        result[key] = float(np.mean(values)) if values else None
    return result


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return None if np.isnan(value) else float(value)
    if isinstance(value, float) and value != value:
        return None
    return value
