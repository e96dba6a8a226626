"""A comparison's and a series' numbers as columnar tables (pyarrow), for notebooks and
scripts (stallbench.load_comparison / load_series, api/): the same numbers as the reports,
latencies in ns, one row per op, variant and statistic, so they filter and pivot as frames.

Nothing is computed: every value is a field of the Comparison or Series; the calls are the
headline's (headline.calls), with its cause."""

from __future__ import annotations

from typing import Any

from ..analysis.quantiles import RATE
from ..compare.model import Comparison
from ..compare.seriesmodel import Series
from .headline import calls, causes
from .seriesdata import series_rows
from .wording import json_number, verdict_word

_SAMPLES = "samples"


def _unit(stat_key: str) -> str:
    return "ops/s" if stat_key == RATE.key else "ns"


def comparison_rows(comparison: Comparison) -> dict[str, list[dict[str, Any]]]:
    """{table name: rows}: `stats` (op, kind, variant, stat, value, unit), `changes` (op, kind,
    candidate, stat, change, low, high, p_value, p_adjusted, verdict, verdict_text, note) and
    `calls` (the headline's: candidate, op, stat, verdict, change, low, high, flag, cause)."""
    stats, changes, called = [], [], []
    for op in comparison.ops:
        for label in comparison.labels:
            side = op.stats[label]
            stats.append({"op": op.op, "kind": op.kind, "variant": label, "stat": _SAMPLES,
                          "value": float(side.samples), "unit": "ops"})
            for stat in comparison.stats:
                value = side.rate if stat.key == RATE.key else side.values.get(stat.key)
                stats.append({"op": op.op, "kind": op.kind, "variant": label,
                              "stat": stat.key, "value": json_number(value),
                              "unit": _unit(stat.key)})
        for label in comparison.candidates:
            for stat in comparison.stats:
                change = op.changes[label].get(stat.key)
                if change is None:
                    continue
                changes.append({
                    "op": op.op, "kind": op.kind, "candidate": label, "stat": stat.key,
                    "change": json_number(change.change), "low": json_number(change.low),
                    "high": json_number(change.high), "p_value": json_number(change.p_value),
                    "p_adjusted": json_number(change.p_adjusted),
                    "verdict": str(change.verdict), "verdict_text": verdict_word(change),
                    "note": change.note})
    for label in comparison.candidates:
        found = calls(comparison, label)
        why = dict(causes(comparison, label, found))
        for call in found:
            called.append({"candidate": label, "op": call.op.op, "stat": call.stat.key,
                           "verdict": str(call.change.verdict),
                           "change": json_number(call.change.change),
                           "low": json_number(call.change.low),
                           "high": json_number(call.change.high), "flag": call.flag or None,
                           "cause": why.get(call.op.op)})
    return {"stats": stats, "changes": changes, "calls": called}


def series_tables_rows(series: Series) -> dict[str, list[dict[str, Any]]]:
    """{table name: rows}: `points` (as `series --format csv`: op, stat, point, value, unit,
    change, low, high, excludes_zero, change_point) and `change_points` (metric, op, stat,
    variant, change, low, high, verdict, note, before, p_value, new)."""
    change_points = [{"metric": c.metric, "op": c.op, "stat": c.stat, "variant": c.variant,
                      "change": json_number(c.change.change), "low": json_number(c.change.low),
                      "high": json_number(c.change.high), "verdict": c.verdict,
                      "note": c.change.note, "before": c.before,
                      "p_value": json_number(c.p_scan), "new": c.new}
                     for c in series.change_points]
    return {"points": series_rows(series), "change_points": change_points}


def arrow_tables(rows: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """{name: pyarrow.Table} of comparison_rows or series_tables_rows."""
    import pyarrow as pa

    return {name: pa.Table.from_pylist(table) for name, table in rows.items()}
