"""Whether a comparison made again agrees with the recorded one (`stallbench reproduce`): for
each candidate, op and statistic that decides, the verdict then and now. Pure: it reads two
Comparisons and judges nothing anew (every verdict is the policy's, verdicts/)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from ..analysis.change import DIRECTED, Change, Verdict
from ..analysis.quantiles import Stat
from ..core.errors import ExitCode
from .model import Comparison


class Outcome(StrEnum):
    REPRODUCED = "reproduced"             # the same call (better or worse) then and now
    NOT_BACK = "did not come back"        # called then; now the other way, or the same
    UNDECIDED_NOW = "undecided now"       # decided then (called, or the same); now unclear
    NEW = "called now only"               # the same then (within the noise); now called
    DECIDED_NOW = "decided now"           # unclear then; now decided
    AS_THEN = "as then"                   # the same verdict, the same or unclear, both times


@dataclass(frozen=True)
class Agreement:
    candidate: str
    op: str
    stat: Stat
    then: Change
    now: Change | None      # None: the op or candidate is missing from the new runs
    outcome: Outcome


def _outcome(then: Change, now: Change | None) -> Outcome:
    if now is None:
        return Outcome.NOT_BACK if then.verdict in DIRECTED else Outcome.UNDECIDED_NOW
    if then.verdict in DIRECTED:
        if now.verdict == then.verdict:
            return Outcome.REPRODUCED
        return Outcome.UNDECIDED_NOW if now.verdict == Verdict.UNCLEAR else Outcome.NOT_BACK
    if now.verdict in DIRECTED:
        return Outcome.NEW if then.verdict == Verdict.SAME else Outcome.DECIDED_NOW
    if now.verdict == then.verdict:
        return Outcome.AS_THEN
    return Outcome.UNDECIDED_NOW if now.verdict == Verdict.UNCLEAR else Outcome.DECIDED_NOW


def agreements(then: Comparison, now: Comparison) -> list[Agreement]:
    """Each row that decides (its verdict then is better, worse, the same or unclear), in
    the recorded report's order."""
    found = []
    now_ops = {op.op: op for op in now.ops}
    for candidate in then.candidates:
        for op in then.ops:
            again = now_ops.get(op.op)
            for stat in then.stats:
                change = op.changes[candidate].get(stat.key)
                if change is None or change.verdict in (Verdict.INTERVAL_ONLY, Verdict.NA,
                                                        Verdict.PACED):
                    continue
                new = again.changes.get(candidate, {}).get(stat.key) if again else None
                found.append(Agreement(candidate, op.op, stat, change, new,
                                       _outcome(change, new)))
    return found


def exit_code(found: list[Agreement]) -> ExitCode:
    """0: every change called then came back and nothing called now was the same then; 1: a
    change did not come back (or a new one was called); 125: some decided then are
    undecided now (and none disagrees)."""
    outcomes = {a.outcome for a in found}
    if outcomes & {Outcome.NOT_BACK, Outcome.NEW}:
        return ExitCode.FAILURE
    if Outcome.UNDECIDED_NOW in outcomes:
        return ExitCode.UNDECIDED
    return ExitCode.OK
