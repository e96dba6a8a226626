"""The records of a series (series.py builds them, report/series.py shows them): its points
along the axis, each op's statistics per point with their change against the baseline point,
and the change points."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..analysis import intervals as iv
from ..analysis.quantiles import MEAN, RATE, Stat, percentile, stat_named
from ..results.store import Run
from . import DEFAULT_NOISE
from .model import OpStats

BY_ORDER, BY_KERNEL, BY_DATE = "order", "kernel", "date"
AXES = (BY_ORDER, BY_KERNEL, BY_DATE)   # or any plan key or workload option
MIN_POINTS = 3
SERIES_PERCENTS = (50.0, 99.0)          # the rows: rate, these percentiles, mean (+ --metric's)


def row_percents(metrics: tuple[tuple[str, str], ...] | None) -> tuple[float, ...]:
    """SERIES_PERCENTS and the percentiles the metrics name."""
    named = {round(stat.probability * 100, 10) for _, name in metrics or ()
             if (stat := stat_named(name)).probability is not None}
    return tuple(sorted({*SERIES_PERCENTS, *named}))


@dataclass
class SeriesOptions:
    results: Path | None = None
    by: str = BY_ORDER
    baseline: str | None = None       # a point's label or variant; None: the first point
    metrics: tuple[tuple[str, str], ...] | None = None   # (op, stat) scanned; None: DECIDING
    since: str | None = None          # a point's label or variant, or a date: new change points
    noise: float = DEFAULT_NOISE


@dataclass
class SeriesPoint:
    """One place along the axis: its label and runs, and what they record."""

    label: str
    runs: list[Run]
    variants: list[str]
    kernels: list[str]
    hosts: list[str]
    first_utc: str
    commit: str | None = None      # the one kernel commit of its runs (bisect --git builds)
    git: str | None = None
    plan_file: str | None = None
    plan_hashes: list[str] = field(default_factory=list)
    ran: str | None = None         # what every run of it ran (ran_settings), None: they differ


    @classmethod
    def of(cls, label: str, runs: list[Run]) -> SeriesPoint:
        def distinct(values: list[Any]) -> list[Any]:
            return sorted({v for v in values if v})

        plans = [r.meta.plan or {} for r in runs]
        commits = distinct([p.get("commit") for p in plans])
        gits = distinct([p.get("git") for p in plans])
        files = distinct([p.get("file") for p in plans])
        return cls(label, runs, distinct([r.variant for r in runs]),
                   distinct([(r.meta.kernel or {}).get("release") for r in runs]),
                   distinct([r.meta.host for r in runs]), min(r.meta.start_utc for r in runs),
                   commits[0] if len(commits) == 1 and len(plans) == sum(
                       bool(p.get("commit")) for p in plans) else None,
                   gits[0] if len(gits) == 1 else None, files[0] if len(files) == 1 else None,
                   distinct([p.get("hash") for p in plans]), _one([ran_settings(r) for r in runs]))


def ran_settings(run: Run) -> str | None:
    """What a run ran, as one comparable text: its variant's settings by plan key (run.json
    plan.settings, plan/record.py: not its name or paths), its workload's options, its kernel
    (release and build: `uname -r` and `-v`) and the commit it was built from (bisect --git),
    and the stallbench that measured it; None for a run without a plan record (an import)."""
    if not run.meta.plan:
        return None
    kernel = run.meta.kernel or {}
    return json.dumps({"settings": run.meta.plan.get("settings"), "options": run.meta.params,
                       "kernel": [kernel.get("release"), kernel.get("version")],
                       "commit": run.meta.plan.get("commit"),
                       "stallbench": run.meta.stallbench_version}, sort_keys=True, default=str)


def _one(values: list[str | None]) -> str | None:
    return values[0] if values and values[0] is not None and len(set(values)) == 1 else None


@dataclass
class SeriesOp:
    op: str
    kind: str                                       # "service" or "response"
    stats: list[OpStats]                            # per point
    changes: list[dict[str, iv.Change] | None]      # per point: against the baseline point


@dataclass
class SeriesChange:
    """A change point: the change of `stat` of `op` from point `index` on (`variant`, the first
    after the change) against the points before it (back to the previous change point), with
    its interval; p_scan adjusted for the places tried and the statistics scanned."""

    metric: str
    op: str
    stat: str
    index: int
    variant: str
    before: str
    change: iv.Change           # its verdict and reason the policy's (verdicts.change_point)
    p_scan: float
    new: bool = True
    bisect: dict[str, Any] | None = None   # {git, good, bad, plan}: both sides' commits

    @property
    def verdict(self) -> str:
        return self.change.verdict


@dataclass
class Series:
    workload: str
    by: str
    points: list[SeriesPoint]
    baseline: int
    percents: tuple[float, ...]
    metrics: list[str]                 # op:stat whose change points were looked for
    problems: list[str]
    noise_profile: str | None = None   # the profile behind the priors, described
    notes: list[str] = field(default_factory=list)   # what a reader must be told (TCG guests)
    ops: list[SeriesOp] = field(default_factory=list)
    change_points: list[SeriesChange] = field(default_factory=list)

    @property
    def stats(self) -> tuple[Stat, ...]:
        """The rows of each op's table (samples aside)."""
        return (RATE, *(percentile(p) for p in self.percents), MEAN)

    @property
    def labels(self) -> list[str]:
        return [p.label for p in self.points]
