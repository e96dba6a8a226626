"""A series as JSON (`series --format json`) and CSV: the same numbers as its tables, latencies
in ns. The JSON's `change_points` hold, each, `metric` ("op:stat"), `variant` (the first point
after the change), `change`, `low`, `high` (the change across it and its 95% interval, as ratios
- 1) and `verdict`, beside `before`, `p_value` (adjusted for the scan), `new` (after --since)
and `bisect` (the `stallbench bisect --git` command, where both sides carry commits)."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from ..analysis.change import Change, excludes_zero
from ..analysis.quantiles import RATE
from ..compare.seriesmodel import Series, SeriesOp
from ..core.version import __version__
from .series import bisect_argv
from .wording import json_number

SCHEMA_VERSION = 1


def _change(change: Change | None) -> dict[str, Any] | None:
    if change is None:
        return None
    return {"change": json_number(change.change), "low": json_number(change.low),
            "high": json_number(change.high), "p_value": json_number(change.p_value),
            "excludes_zero": excludes_zero(change), "note": change.note}


def _stat_values(series: Series, op: SeriesOp, i: int) -> dict[str, Any]:
    stats = op.stats[i]
    out: dict[str, Any] = {"samples": stats.samples, "rate": json_number(stats.rate)}
    for stat in series.stats:
        if stat.key != RATE.key:
            out[stat.json_key] = json_number(stats.values.get(stat.key))
    changes = op.changes[i]
    if changes is not None:
        out["change"] = {stat.key: _change(changes.get(stat.key)) for stat in series.stats}
    return out


def to_json(series: Series) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION, "stallbench_version": __version__,
        "workload": series.workload, "by": series.by,
        "baseline": series.points[series.baseline].label,
        "points": [{"label": p.label, "variants": p.variants, "runs": len(p.runs),
                    "run_dirs": [str(r.path) for r in p.runs], "kernels": p.kernels,
                    "hosts": p.hosts, "first_utc": p.first_utc, "commit": p.commit,
                    "plan_hashes": p.plan_hashes} for p in series.points],
        "ops": {op.op: {"kind": op.kind,
                        "points": {label: _stat_values(series, op, i)
                                   for i, label in enumerate(series.labels)}}
                for op in series.ops},
        "metrics": series.metrics,
        "noise_profile": series.noise_profile,
        "notes": series.notes,
        "change_points": [{"metric": c.metric, "variant": c.variant, "change": c.change.change,
                           "low": c.change.low, "high": c.change.high, "verdict": c.verdict,
                           "note": c.change.note,
                           "before": c.before, "p_value": c.p_scan, "new": c.new,
                           "bisect": bisect_argv(c) if c.bisect else None}
                          for c in series.change_points],
        "problems": series.problems,
    }


def render_json(series: Series) -> str:
    return json.dumps(to_json(series), indent=1, ensure_ascii=False) + "\n"


CSV_COLUMNS = ("op", "stat", "point", "value", "unit", "change", "low", "high",
               "excludes_zero", "change_point")


def series_rows(series: Series) -> list[dict[str, Any]]:
    """One row per op, statistic and point (CSV_COLUMNS); change_point: the verdict of a
    change point of that statistic at that point."""
    marks = {(c.op, c.stat, c.index): c.verdict for c in series.change_points}
    rows = []
    for op in series.ops:
        for i, label in enumerate(series.labels):
            rows.append(dict(zip(CSV_COLUMNS, (op.op, "samples", label, op.stats[i].samples,
                                               "ops", None, None, None, None, None),
                                 strict=True)))
            for stat in series.stats:
                value = op.stats[i].rate if stat.key == RATE.key else \
                    op.stats[i].values.get(stat.key)
                change = (op.changes[i] or {}).get(stat.key)
                numbers = [None] * 3 if change is None else \
                    [change.change, change.low, change.high]
                rows.append(dict(zip(CSV_COLUMNS, (
                    op.op, stat.key, label, value, stat.unit, *numbers,
                    None if change is None else excludes_zero(change),
                    marks.get((op.op, stat.key, i))), strict=True)))
    return rows


def render_csv(series: Series) -> str:
    """series_rows as CSV (an empty cell where there is no value)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in series_rows(series):
        writer.writerow(["" if row[c] is None else row[c] for c in CSV_COLUMNS])
    return out.getvalue()
