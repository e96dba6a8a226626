"""A noise profile from A/A runs (`stallbench calibrate`): every op's and statistic's run-to-run
spread beyond each run's own noise (analysis/noise.py), computed with the same per-run
statistics as the comparison's intervals (loading.op_side)."""

from __future__ import annotations

from ..analysis import interference
from ..analysis import noise as nz
from ..analysis.quantiles import percentiles
from ..errors import UsageError
from ..hostfacts import utc_now
from ..noiseprofiles import run_settings, run_shape
from ..runselect import Resolved
from .loading import load_variant, op_names, op_side


def profile_from_runs(resolved: Resolved) -> nz.NoiseProfile:
    """The profile of one variant's runs (all of one shape on one host)."""
    runs = resolved.runs
    if len(runs) < nz.MIN_CALIBRATION_RUNS:
        raise UsageError(f"calibrate: {len(runs)} run(s) of {resolved.label}; a noise profile "
                         f"needs at least {nz.MIN_CALIBRATION_RUNS} (use --runs 6 or more)")
    shapes = {run_shape(r.meta) for r in runs}
    hosts = {r.meta.host or "" for r in runs}
    if len(shapes) > 1 or len(hosts) > 1:
        raise UsageError(f"calibrate: the runs of {resolved.label} differ in workload options, "
                         "settings or host; calibrate one shape on one host at a time")
    variant, _ = load_variant(resolved)
    stats = percentiles()
    probabilities = [s.probability for s in stats]
    table: dict[str, dict[str, list[float]]] = {}
    for name in op_names([variant]):
        side = op_side(name, variant)
        if side.stats.samples == 0:
            continue
        columns = {"rate": side.rate_statistics(), "mean": side.mean_statistics()}
        per_run = side.quantile_statistics(probabilities)
        for j, stat in enumerate(stats):
            columns[stat.key] = [run[j] for run in per_run]
        entries = {}
        for key, run_stats in columns.items():
            measured = nz.run_to_run(run_stats)
            if measured is not None:
                entries[key] = [measured[0], float(measured[1]), measured[2]]
        if entries:
            table[name] = entries
    load = interference.outside_load([r.meta.machine_load for r in runs])
    first = runs[0].meta
    return nz.NoiseProfile(
        host=first.host or "", workload=first.workload, shape=run_shape(first),
        params=dict(first.params or {}), settings=run_settings(first), variant=resolved.label,
        runs=len(runs),
        created_utc=utc_now(), outside_cpus=load.mean_cpus if load else None,
        duration_s=float(first.duration_planned_s or 0.0), table=table)
