"""The predicates of the distrust rules, and their sentences: whether something other than the
variants could explain a verdict. compare/verdicts/ is the policy that applies them (in its
order) and makes the verdicts 'unclear'.

Two causes: runs that mix two regimes (analysis/stationarity.py: a cold then a warm cache) and
more outside load on one side (analysis/interference.py: a busier or a saturated machine).
Pure: numbers and changes in, booleans and sentences out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from . import intervals as iv
from .interference import PREEMPTED_TAIL, OutsideLoad, bounded_by_load
from .quantiles import Stat

MEASURED_SPREAD_RUNS = 3   # runs on each side from which the measured spread shows a mix


def regime_ratios(level_shifts: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], float]:
    """(variant, op) -> the largest ratio of two regimes its runs mix, |log(after / before)|,
    from the comparison's level shifts (analysis/stationarity.py)."""
    ratio: dict[tuple[str, str], float] = {}
    for s in level_shifts:
        key = (s["variant"], s["op"])
        size = abs(float(np.log(max(s["after"], 1e-9) / max(s["before"], 1e-9))))
        ratio[key] = max(ratio.get(key, 0.0), size)
    return ratio


def regimes_could_explain(change: iv.Change, ratio: float, runs: int) -> bool:
    """Whether runs that mix two regimes `ratio` apart (log scale; the larger side's) could
    explain this decided verdict: they pool the regimes in proportions that vary from run to
    run, which can move a statistic by up to that ratio. Not when the interval lies beyond it
    on both ends (a change larger than any mix; never for 'same', which a mix can fake), nor
    with MEASURED_SPREAD_RUNS or more runs on each side (`runs`: the fewer side's): runs that
    mix in different proportions then show it in their measured spread."""
    if ratio == 0.0 or runs >= MEASURED_SPREAD_RUNS:
        return False
    beyond = change.change is not None and change.low is not None and change.high is not None \
        and min(abs(np.log1p(change.low)), abs(np.log1p(change.high))) > ratio
    return not beyond or change.verdict == iv.Verdict.SAME


def holds_beyond_load(bound: iv.Change | None, stat: Stat | None, verdict: str,
                      noise: float) -> bool:
    """Whether a verdict that more outside load on one side could explain still stands: its
    change, with the run-to-run spread that load can put between runs (`bound`: the interval
    again with interference.load_sd as the prior, or the change itself where the pair was
    saturated and already has it), gives the same verdict. Never for a quantile beyond
    1 - PREEMPTED_TAIL, which a busier side lengthens by a scheduler slice whatever its size,
    nor for a row without a statistic (the CPU rows)."""
    if bound is None or stat is None or not bounded_by_load(stat.probability):
        return False
    return iv.verdict(bound, stat.higher_is_better, noise) == verdict


def saturated_notes(base: str, saturated: Mapping[str, int],
                    floors: Mapping[str, float]) -> list[str]:
    """A sentence per candidate whose pair had saturated runs (their intervals were widened
    to at least `floors[label]` per standard deviation on the log scale)."""
    return [f"MACHINE SATURATED: in {runs} of the runs of {base} and {label} every CPU was "
            "busy, mostly with other processes; separate runs there differ far more than "
            "on a machine with room (A/A runs 30x apart), so the intervals assume a "
            f"run-to-run spread of at least ×{np.exp(floors[label]):.1f} per standard "
            "deviation: use a quieter machine"
            for label, runs in saturated.items() if runs]


def busier_note(base: str, label: str, side: int, loads: Mapping[str, OutsideLoad | None],
                kept: int, tails: int) -> str:
    """The MACHINE BUSIER sentence of one candidate (`side`: +1 its runs were busier, -1 the
    baseline's): which verdicts were left unclear, how many stood (`kept`) and how many were
    quantiles beyond the bound's reach (`tails`)."""
    distrusted = iv.Verdict.WORSE if side > 0 else iv.Verdict.BETTER
    busier_label, quieter = (label, base) if side > 0 else (base, label)
    busier, quiet = loads[busier_label], loads[quieter]
    assert busier is not None and quiet is not None   # busier_side needs both
    return (
        f"MACHINE BUSIER: other processes and steal took {busier.mean_cpus:.2f}"
        f" of {busier.cpus} CPUs during {busier_label}'s runs vs "
        f"{quiet.mean_cpus:.2f} during {quieter}'s: '{distrusted}' verdicts for "
        f"{label} are left unclear"
        + (f" ({kept} beyond what separate runs on a saturated machine differ by stand)"
           if kept else "")
        + (f" ({tails} of them beyond p{100 * (1 - PREEMPTED_TAIL):g}, whatever their size:"
           " outside load can lengthen that share of ops by a whole scheduler slice)"
           if tails else "")
        + "; rerun on a quieter machine or interleave more iterations")
