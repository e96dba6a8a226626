"""The "where did the time go" section as the report's table model (tables.py): a Chapter of
Sections built from the typed WhereSection (analysis/where/section.py, built by compare/where/),
laid out by the same text, markdown and HTML emitters as the comparison's tables.

As in tables.py, every cell's words are decided here; nothing is computed beyond choosing units.
"""

from __future__ import annotations

from ..analysis.display import format_ns
from ..analysis.where.oncpu import CPU_STATS
from ..analysis.where.perfstat import EVENT_WORDS, TASK_CLOCK
from ..analysis.where.section import CounterRow, RoleCounters, RoleCpu, WhereSection
from ..analysis.where.tracedstalls import stall_words
from .tables import LEFT, Chapter, Column, Section, Table, cells

COUNTER_ROWS = 25
HIST_BAR = 30


def _num(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "-"
    if abs(value) >= 1e6:
        return f"{value:.3g}"
    if value == int(value):
        return f"{int(value)}"
    return f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.0%}" if value < 10 else f"{value + 1:.0f}x"


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


NEAR_ZERO = 10     # a baseline below this many events per run gives no meaningful ratio


def _counter_change(row: CounterRow, change: float | None = None) -> str:
    """'new' for a counter that did not move in the baseline, 'from ~0' for one that barely
    did (a ratio against 2 events says nothing), else the change (per op by default)."""
    if not row.baseline:
        return "new"
    if abs(row.baseline) < NEAR_ZERO <= abs(row.candidate):
        return "from ~0"
    change = row.change if change is None else change
    return "-" if change is None else _pct(change) if abs(change) < 1000 else "≥1000x"


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _part(title: str, header: list[str], rows: list[list[str]]) -> Section:
    """One table of the section under its title, its columns as wide as their widest cell, its
    lines cut to the page."""
    columns = [Column(h, LEFT, gap=2 if i else 0) for i, h in enumerate(header)]
    return Section(title, [Table(columns, [cells(*row) for row in rows], cut=True)], level=3)


