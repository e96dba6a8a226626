"""Pictures of a comparison beyond its numbers: per op a latency-over-time heatmap of each
variant with PSI and reclaim/throttle time beside it, and the blocked-time profiles of the
baseline and each candidate for a differential flame graph. Loads monitor tables, calls
analysis/heatmap.py and blocked.py; report/heatmap.py and report/flamegraph.py draw them."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import blocked
from .analysis import heatmap as hm
from .errors import RunDataError
from .store import OpArrays, Run

TRACE_TABLES = ("trace_full", "trace")
OVERLAY_PSI = ("memory", "io")


@dataclass
class VariantHeatmap:
    label: str
    runs: int
    heatmap: hm.Heatmap
    psi: dict[str, np.ndarray] = field(default_factory=dict)       # "memory some" -> 0..1
    intervals: dict[str, np.ndarray] = field(default_factory=dict)  # "reclaim" -> threads


@dataclass
class OpHeatmaps:
    op: str
    variants: list[VariantHeatmap]


class Views:
    """Computed when first asked for (a text report never pays for them)."""

    def __init__(self, variants: list[Any]):
        self._variants = variants
        self.errors: list[str] = []

    @cached_property
    def heatmaps(self) -> list[OpHeatmaps]:
        try:
            return _heatmaps(self._variants)
        except (RunDataError, pa.ArrowException, OSError, ValueError) as exc:
            self.errors.append(f"latency heatmaps: {exc}")
            return []

    @cached_property
    def flames(self) -> list[tuple[blocked.Profile, blocked.Profile]]:
        """(baseline, candidate) blocked-time profiles from the same monitor."""
        pairs = []
        base = self._variants[0]
        for candidate in self._variants[1:]:
            try:
                pair = blocked.profile_pair(base.label, base.runs, candidate.label,
                                            candidate.runs)
            except (RunDataError, pa.ArrowException, OSError) as exc:
                self.errors.append(f"blocked stacks: {exc}")
                continue
            if pair is not None:
                pairs.append(pair)
        return pairs


def _psi(run: Run, edges: np.ndarray) -> dict[str, np.ndarray]:
    table = run.monitor_table("psi")
    if table is None or table.num_rows == 0:
        return {}
    scopes = set(table["scope"].to_pylist())
    scope = "cgroup" if "cgroup" in scopes else "system"
    out = {}
    for resource in OVERLAY_PSI:
        mask = pc.and_(pc.and_(pc.equal(table["scope"], scope),
                               pc.equal(table["resource"], resource)),
                       pc.equal(table["kind"], "some"))
        part = table.filter(mask)
        if part.num_rows >= 2:
            out[f"{scope} {resource} some"] = hm.stalled_share(
                part["t_ns"].to_numpy(), part["total_ns"].to_numpy(), edges)
    return out


def _intervals(run: Run, edges: np.ndarray) -> dict[str, np.ndarray]:
    for name in TRACE_TABLES:
        table = run.monitor_table(name)
        if table is None:
            continue
        out = {}
        for category in ("reclaim", "throttle"):
            part = table.filter(pc.equal(table["category"], category))
            if part.num_rows:
                out[category] = hm.coverage(part["t_ns"].to_numpy(),
                                            part["duration_ns"].to_numpy(), edges)
        return out
    return {}


def _mean(parts: list[dict[str, np.ndarray]], runs: int) -> dict[str, np.ndarray]:
    keys = sorted({k for p in parts for k in p})
    out = {}
    for key in keys:
        stack = np.vstack([p.get(key, np.full(len(next(iter(p.values()))), np.nan))
                           for p in parts if p])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a bin no run sampled: NaN
            out[key] = np.nansum(stack, axis=0) / runs if key in ("reclaim", "throttle") \
                else np.nanmean(stack, axis=0)
    return out


def build(variants: list[Any]) -> Views:
    """variants: objects with .label, .runs (store.Run), .ops (per run {op: OpArrays}) and
    .durations (s), as comparison.py holds them; the baseline first."""
    return Views(variants)


def _heatmaps(variants: list[Any]) -> list[OpHeatmaps]:
    heatmaps: list[OpHeatmaps] = []
    duration_ns = max((d for v in variants for d in v.durations), default=0.0) * 1e9
    names = list(dict.fromkeys(k for v in variants for o in v.ops for k in o))
    edges_t = hm.time_edges(duration_ns)
    overlays = []
    for v in variants:
        psi = [_psi(run, edges_t) for run in v.runs]
        spans = [_intervals(run, edges_t) for run in v.runs]
        overlays.append((_mean(psi, len(v.runs)), _mean(spans, len(v.runs))))
    for name in names:
        per_variant: list[list[OpArrays]] = [[o[name] for o in v.ops if name in o]
                                             for v in variants]
        lat = [a.latency_ns for arrays in per_variant for a in arrays]
        if not any(x.size for x in lat):
            continue
        edges_l = hm.latency_edges(lat)
        items = []
        for v, arrays, (psi, spans) in zip(variants, per_variant, overlays, strict=True):
            counts = hm.heatmap(np.empty(0), np.empty(0), edges_t, edges_l)
            for a in arrays:
                counts.counts += hm.heatmap(a.start_ns, a.latency_ns, edges_t, edges_l).counts
            items.append(VariantHeatmap(v.label, len(v.runs), counts, psi, spans))
        heatmaps.append(OpHeatmaps(name, items))
    return heatmaps
