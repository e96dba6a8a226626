"""The pressure stall information (PSI) of a variant's runs: each scope's and resource's mean
stall per run and its share of the runs' time. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .section import Pressure


def pressure(per_run: Sequence[Mapping[str, int]], seconds: float) -> dict[str, Pressure]:
    """Over a variant's runs: mean stall per run and its share of all the runs' time."""
    if not per_run:
        return {}
    keys = sorted({k for run in per_run for k in run})
    seconds = seconds or 1.0
    return {key: Pressure(sum(r.get(key, 0) for r in per_run) / len(per_run),
                          sum(r.get(key, 0) for r in per_run) / 1e9 / seconds) for key in keys}