def _table_sections(section: WhereSection) -> list[Section]:
    """Every table of the section, in reading order."""
    out: list[Section] = []
    base = section.baseline
    for label, rows in section.counters.items():
        if not rows:
            continue
        names = {r.counter for r in rows}
        # memcg's total_* repeat the cgroup's own counters for a cgroup without children
        shown = [r for r in rows if not (r.counter.startswith("memcg.total_") and
                 "memcg." + r.counter.removeprefix("memcg.total_") in names)]
        body = [[_short(r.counter.removeprefix("vmstat."), 30) + ("°" if r.follows else ""),
                 r.unit, _num(r.baseline), _num(r.candidate), _num(r.baseline_per_op, 3),
                 _num(r.candidate_per_op, 3),
                 "-" if r.change_per_s is None else _counter_change(r, r.change_per_s),
                 _counter_change(r)]
                for r in shown[:COUNTER_ROWS]]
        more = len(shown) - COUNTER_ROWS
        title = (f"kernel counters {base} vs {label}: per run, per op, and the change per "
                 "second and per op; reclaim, throttling and writeback first, ° = follows the "
                 "op count or the clock, not a cause (rates and gauges in the JSON)")
        if more > 0:
            title += f"; {more} more there"
        b, c = _short(base, 9), _short(label, 9)
        out.append(_part(title, ["counter", "unit", b, c, f"{_short(base, 6)}/op",
                                 f"{_short(label, 6)}/op", "per s", "per op"], body))
    psi_rows = [[label, key, format_ns(item.stall_ns), _share(item.share_of_time)]
                for label, values in section.psi.items() for key, item in values.items()
                if item.stall_ns]
    if psi_rows:
        out.append(_part("pressure stall (PSI) during the run",
                         ["variant", "pressure", "stalled", "of run time"], psi_rows))
    disk_rows = [[label, device, _num(d.iops), _num((d.read_bytes_per_s or 0) / 2**20),
                  _num((d.write_bytes_per_s or 0) / 2**20), format_ns(d.read_ns_per_request),
                  format_ns(d.write_ns_per_request), _num(d.queue_depth, 2),
                  _share(d.utilisation)]
                 for label, devices in section.diskstats.items() for device, d in devices.items()]
    if disk_rows:
        out.append(_part("block devices", ["variant", "device", "IOPS", "read MiB/s",
                                           "write MiB/s", "read/req", "write/req", "queue",
                                           "util"], disk_rows))
    device_rows = [[label, op, format_ns(d.op_mean_ns), _share(d.from_device),
                    _share(d.blkio_share), _share(d.device_share), d.verdict or "-"]
                   for label, ops in section.device.items() for op, d in ops.items()]
    if device_rows:
        out.append(_part("device or above it, from each op's own I/O: the bytes its reads got "
                         "from the block layer, its op time in block I/O waits, and the most "
                         "of it the device can have spent on its role's own I/O (its time per "
                         "byte)",
                         ["variant", "op", "op mean", "from device", "I/O waits", "device ≤",
                          "time spent"], device_rows))
    stall_rows = [[label, op, stall_words(kind), f"{stall.stalls:,}",
                   format_ns(stall.mean_ns), _num(stall.per_op, 3), _share(stall.share)]
                  for label, ops in section.stalls.items() for op, kinds in ops.items()
                  for kind, stall in kinds.items()]
    if stall_rows:
        out.append(_part("stalls timed by the kernel's tracepoints inside each op (reclaim, "
                         "dirty throttling): how many, their mean length, per op, and their "
                         "share of the op's time",
                         ["variant", "op", "stall", "stalls", "mean", "per op", "of op time"],
                         stall_rows))
    out += _time_on_cpu_sections(section)
    delay_rows = [[label, role.role, kind, format_ns(d.total_ns), format_ns(d.in_ops_ns),
                   _share(d.share)]
                  for label, roles in section.delay.items() for role in roles
                  for kind, d in role.delays.items() if d.total_ns]
    if delay_rows:
        out.append(_part("delay accounting per worker role: accrued in the run, the part that "
                         "must have been inside the ops, and its share of their op time",
                         ["variant", "role", "delay", "total", "in ops", "of op time"],
                         delay_rows))
    longest_rows = [[label, kind, format_ns(d.max_ns), d.role or f"tid {d.tid}"]
                    for label, kinds in section.delay_max.items()
                    for kind, d in kinds.items() if d.max_ns]
    if longest_rows:
        out.append(_part("longest single delay per kind (taskstats per-task maximum)",
                         ["variant", "delay", "longest", "task"], longest_rows))
    for label, stacks in section.stacks.items():
        if stacks.top:
            out.append(_part(f"top blocked stacks: {label} (from {stacks.source}; the "
                             "function each slept in, then the stack from the syscall in)",
                             ["share", "samples", "waiting on", "sleeps in", "stack (leaf last)"],
                             [[_share(s.share), str(s.samples), s.what,
                               s.sleeps_in or "-", _short_stack(s.stack)]
                              for s in stacks.top]))
    out += _profile_sections(section)
    for label, ops in section.slow_ops.items():
        rows = [[op, str(slow.count), format_ns(slow.threshold_ns), cause, _share(share),
                 format_ns(slow.breakdown_ns[cause])]
                for op, slow in ops.items()
                for cause, share in sorted(slow.shares.items(), key=lambda kv: -kv[1])]
        if rows:
            out.append(_part(f"slow ops (> {section.slow_factor:g}x p50): {label}",
                             ["op", "slow ops", "threshold", "time went to", "share", "total"],
                             rows))
    return out


def _per(value: int | None, count: int | float | None) -> str:
    return "-" if value is None or not count else format_ns(value / count)


def _time_on_cpu_sections(section: WhereSection) -> list[Section]:
    """Each role's CPU side per variant, then each candidate's changes with their intervals."""
    out = []
    rows = [[label, r.role, f"{r.ops:,}", _share(r.in_ops_ns / r.op_time_ns if r.op_time_ns
                                                 else None),
             _per(r.oncpu_ns, r.ops), _per(r.system_ns, r.ops), _per(r.user_ns, r.ops),
             _per(r.oncpu_ns, _kib(r))]
            for label, roles in section.cpu.items() for r in roles]
    if rows:
        out.append(_part("time on a CPU per op (each worker role's main threads after the "
                         "warm-up): the share of their op time surely on a CPU, and per op in "
                         "all, in the kernel and in user space (split by the scheduler's "
                         "ticks), and per KiB its read and write calls moved",
                         ["variant", "role", "ops", "op time on a CPU ≥", "on a CPU/op",
                          "system/op", "user/op", "per KiB"], rows))
    changes = [[label, role, CPU_STATS[c.stat][2], format_ns(c.baseline), format_ns(c.candidate),
                _pct(c.change), "-" if c.low is None or c.high is None
                else f"[{_pct(c.low)}, {_pct(c.high)}]"]
               for label, roles in section.cpu_changes.items()
               for role, stats in roles.items() for c in stats]
    if changes:
        out.append(_part(f"the CPU side against {section.baseline}: each statistic's change and "
                         "its 95% interval (none from one short run a side)",
                         ["variant", "role", "statistic", section.baseline, "candidate", "change",
                          "95% interval"], changes))
    return out


def _kib(role: RoleCpu) -> float | None:
    return role.bytes_moved / 1024 if role.bytes_moved else None


