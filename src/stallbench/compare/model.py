"""The Comparison: the tree of dataclasses that build_comparison (comparison.py) builds once
and the renderers of report/ print without computing anything; report/jsonout.py writes it as
the comparison JSON (docs/architecture.md: "The comparison JSON"). Comparison, OpComparison,
CpuRow and their Changes are frozen: every verdict is the policy's (verdicts/), given before
they are built."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..analysis import bands as bands_mod
from ..analysis import intervals as iv
from ..analysis.noise import NoiseProfile
from ..analysis.quantiles import Stat, row_stats
from ..analysis.where.section import WhereSection
from . import DEFAULT_NOISE
from .provenance import Provenance
from .stalltimeline import StallSummary


@dataclass
class CompareOptions:
    noise: float = DEFAULT_NOISE  # changes smaller than this are never called better/worse
    interval_s: float = 1.0  # stalls-over-time interval
    stall_threshold_ns: int = 100_000_000  # an interval whose max exceeds this is a stall
    rate_drop: float = 0.10  # rate fell by more than this -> flagged FEWER OPS
    explain: bool = True  # call stallbench.where (monitor sections); check does not need it
    run_to_run_sd: dict[str, float] | None = None  # prior τ0 per statistic; None: iv's table
    percentiles: tuple[float, ...] | None = None  # in per cent; None: DEFAULT_PERCENTS
    noise_profile: NoiseProfile | None = None  # this host's measured spread (calibrate)
    duet_profile: NoiseProfile | None = None  # its measured A/A duet pair spread (--duet)
    use_profiles: bool = True  # look for the baseline's profile beside its runs
    # (op, stat) asked for with --metric: they decide, in their own false-discovery budget
    metrics: tuple[tuple[str, str], ...] | None = None
    default_rows: bool = True  # DECIDING_STATS of each op decide too (check: only its metrics)


@dataclass
class RunInfo:
    iteration: int | None
    path: str
    status: str
    duration_s: float  # the workload's span: its first op's start to its last completion
    started_s: float  # when the first op started, on the run's clock (monitors start first)
    end_s: float  # the last completion, on the run's clock
    warmup_s: float = 0.0  # after the first op, left out of the statistics (whole blocks)
    block_ns: int = 0  # the time blocks behind the intervals and timelines
    # where no warm-up was stated: what analysis/transient.py found at the start (settled,
    # steady, unsettled, too short) and the op and statistic it names ("read p50"); None: stated
    warmup_found: str | None = None
    warmup_found_by: str | None = None


@dataclass
class VariantInfo:
    label: str
    runs: list[RunInfo]
    workload_summary: list[dict[str, Any]]
    interval_sampled: bool
    kernel: str | None
    environment: dict[str, Any]
    provenance: Provenance | None = None   # its plans, versions and kernel (provenance.py)


@dataclass
class OpStats:
    """One op in one variant (all iterations pooled)."""

    samples: int
    rate: float | None  # ops/s = samples / total duration
    values: dict[str, float | None]  # latency_stats() keys -> ns
    unresolved: dict[str, int]  # percentile -> samples at or beyond it (< MIN_TAIL_SAMPLES)
    iteration_samples: list[int]
    iteration_p99_ns: list[float | None]
    iteration_p99_spread: float | None  # (max - min) / median of the per-iteration p99
    warmup_samples: int = 0  # recorded during the warm-up, not in the statistics
    needed: dict[str, int] = field(default_factory=dict)  # unresolved percentile -> ops it needs


@dataclass
class ShiftCurve:
    probabilities: list[float]
    change: list[float | None]
    low: list[float | None]
    high: list[float | None]


@dataclass(frozen=True)
class OpComparison:
    op: str
    kind: str  # "service" (latency as recorded) or "response" (completion - planned start)
    stats: dict[str, OpStats]  # variant label -> stats
    changes: dict[str, dict[str, iv.Change]]  # candidate -> stat ("rate", "p99", ...) -> change
    starved: dict[str, bool]  # candidate -> the op stopped completing while others went on
    slower_probability: dict[str, float | None]  # candidate -> P(candidate op slower)
    shift: dict[str, bands_mod.Shift | None]  # candidate -> distribution shift
    bands: dict[str, list[int]]  # variant -> count per log2 band
    shift_curve: dict[str, ShiftCurve]  # candidate -> shift function
    ccdf: dict[str, dict[str, list[float]]]  # variant -> {latency_ns, fraction_above}
    stalls: dict[str, StallSummary]
    rate_fell: dict[str, bool] = field(default_factory=dict)  # rate fell beyond rate_drop
    samples_change: dict[str, float | None] = field(default_factory=dict)  # candidate -> c/b - 1
    band_shares: dict[str, list[float]] = field(default_factory=dict)  # variant -> share per band
    schedule_kept: dict[str, float | None] = field(default_factory=dict)  # paced ops: variant ->
    # share of the run its planned starts covered (loading.OpSide.schedule_kept)


@dataclass(frozen=True)
class CpuRow:
    name: str
    values: dict[str, float | None]  # variant -> mean seconds per iteration
    changes: dict[str, iv.Change]


@dataclass(frozen=True)
class Comparison:
    workload: str
    baseline: str
    candidates: list[str]
    variants: list[VariantInfo]
    method: dict[str, str]  # candidate -> interval method in words
    options: CompareOptions
    ops: list[OpComparison]
    cpu: list[CpuRow]
    adjustment: str
    notes: list[str] = field(default_factory=list)
    counters: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    where: WhereSection | None = None   # None also when not asked for, or where_error
    where_error: str | None = None      # the where section's analysis failed: why
    problems: list[str] = field(default_factory=list)
    level_shifts: list[dict[str, Any]] = field(default_factory=list)  # runs mixing regimes
    accuracy: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] | None = None   # fidelity: analysis/environment.py
    views: Any = None  # views.Views: heatmaps and blocked-time profiles for the pictures
    noise_profile: str | None = None    # the profile behind the priors, described
    profile_problem: str | None = None  # why a profile of this shape was not used
    duet: dict[str, dict[str, Any]] = field(default_factory=dict)  # candidate -> its pairing
    # what would decide the unclear rows, where the caller knows the plan (run --plan, demo)
    decide_hint: str | None = None

    @property
    def labels(self) -> list[str]:
        return [self.baseline, *self.candidates]

    @property
    def stats(self) -> tuple[Stat, ...]:
        """The rows of every op table: rate, min, the percentiles asked, max, mean."""
        return row_stats(self.options.percentiles)


