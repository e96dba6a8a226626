"""A series: the runs of one workload shape as points along an axis (the variants in the order
given, kernel releases as versions, the runs' dates, or a plan key's values), each op's
statistics per point with their change against the baseline point, and the change points of
the statistics that decide (analysis/changepoints.py).

Every number comes from the runs' summaries, as in compare (loading.py: op_side; changes.py:
compare_op for each point against the baseline, statistic_prior for the change points), so
memory does not grow with the number of operations. seriesmodel.py holds the records."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import numpy as np

from ..analysis import changepoints, interference
from ..analysis import histogram as hist
from ..analysis import intervals as iv
from ..analysis.axis import axis_order
from ..analysis.noise import NoiseProfile
from ..analysis.quantiles import DECIDING_STATS, RATE, resolvable, stat_named
from ..analysis.summary import RESPONSE_SUFFIX
from ..core.errors import UsageError
from ..results.guestnote import guest_note
from ..results.runselect import Resolved
from ..results.store import Run
from . import verdicts
from .changes import compare_op, statistic_prior
from .loading import OpSide, load_variant, op_names, op_side
from .model import CompareOptions
from .seriesmodel import (
    BY_DATE,
    BY_KERNEL,
    BY_ORDER,
    MIN_POINTS,
    Series,
    SeriesChange,
    SeriesOp,
    SeriesOptions,
    SeriesPoint,
    row_percents,
)


def build_series(resolved: list[Resolved], options: SeriesOptions) -> Series:
    """The series of these variants' runs along options.by (see the module docstring);
    UsageError (one line) for a series that cannot be read as one."""
    runs = [run for r in resolved for run in r.runs]
    _check_shape(runs, options.by)
    points = _points(resolved, options.by)
    if len(points) < MIN_POINTS:
        raise UsageError(f"a series needs at least {MIN_POINTS} points along --by "
                         f"{options.by}; these runs give {len(points)} "
                         f"({', '.join(p.label for p in points)})")
    baseline = _baseline_index(points, options.baseline)
    compare_options = CompareOptions(noise=options.noise, explain=False,
                                     percentiles=row_percents(options.metrics),
                                     metrics=options.metrics,
                                     noise_profile=_noise_profile(points, baseline))
    variants = [load_variant(Resolved(p.label, p.runs, []))[0] for p in points]
    series = Series(workload=runs[0].workload, by=options.by, points=points,
                    baseline=baseline, percents=compare_options.percentiles,
                    metrics=[], problems=[p for r in resolved for p in r.problems],
                    noise_profile=compare_options.noise_profile.describe()
                    if compare_options.noise_profile else None)
    emulated = [p.label for p in points if any(guest_note(r.meta.environment) for r in p.runs)]
    if emulated:
        series.notes.append(f"{', '.join(emulated)}: {guest_note({'vm': {'hypervisor': 'tcg'}})}")
    probabilities = sorted({s.probability for s in series.stats if s.probability})
    names = op_names(variants)
    kinds = {name: "response" if name.endswith(RESPONSE_SUFFIX) else "service" for name in names}
    series.metrics = [f"{name}:{stat}" for name in names
                      for stat in _deciding(name, kinds[name], options.metrics)]
    for name in names:         # one op at a time: its sides are let go before the next
        sides = [op_side(name, v, compare_options.percentiles) for v in variants]
        changes: list[dict[str, iv.Change] | None] = [
            None if i == baseline else compare_op(sides[baseline], side, probabilities,
                                                  compare_options, kinds[name], op=name).changes
            for i, side in enumerate(sides)]
        series.ops.append(SeriesOp(name, kinds[name], [s.stats for s in sides], changes))
        for stat in _deciding(name, kinds[name], options.metrics):
            series.change_points += _metric_change_points(
                name, stat, kinds[name], sides, points, compare_options, len(series.metrics))
    for change in series.change_points:
        change.new = _is_new(change, points, options.since)
    series.change_points.sort(key=lambda c: (c.index, c.metric))
    return series


def _noise_profile(points: list[SeriesPoint], baseline: int) -> NoiseProfile | None:
    """This host's noise profile of the baseline point's shape (`stallbench calibrate`), as
    compare takes it: while every run of the series is on that host."""
    from ..results.noiseprofiles import find_profile

    first = points[baseline].runs[0]
    profile, _ = find_profile(first.path.parents[2], first.meta)
    hosts = {run.meta.host or "" for point in points for run in point.runs}
    return profile if profile is not None and hosts == {profile.host} else None


def _deciding(op: str, kind: str, metrics: tuple[tuple[str, str], ...] | None) -> list[str]:
    """The statistics of this op whose change points are looked for: those named, else
    DECIDING_STATS (not a response op's rate, which is its service op's, nor a paced op's)."""
    if metrics is not None:
        return [stat for name, stat in metrics if name == op]
    if kind == "response":
        return [s for s in DECIDING_STATS if s != RATE.key]
    return list(DECIDING_STATS)


def _metric_change_points(op: str, stat: str, kind: str, sides: list[OpSide],
                          points: list[SeriesPoint], options: CompareOptions, family: int
                          ) -> list[SeriesChange]:
    """One statistic's change points (analysis/changepoints.py), Bonferroni-adjusted for the
    `family` of statistics scanned together."""
    runs, value = _statistic_along(stat, sides)
    prior = _series_prior(runs, lambda dof: statistic_prior(options, op, stat, kind, dof))
    found = changepoints.change_points(runs, value, prior, options.noise, family)
    out = []
    for c in found:
        before, after = points[c.index - 1], points[c.index]
        judged = verdicts.change_point(
            c.change, stat_named(stat).higher_is_better,
            _beyond_load(stat, c.index, c.segment, points, runs, value, prior, options.noise),
            before.ran is not None and before.ran == after.ran)
        out.append(SeriesChange(metric=f"{op}:{stat}", op=op, stat=stat, index=c.index,
                                variant=after.label, before=before.label, change=judged,
                                p_scan=c.p_scan, bisect=_bisect_range(before, after)))
    return out


def _series_prior(runs: list[list[iv.RunStatistic]], compare_prior: Callable[[int], iv.Prior]
                  ) -> Callable[[int], iv.Prior]:
    """The run-to-run prior of a series' splits: compare's (this host's noise profile, else
    the A/A table) where the series has too few runs to measure its own spread; else a floor
    at the spread of all its runs around their levels (changepoints.series_spread, less the
    runs' own mean within-run variance), never below the profile's."""
    spread = changepoints.series_spread(
        [[r.log_value for r in point if r.log_value is not None] for point in runs])
    if spread is None:
        return compare_prior
    sd, dof = spread
    within = [r.within_var for point in runs for r in point if r.within_var is not None]
    tau = float(np.sqrt(max(sd ** 2 - (float(np.mean(within)) if within else 0.0), 0.0)))

    def prior(data_dof: int) -> iv.Prior:
        base = compare_prior(data_dof)
        if base.source == iv.PROFILE:
            return dataclasses.replace(base, sd=max(base.sd, tau), floor=True)
        return iv.Prior(tau, dof, iv.ASSUMED, floor=True)

    return prior


def _beyond_load(stat: str, k: int, segment: tuple[int, int], points: list[SeriesPoint],
                 runs: list[list[iv.RunStatistic]], value: Callable[[int, int], float | None],
                 prior: Callable[[int], iv.Prior], noise: float) -> bool | None:
    """What compare's MACHINE BUSIER rule needs across a change point (verdicts.change_point):
    None where neither side's runs had more outside load (analysis/interference.py), else
    whether the change holds with the spread that load can put between runs (load_sd as a
    floor; never beyond p99, where a busier side's slowest ops can each carry a scheduler
    slice)."""
    lo, hi = segment
    sides = [interference.outside_load([r.meta.machine_load for p in points[a:b] for r in p.runs])
             for a, b in ((lo, k), (k, hi))]
    busier = interference.busier_side(*sides)
    if not busier:
        return None
    if not interference.bounded_by_load(stat_named(stat).probability):
        return False
    floor = interference.load_sd(sides[1] if busier > 0 else sides[0])
    held = changepoints.split_change(
        runs, value, lambda dof: dataclasses.replace(
            prior(dof), sd=max(prior(dof).sd, floor), dof=interference.SATURATED_PRIOR_DOF,
            floor=True), lo, k, hi)
    return bool(iv.excludes_zero(held) and abs(held.change) > noise)


def _statistic_along(stat: str, sides: list[OpSide]
                     ) -> tuple[list[list[iv.RunStatistic]], Callable[[int, int], float | None]]:
    """Per point its runs' statistic, and the statistic of points lo..hi-1 pooled (as
    compare pools a variant's runs: quantiles of the summed histograms, ops over time)."""
    counts = np.cumsum([0] + [s.stats.samples for s in sides])
    if stat == RATE.key:
        seconds = np.cumsum([0.0] + [float(sum(s.durations)) for s in sides])
        return [s.rate_statistics() for s in sides], \
            lambda lo, hi: (counts[hi] - counts[lo]) / (seconds[hi] - seconds[lo]) \
            if seconds[hi] > seconds[lo] else None
    if stat == "mean":
        sums = np.cumsum([0.0] + [(s.stats.values["mean"] or 0.0) * s.stats.samples
                                  for s in sides])
        return [s.mean_statistics() for s in sides], \
            lambda lo, hi: (sums[hi] - sums[lo]) / (counts[hi] - counts[lo]) \
            if counts[hi] > counts[lo] else None
    probability = stat_named(stat).probability
    if probability is None:
        raise UsageError(f"--metric ...:{stat}: a series finds change points of percentiles, "
                         "rate and mean (min and max have no interval)")
    cumulative = np.cumsum(np.vstack([np.zeros(hist.N_BUCKETS, np.int64)]
                                     + [s.histogram for s in sides]), axis=0)

    def value(lo: int, hi: int) -> float | None:
        n = int(counts[hi] - counts[lo])
        if not resolvable(n, probability):
            return None
        return hist.quantiles(cumulative[hi] - cumulative[lo], [probability])[0]

    return [[r[0] for r in s.quantile_statistics([probability])] for s in sides], value


def _bisect_range(before: SeriesPoint, after: SeriesPoint) -> dict[str, Any] | None:
    """{git, good, bad, plan} when both points ran one kernel built from a commit of the same
    git tree (run.json plan.commit, bisect --git's kernels) and the same plan file."""
    if before.commit and after.commit and before.git and before.git == after.git \
            and before.plan_file and before.plan_file == after.plan_file:
        return {"git": before.git, "good": before.commit, "bad": after.commit,
                "plan": before.plan_file}
    return None


def _is_new(change: SeriesChange, points: list[SeriesPoint], since: str | None) -> bool:
    """Whether the change point is after --since: a point label or variant (strictly after
    it) or a date (its first point on or after it)."""
    if since is None:
        return True
    for i, point in enumerate(points):
        if since == point.label or since in point.variants:
            return change.index > i
    return points[change.index].first_utc[:len(since)] >= since


def check_since(points: list[SeriesPoint], since: str | None) -> None:
    if since is None or any(since == p.label or since in p.variants for p in points):
        return
    import datetime

    try:
        datetime.date.fromisoformat(since[:10])
    except ValueError:
        raise UsageError(f"--since {since}: neither a point of the series ("
                         f"{', '.join(p.label for p in points[:6])}"
                         f"{', ...' if len(points) > 6 else ''}) nor a date (YYYY-MM-DD)"
                         ) from None


def _baseline_index(points: list[SeriesPoint], baseline: str | None) -> int:
    if baseline is None:
        return 0
    for i, point in enumerate(points):
        if baseline == point.label or baseline in point.variants:
            return i
    raise UsageError(f"--baseline {baseline}: not a point of the series "
                     f"({', '.join(p.label for p in points)})")


# ---------------------------------------------------------------------------------------------
# the points and the shape


def axis_value(run: Run, by: str) -> Any:
    """A run's place along the axis (None: the run does not record it)."""
    if by == BY_KERNEL:
        return (run.meta.kernel or {}).get("release")
    if by == BY_DATE:
        return run.meta.start_utc[:10]
    settings = (run.meta.plan or {}).get("settings") or {}
    value = settings.get(by, (run.meta.params or {}).get(by))
    return json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else value


def _points(resolved: list[Resolved], by: str) -> list[SeriesPoint]:
    if by == BY_ORDER:
        return [SeriesPoint.of(r.label, r.runs) for r in resolved]
    runs = [run for r in resolved for run in r.runs]
    values = [axis_value(run, by) for run in runs]
    lacking = [run for run, value in zip(runs, values, strict=True) if value is None]
    if lacking:
        known = sorted({*((lacking[0].meta.plan or {}).get("settings") or {}),
                        *(lacking[0].meta.params or {})})
        raise UsageError(f"--by {by}: {len(lacking)} of {len(runs)} runs do not record it "
                         f"(e.g. {lacking[0].path}; it records {', '.join(known) or 'none'}, "
                         f"kernel and date)")
    points = []
    for value in axis_order(values):
        members = [run for run, v in zip(runs, values, strict=True) if v == value]
        label = str(value) if by in (BY_KERNEL, BY_DATE) else f"{by}={value}"
        points.append(SeriesPoint.of(label, members))
    return points


def _check_shape(runs: list[Run], by: str) -> None:
    """One workload with the same options in every run (the axis key aside)."""
    workloads = sorted({run.workload for run in runs})
    if len(workloads) > 1:
        raise UsageError(f"mixed workload shapes: the runs hold {', '.join(workloads)}; a "
                         "series follows one workload (pick one with --workload)")
    first = runs[0]
    for run in runs[1:]:
        differ = sorted(k for k in {*first.meta.params, *run.meta.params}
                        if k != by and first.meta.params.get(k) != run.meta.params.get(k))
        if differ:
            key = differ[0]
            raise UsageError(
                f"mixed workload shapes: {key} is {first.meta.params.get(key)!r} in "
                f"{first.variant} and {run.meta.params.get(key)!r} in {run.variant}; a series "
                f"compares one workload shape (to follow {key}, use --by {key})")



def gate_series(series: Series, bound: float) -> tuple[int, list[str]]:
    """The exit status `check` would give the new change points that are regressions (worse),
    each judged against the bound by the policy (verdicts.against_bound): 1 when one's whole
    interval lies beyond the bound, 125 when one's interval straddles it or one was left
    unclear (or, none beyond it, runs were left out), else 0; with the reasons."""
    found: dict[verdicts.GateOutcome, list[str]] = {}
    for c in series.change_points:
        if not c.new:
            continue
        if c.verdict == iv.Verdict.UNCLEAR:
            found.setdefault(verdicts.GateOutcome.UNDECIDED, []).append(
                f"{c.metric} at {c.variant}: {c.change.note}")
            continue
        if c.verdict != iv.Verdict.WORSE or c.change.low is None or c.change.high is None:
            continue
        outcome, _ = verdicts.against_bound(c.change, stat_named(c.stat).higher_is_better,
                                            bound)
        if outcome == verdicts.GateOutcome.REGRESSION:
            found.setdefault(outcome, []).append(
                f"{c.metric} regressed beyond {bound:.0%} at {c.variant}")
        elif outcome == verdicts.GateOutcome.UNDECIDED:
            found.setdefault(outcome, []).append(
                f"{c.metric} at {c.variant}: the interval straddles {bound:.0%}")
    if series.problems and not found:
        found[verdicts.GateOutcome.UNDECIDED] = [f"runs left out: {series.problems[0]}"]
    outcome = verdicts.overall(found)
    return verdicts.EXIT_CODE[outcome], found.get(outcome, [])
