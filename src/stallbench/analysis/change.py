"""A change between two variants (candidate/baseline - 1 with its interval) and its verdict:
the Verdict enum with its words and the predicates a verdict is made of (intervals.py has the
model; compare/verdicts/ is the policy that gives each row of a comparison its verdict and
the reason it carries)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

from .tdist import CONFIDENCE


class Verdict(StrEnum):
    """A change's verdict, with the word the reports and the comparison JSON print."""

    BETTER = "better"
    WORSE = "worse"
    SAME = "same"
    UNCLEAR = "unclear"
    NA = "n/a"                         # no interval
    PACED = "paced"                    # a rate set by the workload's own schedule
    INTERVAL_ONLY = "interval only"    # outside the false-discovery budget: no verdict


DIRECTED = (Verdict.BETTER, Verdict.WORSE)      # an interval that excludes 0, beyond the noise
DECIDED = (*DIRECTED, Verdict.SAME)             # what --iterations auto waits for


@dataclass(frozen=True)
class Change:
    """ratio - 1 of candidate vs baseline with its interval (None where there is none); the
    verdict and its note as the policy (compare/verdicts/) gave them: a finished row is
    never changed, a rule makes a new one (dataclasses.replace)."""

    change: float | None
    low: float | None = None
    high: float | None = None
    p_value: float | None = None
    p_adjusted: float | None = None
    verdict: str = Verdict.NA
    note: str | None = None
    runs: tuple[int, int] | None = None         # (baseline, candidate) runs behind the interval
    blocks: tuple[int, int] | None = None       # time-block groups per run (smallest per side)
    run_sd: float | None = None                 # the run-to-run sd used (log scale)
    run_sd_measured: bool = False               # False: the prior alone (one run each)
    iterations_needed: int | None = None        # runs per variant likely to decide an unclear row
    interval_shown: bool = True                 # False: wider than MAX_INTERVAL_RATIO (too_wide)
    prior_dof: float | None = None              # the prior's weight in runs' degrees of freedom
    prior_source: str | None = None             # ASSUMED | PROFILE
    variance: dict = field(default_factory=dict, repr=False)   # the terms, for the advice


def ratio_change(candidate: float | None, baseline: float | None) -> float | None:
    if candidate is None or baseline is None or not np.isfinite(candidate) \
            or not np.isfinite(baseline) or baseline <= 0:
        return None
    return candidate / baseline - 1.0


MAX_INTERVAL_RATIO = 10.0


def excludes_zero(change: Change) -> bool:
    return change.low is not None and change.high is not None and \
        (change.low > 0 or change.high < 0)


def too_wide(change: Change) -> bool:
    """The interval reaches beyond MAX_INTERVAL_RATIO times the estimate, or below 1/that."""
    if change.change is None or change.low is None or change.high is None:
        return False
    ratio = 1.0 + change.change
    return (1.0 + change.high) > MAX_INTERVAL_RATIO * ratio or \
        (1.0 + change.low) * MAX_INTERVAL_RATIO < ratio


def verdict(change: Change, higher_is_better: bool, noise: float,
            alpha: float = 1.0 - CONFIDENCE) -> str:
    """better/worse: interval excludes 0, adjusted p < alpha and |change| > noise;
    same: the whole interval lies within +-noise; unclear: otherwise; n/a: no interval."""
    if change.change is None or change.low is None or change.high is None:
        return Verdict.NA
    significant = change.p_adjusted is None or change.p_adjusted < alpha
    if excludes_zero(change) and significant and abs(change.change) > noise:
        larger = change.change > 0
        return Verdict.BETTER if larger == higher_is_better else Verdict.WORSE
    if -noise <= change.low and change.high <= noise:
        return Verdict.SAME
    return Verdict.UNCLEAR


def behind_schedule(baseline_kept: float | None, candidate_kept: float | None,
                    rate_drop: float) -> bool:
    """A paced op's candidate fell behind its schedule: its planned starts covered less than
    1 - rate_drop of its runs, and rate_drop less than the baseline's did (or the baseline's
    is not known). `*_kept`: loading.OpSide.schedule_kept, None where the side has no data."""
    return candidate_kept is not None and candidate_kept < 1 - rate_drop and \
        (baseline_kept is None or baseline_kept - candidate_kept > rate_drop)
