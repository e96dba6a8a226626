"""The gate's outcome of a metric: its finished row (rows.py) against the bound, for `check`,
bisect's steps and a series' new change points (the order of the rules: the package's face)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import StrEnum

from ...analysis import intervals as iv
from ...analysis.quantiles import MIN_TAIL_SAMPLES, RATE, stat_named
from ...core.errors import ExitCode
from ..changes import NO_SAMPLES
from ..model import OpStats
from .rows import BEHIND_SCHEDULE, MACHINE_BUSIER, NOT_STATIONARY, TOO_WIDE, why


class GateOutcome(StrEnum):
    """What the gate says of one metric, and of a step of bisect or a series' new change
    points: the words check prints, its JSON's and bisect.json's `outcome`."""

    OK = "ok"                   # the whole interval within the bound
    REGRESSION = "regression"   # the whole interval beyond it (or a row called so by a rule)
    UNDECIDED = "undecided"     # neither, or nothing to judge: check's 125, bisect's skip


EXIT_CODE = {GateOutcome.OK: ExitCode.OK, GateOutcome.REGRESSION: ExitCode.FAILURE,
             GateOutcome.UNDECIDED: ExitCode.UNDECIDED}
# why a row is unclear (why()) -> why the gate cannot decide it
_DISTRUSTED = {
    NOT_STATIONARY: "the runs mix two regimes (see the comparison's NOT STATIONARY line)",
    MACHINE_BUSIER: "one side's runs had more outside load (see MACHINE BUSIER)",
    TOO_WIDE: "the interval would be wider than ×10 either way (more runs per variant, or "
              "a noise profile from `stallbench calibrate`, would narrow it)",
}


def overall(outcomes: Iterable[GateOutcome]) -> GateOutcome:
    """Several metrics' outcome: a regression if any, else undecided if any, else ok."""
    found = set(outcomes)
    for outcome in (GateOutcome.REGRESSION, GateOutcome.UNDECIDED):
        if outcome in found:
            return outcome
    return GateOutcome.OK


def against_bound(change: iv.Change, higher_is_better: bool, bound: float
                  ) -> tuple[GateOutcome, str]:
    """A change with an interval against the bound (`bound` > 0: how far the statistic may
    get worse): a regression only when the whole 95% interval lies beyond it, ok only when it
    lies within it."""
    assert change.low is not None and change.high is not None
    if higher_is_better:
        if change.high < -bound:
            return GateOutcome.REGRESSION, "rate fell beyond the bound"
        if change.low >= -bound:
            return GateOutcome.OK, "within the bound"
    else:
        if change.low > bound:
            return GateOutcome.REGRESSION, "grew beyond the bound"
        if change.high <= bound:
            return GateOutcome.OK, "within the bound"
    return GateOutcome.UNDECIDED, "the interval straddles the bound"


def gate_metric(stat: str, change: iv.Change | None, base: OpStats, candidate: OpStats,
                problems: Sequence[str], bound: float) -> tuple[GateOutcome, str]:
    """One metric's outcome and reason, from its finished row (the rules above settled it)
    and its op's sides, in this order: runs left out -> a row a distrust rule took back ->
    behind schedule -> a paced rate (its estimate judged as it is) -> no estimate (no samples,
    a tail too few ops resolve) -> no interval -> the interval against the bound."""
    if problems:
        return GateOutcome.UNDECIDED, f"runs left out: {problems[0]}"
    reason = why(change) if change is not None else None
    if change is not None and change.verdict == iv.Verdict.UNCLEAR and reason in _DISTRUSTED:
        return GateOutcome.UNDECIDED, _DISTRUSTED[reason]
    if reason == BEHIND_SCHEDULE:
        return GateOutcome.REGRESSION, "fell behind its schedule"
    if change is not None and change.verdict == iv.Verdict.PACED and change.change is not None:
        if change.change < -bound:
            return GateOutcome.REGRESSION, "paced rate fell beyond the bound"
        return GateOutcome.OK, "kept its schedule"
    if change is None or change.change is None:
        if stat == RATE.key and change is not None and change.note == NO_SAMPLES \
                and candidate.samples == 0 and base.samples > 0:
            return GateOutcome.REGRESSION, "no samples in the candidate"
        reason = change.note if change and change.note else "no estimate"
        if base.samples == 0 or candidate.samples == 0:
            reason = NO_SAMPLES
        elif stat in base.unresolved or stat in candidate.unresolved:
            needed = base.needed.get(stat) or candidate.needed.get(stat)
            reason = (f"not resolvable: fewer than {MIN_TAIL_SAMPLES} samples at or beyond "
                      f"{stat} (it needs ≥ {needed:,} ops per variant)")
        return GateOutcome.UNDECIDED, reason
    if change.low is None or change.high is None:
        return GateOutcome.UNDECIDED, change.note or "no interval for this statistic"
    return against_bound(change, stat_named(stat).higher_is_better, bound)


