"""A noise profile from A/A runs (`stallbench calibrate`): every op's and statistic's run-to-run
spread beyond each run's own noise, or with --duet the spread of A/A duet pairs
(analysis/noise.py), computed with the same per-run statistics as the comparison's intervals
(loading.op_side)."""

from __future__ import annotations

from ..analysis import interference, paired
from ..analysis import noise as nz
from ..analysis.quantiles import percentiles
from ..analysis.runstats import RunStatistic
from ..core.errors import UsageError
from ..core.hostfacts import utc_now
from ..results.noiseprofiles import run_settings, run_shape
from ..results.runselect import Resolved
from .loading import OpSide, load_variant, op_names, op_side


def _one_shape(resolved: Resolved) -> None:
    runs = resolved.runs
    if len(runs) < nz.MIN_CALIBRATION_RUNS:
        raise UsageError(f"calibrate: {len(runs)} run(s) of {resolved.label}; a noise profile "
                         f"needs at least {nz.MIN_CALIBRATION_RUNS} (use --runs 6 or more)")
    shapes = {run_shape(r.meta) for r in runs}
    hosts = {r.meta.host or "" for r in runs}
    if len(shapes) > 1 or len(hosts) > 1:
        raise UsageError(f"calibrate: the runs of {resolved.label} differ in workload options, "
                         "settings or host; calibrate one shape on one host at a time")


def _statistics(side: OpSide) -> dict[str, list[RunStatistic]]:
    """Each statistic's per-run values of one op's side (the comparison's own)."""
    stats = percentiles()
    columns = {"rate": side.rate_statistics(), "mean": side.mean_statistics()}
    per_run = side.quantile_statistics([s.probability for s in stats])
    for j, stat in enumerate(stats):
        columns[stat.key] = [run[j] for run in per_run]
    return columns


def profile_from_runs(resolved: Resolved) -> nz.NoiseProfile:
    """The profile of one variant's runs (all of one shape on one host)."""
    _one_shape(resolved)
    variant, _ = load_variant(resolved)
    table: dict[str, dict[str, list[float]]] = {}
    for name in op_names([variant]):
        side = op_side(name, variant)
        if side.stats.samples == 0:
            continue
        entries = {}
        for key, run_stats in _statistics(side).items():
            measured = nz.run_to_run(run_stats)
            if measured is not None:
                entries[key] = [measured[0], float(measured[1]), measured[2]]
        if entries:
            table[name] = entries
    return _profile(resolved, table, False)


def duet_profile_from_runs(resolved: Resolved, twin: Resolved) -> nz.NoiseProfile:
    """The duet profile of A/A duets: `resolved` and `twin` are the two sides (one shape on one
    host), their runs paired by round (run.json `duet`)."""
    _one_shape(resolved)
    pairs = paired.pair_runs([r.meta.duet for r in resolved.runs],
                             [r.meta.duet for r in twin.runs])
    if pairs is None:
        raise UsageError(f"calibrate --duet: the runs of {resolved.label} and {twin.label} "
                         "are not the two sides of the same duet rounds")
    variant, _ = load_variant(resolved)
    other, _ = load_variant(twin)
    table: dict[str, dict[str, list[float]]] = {}
    for name in op_names([variant, other]):
        a, b = op_side(name, variant), op_side(name, other)
        if a.stats.samples == 0 or b.stats.samples == 0:
            continue
        columns_a, columns_b = _statistics(a), _statistics(b)
        entries = {}
        for key, stats_a in columns_a.items():
            measured = nz.pair_to_pair([stats_a[i] for i, _ in pairs],
                                       [columns_b[key][j] for _, j in pairs])
            if measured is not None:
                entries[key] = [measured[0], float(measured[1]), 0.0]
        if entries:
            table[name] = entries
    return _profile(resolved, table, True, len(pairs))


def _profile(resolved: Resolved, table: dict[str, dict[str, list[float]]], duet: bool,
             count: int | None = None) -> nz.NoiseProfile:
    runs = resolved.runs
    load = interference.outside_load([r.meta.machine_load for r in runs])
    first = runs[0].meta
    return nz.NoiseProfile(
        host=first.host or "", workload=first.workload, shape=run_shape(first),
        params=dict(first.params or {}), settings=run_settings(first), variant=resolved.label,
        runs=count if count is not None else len(runs),
        created_utc=utc_now(), outside_cpus=load.mean_cpus if load else None,
        duration_s=float(first.duration_planned_s or 0.0), table=table, duet=duet)
