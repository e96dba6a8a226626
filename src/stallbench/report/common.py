"""Formatting shared by the renderers: units, changes, intervals, words for missing values."""

from __future__ import annotations

import math
from typing import Any

from ..analysis.intervals import Change
from ..analysis.quantiles import LATENCY_STATS, PERCENTILES
from ..comparison import Comparison, OpComparison, OpStats
from ..units import choose_time_unit, format_ns

NO_SAMPLES = "no samples"
NOT_RESOLVABLE = "n/r"
STAT_LABELS = {"rate": "rate/s", "min": "min", "p50": "p50", "p90": "p90", "p95": "p95",
               "p99": "p99", "p999": "p99.9", "max": "max", "mean": "mean"}
JSON_KEYS = {"min": "min_ns", "p50": "p50_ns", "p90": "p90_ns", "p95": "p95_ns",
             "p99": "p99_ns", "p999": "p999_ns", "max": "max_ns", "mean": "mean_ns",
             "rate": "rate"}
PERCENTILE_STATS = {stat for stat, _ in PERCENTILES}
ROW_STATS = ("rate", *LATENCY_STATS)


def op_unit(op: OpComparison) -> tuple[str, int]:
    """One time unit for the whole table of an op, chosen from its typical values."""
    values = [s.values[stat] for s in op.stats.values() for stat in LATENCY_STATS
              if s.values.get(stat)]
    return choose_time_unit(values)


def stat_cell(stats: OpStats, stat: str, unit: tuple[str, int]) -> str:
    """The value of a statistic as shown in tables; words where there is no number."""
    if stats.samples == 0:
        return "0.0" if stat == "rate" and stats.rate is not None else NO_SAMPLES
    if stat == "rate":
        return format_rate(stats.rate)
    if stat in stats.unresolved:
        return f"{NOT_RESOLVABLE} ({stats.unresolved[stat]}≥)"
    return format_ns(stats.values[stat], unit)


def format_rate(rate: float | None) -> str:
    if rate is None or not math.isfinite(rate):
        return "-"
    if rate >= 100:
        return f"{rate:,.0f}"
    return f"{rate:.2f}" if rate < 10 else f"{rate:.1f}"


def format_count(n: int) -> str:
    return f"{n:,}"


def format_percent(x: float | None) -> str:
    """+ means the number got larger."""
    if x is None or not math.isfinite(x):
        return "-"
    percent = x * 100
    if abs(percent) >= 100:
        return f"{percent:+.0f}%"
    return f"{percent:+.1f}%"


def format_interval(change: Change) -> str:
    if change.low is None or change.high is None:
        return ""
    return f"[{format_percent(change.low)}, {format_percent(change.high)}]"


def change_cell(change: Change | None, stats_base: OpStats, stats_cand: OpStats,
                stat: str) -> tuple[str, str, str]:
    """(change, interval, verdict-or-note) columns of one row."""
    if change is None:
        return "", "", ""
    if change.change is None:
        note = change.note or ""
        if note == "no samples" or stats_base.samples == 0 or stats_cand.samples == 0:
            return "", "", NO_SAMPLES
        if note == "not resolvable":
            return NOT_RESOLVABLE, "", "not resolvable"
        return "-", "", note
    word = change.verdict if change.verdict != "n/a" else (change.note or "no interval")
    return format_percent(change.change), format_interval(change), word


def json_number(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def method_sentence(comparison: Comparison, candidate: str) -> str:
    return comparison.method[candidate]


def format_seconds(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:.2f}"
