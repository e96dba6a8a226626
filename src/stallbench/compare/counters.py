"""The counters monitor's timelines of a comparison (its `counters`): the first run's table per
variant, counters as per-second rates between samples, gauges as they are
(analysis/montables.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from ..analysis.montables import counter_series
from ..core.errors import UsageError
from ..monitors.counters import COUNTERS
from .loading import VariantRuns

COUNTER_POINTS = 400     # per counter timeline (a 30-minute run samples 1800 times)


def counter_timelines(variants: list[VariantRuns]) -> dict[str, dict[str, dict[str, Any]]]:
    """First run's `counters` monitor table per variant: column -> {t_s, values, kind}.

    The columns the counters monitor declares cumulative become per-second rates between
    samples; the gauges (such as free pages) are kept as they are (analysis/montables.py)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for v in variants:
        try:
            table = v.runs[0].monitor_table("counters")
        except UsageError:
            continue
        if table is None or "t_ns" not in table.column_names or table.num_rows < 2:
            continue
        t = table.column("t_ns").to_numpy(zero_copy_only=False).astype(np.float64) / 1e9
        columns: dict[str, dict[str, Any]] = {}
        for name in table.column_names:
            if name == "t_ns":
                continue
            try:
                values = table.column(name).to_numpy(zero_copy_only=False).astype(np.float64)
            except (TypeError, ValueError, NotImplementedError, pa.ArrowException):
                continue
            track = counter_series(t, values, COUNTERS.is_counter(name), COUNTER_POINTS)
            if track is not None:
                columns[name] = track
        out[v.label] = columns
    return out
