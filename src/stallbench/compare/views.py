"""Pictures of a comparison beyond its numbers: per op a latency-over-time heatmap of each
variant with PSI and reclaim/throttle time beside it, and the blocked-time and on-CPU profiles
of the baseline and each candidate for differential flame graphs. Loads monitor tables, calls
analysis/heatmap.py, blocked.py and cpuprofile.py; report/heatmap.py and report/flamegraph.py
draw them."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..analysis import heatmap as hm
from ..core.errors import RunDataError
from ..results.store import Run
from . import blocked, cpuprofile

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

    @cached_property
    def cpu_flames(self) -> list[tuple[blocked.Profile, blocked.Profile]]:
        """(baseline, candidate) on-CPU profiles (the profile monitor), where both have one."""
        pairs = []
        base = self._variants[0]
        try:
            base_profile = cpuprofile.profile(base.label, base.runs)
        except (RunDataError, pa.ArrowException, OSError) as exc:
            self.errors.append(f"on-CPU stacks: {exc}")
            return []
        for candidate in self._variants[1:] if base_profile is not None else []:
            try:
                other = cpuprofile.profile(candidate.label, candidate.runs)
            except (RunDataError, pa.ArrowException, OSError) as exc:
                self.errors.append(f"on-CPU stacks: {exc}")
                continue
            if other is not None:
                pairs.append((base_profile, other))
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
    table = run.trace_table(columns=["t_ns", "duration_ns", "category"])
    if table is None:
        return {}
    out = {}
    for category in ("reclaim", "throttle"):
        part = table.filter(pc.equal(table["category"], category))
        if part.num_rows:
            out[category] = hm.coverage(part["t_ns"].to_numpy(),
                                        part["duration_ns"].to_numpy(), edges)
    return out


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
    """variants: objects with .label, .runs (store.Run) and .summaries (analysis.summary
    RunSummary per run), as comparison.py holds them; the baseline first."""
    return Views(variants)


def _latency_ranges(variants: list[Any]) -> dict[str, tuple[int, int]]:
    """Per op the smallest and largest latency of every run (from the run summaries)."""
    ranges: dict[str, tuple[int, int]] = {}
    for v in variants:
        for summary in v.summaries:
            for name, op in summary.ops.items():
                used = op.block_count > 0
                if used.any():
                    lo, hi = int(op.block_min[used].min()), int(op.block_max[used].max())
                    old = ranges.get(name, (lo, hi))
                    ranges[name] = (min(old[0], lo), max(old[1], hi))
    return ranges


def _heatmaps(variants: list[Any]) -> list[OpHeatmaps]:
    """Ops read batch by batch (bounded memory), counted into shared edges per op."""
    # to the end of the longest run on its clock (the workers start after the clock)
    duration_ns = max((s.end_ns for v in variants for s in v.summaries), default=0)
    edges_t = hm.time_edges(float(duration_ns))
    ranges = _latency_ranges(variants)
    edges = {name: hm.latency_edges([np.array(r, dtype=np.int64)]) for name, r in ranges.items()}
    counts = {(v.label, name): np.zeros((len(edges_t) - 1, len(e) - 1), dtype=np.int64)
              for v in variants for name, e in edges.items()}
    for v in variants:
        for run in v.runs:
            for table in run.iter_ops(columns=["op", "start_ns", "latency_ns"]):
                op_col = table.column("op")
                if not pa.types.is_dictionary(op_col.type):
                    op_col = op_col.dictionary_encode()
                chunk = pa.concat_arrays(op_col.unify_dictionaries().chunks)
                codes = chunk.indices.to_numpy(zero_copy_only=False)
                start = table.column("start_ns").to_numpy()
                latency = table.column("latency_ns").to_numpy()
                for code, name in enumerate(chunk.dictionary.to_pylist()):
                    mine = codes == code
                    if name in edges and mine.any():
                        counts[(v.label, name)] += hm.heatmap(start[mine], latency[mine],
                                                              edges_t, edges[name]).counts
    overlays = []
    for v in variants:
        psi = [_psi(run, edges_t) for run in v.runs]
        spans = [_intervals(run, edges_t) for run in v.runs]
        overlays.append((_mean(psi, len(v.runs)), _mean(spans, len(v.runs))))
    heatmaps = []
    for name in edges:
        items = [VariantHeatmap(v.label, len(v.runs),
                                hm.Heatmap(edges_t, edges[name], counts[(v.label, name)]),
                                psi, spans)
                 for v, (psi, spans) in zip(variants, overlays, strict=True)]
        heatmaps.append(OpHeatmaps(name, items))
    return heatmaps
