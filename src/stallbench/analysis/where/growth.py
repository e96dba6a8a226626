"""Which ops a where line explains, and how the line starts: an op whose latency statistic was
called worse (the one called leads: 'read p50 +69%' where p50 was called and p99 was not), else
whose p99 (else mean) grew by more than MIN_GROWTH, or that only the candidate ran (NEW_OP);
'read p99 +310%' heads its lines, marked '(not decided): if real,' where the comparison called no
row of the op worse.
A cause is named only where it holds MIN_SHARE of the time it is a share of. Pure.
"""

from __future__ import annotations

import math
from typing import NamedTuple

MIN_SHARE = 0.10     # a cause must explain at least this much of the slow ops' time to be named
MIN_GROWTH = 0.10    # only ops whose tail (else mean) grew by more than this are explained


NEW_OP = "new"       # the statistic of an op the baseline never ran (its change: infinite)


class TailChange(NamedTuple):
    """What an op's explanation leads with: the statistic and its change; `decided`: the op is
    new or the comparison called some row of it worse (its lines otherwise say "if real")."""

    stat: str
    change: float | None
    decided: bool = True


def growth(p99_change: float | None, mean_change: float | None, new: bool = False,
           called: dict[str, float] | None = None, rate_called: bool = False
           ) -> tuple[str, float | None]:
    """The statistic an op's explanation leads with: NEW_OP for an op only the candidate ran
    (pgioperf's checkpoint-fsync when fsyncs are made frequent: all its time is new); else the
    latency statistic the comparison called worse (`called`: statistic -> change), p99 where
    it was called, else the one that grew most (a line quotes what was decided: p50 +69% where
    only p50 was, not an undecided p99); where only the op's rate was called (fewer ops, each
    longer), its mean when that grew by more than MIN_GROWTH (the op time each op added, which
    the line's causes are shares of; not an undecided p99); else its p99 when that grew by more
    than MIN_GROWTH, else its mean when that did (a few long ops, e.g. preempted by CPU hogs,
    add to the op time the delays are shares of without moving the p99), else the p99."""
    if new:
        return NEW_OP, math.inf
    if called:
        stat = "p99" if "p99" in called else max(called, key=lambda k: called[k])
        return stat, called[stat]
    if rate_called and mean_change is not None and mean_change > MIN_GROWTH:
        return "mean", mean_change
    if p99_change is not None and p99_change > MIN_GROWTH:
        return "p99", p99_change
    if mean_change is not None and mean_change > MIN_GROWTH:
        return "mean", mean_change
    return "p99", p99_change


NOT_DECIDED = " (not decided): if real,"


def mark_undecided(text: str, op: str, stat: str, change: float | None) -> str:
    """'checkpoint p99 +103% (not decided): if real, at least 39% …' for a line of an op the
    comparison called worse in no row (unclear, too wide, too few samples): the monitors saw
    what they saw, the change itself may be chance."""
    if change is None:
        return text
    head = headline(op, stat, change) + ":"
    return head[:-1] + NOT_DECIDED + text[len(head):] if text.startswith(head) else text


def headline(op: str, stat: str, change: float) -> str:
    """'read p99 +310%' or, for an op the baseline never ran, 'checkpoint-fsync (new: not in
    the baseline)': what an explanation line starts with."""
    if stat == NEW_OP:
        return f"{op} (new: not in the baseline)"
    return f"{op} {stat} {change:+.0%}"
