"""Rendering of `stallbench show`: a run's or variant's metadata and per-op table."""

from __future__ import annotations

import json
import textwrap
from typing import Any

from ..analysis.display import TimeUnit, choose_time_unit, format_size
from ..analysis.quantiles import latency_stats
from ..compare.show import RunsSummary
from .jsonout import stats_dict
from .tables import RIGHT, Cell, Column, Table, cells
from .text import table_lines
from .wording import JSON_KEYS, format_count, format_rate, format_seconds, warmup_phrase

_STATS = tuple(s.key for s in latency_stats())
_HEAD = tuple(s.label for s in latency_stats())
WIDTH = 100
# environment values in bytes (run.json keeps bytes; shown in KiB/MiB/GiB)
_SIZE_KEYS = {"limit", "limit_requested", "peak", "size", "memory_limit", "memory_available",
              "space_needed", "reserved", "requested", "available_after", "hugepage_size"}


def _value(key: str, value: Any) -> str:
    if isinstance(value, bool) or value is None or value == "":
        return str(value).lower() if isinstance(value, bool) else "-"
    if key in _SIZE_KEYS and isinstance(value, int):
        return format_size(value)
    if isinstance(value, dict):
        return "; ".join(f"{k}={_value(k, v)}" for k, v in value.items()) or "none"
    if isinstance(value, (list, tuple)):
        return ", ".join(_value(key, v) for v in value) or "none"
    return str(value)


def environment_lines(environment: dict[str, Any], indent: str = "    ") -> list[str]:
    """The environment of a run as wrapped `key: value` lines (nested tables on one line each,
    `name=value` pairs separated by `;`), nothing cut."""
    lines = [f"{indent}environment"]
    for key, value in environment.items():
        lines += textwrap.wrap(f"{key}: {_value(key, value)}", WIDTH,
                               initial_indent=indent + "  ", subsequent_indent=indent + "    ",
                               break_long_words=False, break_on_hyphens=False)
    return lines



def render_text(summary: RunsSummary) -> str:
    info = summary.variant
    lines = [f"variant {info.label}: {len(info.runs)} run(s)"]
    for run, meta in zip(info.runs, summary.metas, strict=True):
        rusage = meta.rusage or {}
        cpu = ", ".join(f"{name} {format_seconds(rusage.get(key))} s" for name, key in
                        (("user", "user_s"), ("system", "system_s"), ("elapsed", "elapsed_s"))
                        if isinstance(rusage.get(key), (int, float)))
        lines.append(f"  iteration {run.iteration}: {run.status}; {run.path}")
        lines.append(f"    workload {meta.workload}, {run.duration_s:.1f} s, started "
                     f"{meta.start_utc}, host {meta.host}")
        warmup = warmup_phrase([run])
        if warmup:
            lines.append(f"    warm-up {warmup}")
        kernel = meta.kernel
        if kernel:
            lines.append(f"    kernel {kernel.get('release')} {kernel.get('machine', '')}")
        if meta.params:
            lines.append("    params " + ", ".join(f"{k}={v}" for k, v in meta.params.items()))
        if meta.environment:
            lines += environment_lines(meta.environment)
        if cpu:
            lines.append(f"    cpu {cpu}")
        if meta.monitors:
            lines.append("    monitors " + ", ".join(
                f"{name} ({(m or {}).get('status', '?')})" for name, m in meta.monitors.items()))
        for note in meta.notes:    # a note is as long as it needs to be: wrapped, nothing cut
            lines += textwrap.wrap(f"note: {note}", WIDTH, initial_indent="    ",
                                   subsequent_indent="      ", break_long_words=False,
                                   break_on_hyphens=False)
    lines.append("")
    lines.append("latency in each row's unit; a value far from the row's carries its own "
                 "(3.19µs)")
    lines += table_lines(ops_table(summary), WIDTH)
    if any(s.unresolved for s in summary.ops.values()):
        lines.append("n/r: fewer than 10 samples at or beyond the percentile")
    return "\n".join(lines) + "\n"


_CELL = 6


def ops_table(summary: RunsSummary) -> Table:
    """Each op's samples, rate, and statistics in the row's own unit."""
    rows = []
    for name, stats in summary.ops.items():
        if stats.samples == 0:
            rows.append([*cells(name, "0", "0.0", ""), Cell("no samples"),
                         *cells(*("" for _ in _STATS[1:]))])
            continue
        unit = _row_unit([stats.values[s] for s in _STATS
                          if s not in stats.unresolved and stats.values.get(s)])
        rows.append(cells(name, format_count(stats.samples), format_rate(stats.rate), unit.name,
                          *("n/r" if stat in stats.unresolved else _cell(stats.values[stat], unit)
                            for stat in _STATS)))
    return Table([Column("op", gap=0), Column("samples", RIGHT), Column("rate/s", RIGHT),
                  Column("unit", RIGHT, 4), *(Column(head, RIGHT, _CELL) for head in _HEAD)],
                 rows)


def _row_unit(values_ns: list[float]) -> TimeUnit:
    """The unit in which the row's typical value reads 1..9999 (each row its own)."""
    return choose_time_unit(values_ns)


def _number(value: float) -> str:
    if value >= 100:
        return f"{value:.0f}"
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def _cell(value_ns: float | None, unit: TimeUnit) -> str:
    """A value in the row's unit, with at least two significant digits; a value below 0.1 or
    of six digits and more in it carries its own unit (3.19µs in a row of ms)."""
    if value_ns is None:
        return "-"
    value = value_ns / unit.ns
    if value == 0 or 0.1 <= value < 100_000:
        return _number(value)
    name, scale = choose_time_unit([value_ns])
    return f"{_number(value_ns / scale)}{name}"


def render_json(summary: RunsSummary) -> str:
    data = {
        "variant": summary.label,
        "runs": [{"iteration": r.iteration, "path": r.path, "status": r.status,
                  "duration_s": r.duration_s, "meta": meta.to_json()}
                 for r, meta in zip(summary.variant.runs, summary.metas, strict=True)],
        "ops": {name: stats_dict(stats) for name, stats in summary.ops.items()},
        "keys": list(JSON_KEYS.values()),
    }
    return json.dumps(data, indent=1, default=str) + "\n"