def _profile_sections(section: WhereSection) -> list[Section]:
    """The profile monitor's functions per role, and the perfstat counters per op."""
    out = []
    for label, roles in section.profiles.items():
        rows = [[role.role, _share(f.share), f"{f.samples:,}", f.function, f.caller or "-"]
                for role in roles.values() for f in role.top]
        if rows:
            event = next(iter(roles.values())).event
            out.append(_part(f"on-CPU functions: {label} (profile monitor, {event} samples; "
                             "each sample in its innermost frame, the function running)",
                             ["role", "share", "samples", "function", "called from"], rows))
    base = section.perf_counters.get(section.baseline, [])
    for label, rows in section.perf_counters.items():
        if label == section.baseline and len(section.perf_counters) > 1:
            continue
        body = _counter_rows(base if label != section.baseline else [], rows)
        if body:
            names = [section.baseline, label] if label != section.baseline else [label]
            title = ("CPU counters per op (perfstat monitor: perf stat per thread, added up by "
                     "worker role, over every op of the role)")
            header = ["role", "counter", *[f"{_short(n, 9)}/op" for n in names]]
            out.append(_part(title, header + (["change"] if len(names) > 1 else []), body))
    return out


def _counter_rows(base: list[RoleCounters], here: list[RoleCounters]) -> list[list[str]]:
    by_role = {row.role: row for row in base}
    body = []
    for row in here:
        if not row.per_op:
            continue
        other = by_role.get(row.role)
        for event, value in row.per_op.items():
            cells_ = [row.role, EVENT_WORDS.get(event, event), _per_op(event, value)]
            if base:
                before = other.per_op.get(event) if other else None
                cells_ += [_per_op(event, before),
                           _pct(value / before - 1) if before else "-"]
            body.append(cells_)
        if row.ipc is not None:
            before_ipc = other.ipc if other else None
            body.append([row.role, "instructions per cycle", _num(row.ipc, 2)]
                        + ([_num(before_ipc, 2),
                            _pct(row.ipc / before_ipc - 1) if before_ipc else "-"]
                           if base else []))
    if base:     # baseline first, as every table of the section
        body = [[r[0], r[1], r[3], r[2], r[4]] for r in body]
    return body


def _per_op(event: str, value: float | None) -> str:
    if value is None:
        return "-"
    return format_ns(value) if event == TASK_CLOCK else _num(value, 3)


def _short_stack(stack: str, frames: int = 5) -> str:
    parts = [p for p in stack.split(";") if p not in ("entry_SYSCALL_64_after_hwframe",
                                                        "do_syscall_64")]
    return ("...;" if len(parts) > frames else "") + ";".join(parts[-frames:])


def _histogram_sections(section: WhereSection) -> list[Section]:
    """bcc-style log2 histograms of the traced latencies, kept as lines."""
    out = []
    for label, groups in section.histograms.items():
        for name, rows in groups.items():
            if not rows:
                continue
            peak = max(r.count for r in rows) or 1
            lines = [f"{r.lo_ns // 1000:>10} -> {r.hi_ns // 1000 - 1:<10} : "
                     f"{r.count:<8} |{'*' * round(HIST_BAR * r.count / peak):<{HIST_BAR}}|"
                     for r in rows]
            out.append(Section(f"{name} latency, {label} (usecs : count)", [],
                               preformatted=lines, level=3))
    return out


def merged_warnings(warnings: list[str], variants: list[str]) -> list[str]:
    """Each warning once: the same sentence about several variants ('unlimited: taskstats
    accounted ...', 'memcg-96M: taskstats accounted ...') becomes one naming them all."""
    merged: dict[str, list[str]] = {}
    for warning in warnings:
        label, sep, rest = warning.partition(": ")
        if not sep or label not in variants:
            label, rest = "", warning
        names = merged.setdefault(rest, [])
        if label and label not in names:
            names.append(label)
    return [f"{', '.join(names)}: {rest}" if names else rest for rest, names in merged.items()]


def where_chapter(section: WhereSection) -> Chapter:
    """The whole section: the explanations, then its tables, histograms and the monitors that
    were not used, and last its warnings (the kernel's accounting faults), each once."""
    findings = [e.text + (f"  [{e.variant}]" if len(section.variants) > 2 else "")
                for e in section.explanations]
    skipped = [f"{s.variant}: {s.monitor} skipped: {s.reason}" for s in section.skipped]
    parts = _table_sections(section) + _histogram_sections(section)
    if skipped:
        parts.append(Section("monitors not used", [], items=skipped, level=3))
    return Chapter("Where did the time go", parts, [], findings,
                   css_class="stallbench-where",
                   closing=merged_warnings(section.warnings, section.variants))
