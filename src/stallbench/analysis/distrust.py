"""The distrust policy: verdicts that something other than the variants could explain are made
'unclear', with the note saying why, and the comparison's notes say so in words.

Two causes: runs that mix two regimes (analysis/stationarity.py: a cold then a warm cache) and
more outside load on one side (analysis/interference.py: a busier or a saturated machine).
Pure: changes in, changes marked and sentences out. `OpChanges` is op -> candidate -> statistic
-> Change, as the comparison holds them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from . import intervals as iv
from .interference import PREEMPTED_TAIL, OutsideLoad, bounded_by_load
from .quantiles import stat_named
from .summary import RESPONSE_SUFFIX

NOT_STATIONARY = "not stationary"
MACHINE_BUSIER = "machine busier"
MEASURED_SPREAD_RUNS = 3   # runs on each side from which the measured spread shows a mix

OpChanges = Mapping[str, Mapping[str, Mapping[str, iv.Change]]]


def distrust_regime_mixes(changes: OpChanges, level_shifts: Sequence[Mapping[str, Any]],
                          baseline: str, runs: Mapping[str, int]) -> None:
    """An op whose runs mix two regimes (a cold then a warm cache) pools them in proportions
    that vary from run to run, which can move its statistics by up to the ratio of the two
    regimes: verdicts on changes no larger than that become 'unclear' (the report says when
    the regime changed and what to do). A change beyond any regime ratio still stands, and so
    does every verdict with MEASURED_SPREAD_RUNS or more runs on each side: runs that mix the
    regimes in different proportions then show it in their measured spread."""
    ratio: dict[tuple[str, str], float] = {}
    for s in level_shifts:
        key = (s["variant"], s["op"])
        size = abs(float(np.log(max(s["after"], 1e-9) / max(s["before"], 1e-9))))
        ratio[key] = max(ratio.get(key, 0.0), size)
    for op, by_candidate in changes.items():
        name = op.removesuffix(RESPONSE_SUFFIX)
        for label, stats in by_candidate.items():
            bound = max(ratio.get((baseline, name), 0.0), ratio.get((label, name), 0.0))
            if bound == 0.0 or min(runs.get(baseline, 0), runs.get(label, 0)) \
                    >= MEASURED_SPREAD_RUNS:
                continue
            for change in stats.values():
                if change.verdict not in iv.DECIDED:
                    continue
                if change.change is not None and change.low is not None and min(
                        abs(np.log1p(change.low)), abs(np.log1p(change.high))) > bound \
                        and change.verdict != iv.Verdict.SAME:
                    continue
                change.verdict = iv.Verdict.UNCLEAR
                change.note = NOT_STATIONARY


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


def distrust_busier_machine(changes: OpChanges, cpu: Sequence[Mapping[str, iv.Change]],
                            base: str, loads: Mapping[str, OutsideLoad | None],
                            saturated: Mapping[str, int], busier: Mapping[str, int],
                            loaded: Mapping[tuple[str, str], Mapping[str, iv.Change]],
                            noise: float) -> list[str]:
    """Verdicts that more outside load on one side could explain (analysis/interference.py):
    'worse' when the candidate's runs were busier, 'better' when the baseline's were, become
    'unclear (machine busier)' (`busier`: interference.busier_side per candidate) unless the
    change's interval with the saturated machine's run-to-run prior (`loaded`, per op and
    candidate) gives the same verdict: a change beyond what separate runs on a saturated
    machine differ by stands. Quantiles beyond 1 - PREEMPTED_TAIL and CPU rows (`cpu`:
    candidate -> change per row) have no such bound. Returns the notes that say so."""
    notes = []
    for label, side in busier.items():
        if side == 0:
            continue
        distrusted = iv.Verdict.WORSE if side > 0 else iv.Verdict.BETTER
        # a saturated pair's intervals already have the saturated prior
        judged = [(c, c if saturated[label] else loaded.get((op, label), {}).get(stat),
                   stat_named(stat))
                  for op, by_candidate in changes.items()
                  for stat, c in by_candidate[label].items()]
        judged += [(row[label], None, None) for row in cpu if label in row]
        kept = tails = 0
        for change, bound, stat in judged:
            if change.verdict != distrusted:
                continue
            higher_is_better = stat is not None and stat.higher_is_better
            if stat is not None and not bounded_by_load(stat.probability):
                bound, tails = None, tails + 1
            if bound is not None and iv.verdict(bound, higher_is_better, noise) == distrusted:
                kept += 1
                continue
            change.verdict, change.note = iv.Verdict.UNCLEAR, MACHINE_BUSIER
        busier_label, quieter = (label, base) if side > 0 else (base, label)
        notes.append(
            f"MACHINE BUSIER: other processes and steal took {loads[busier_label].mean_cpus:.2f}"
            f" of {loads[busier_label].cpus} CPUs during {busier_label}'s runs vs "
            f"{loads[quieter].mean_cpus:.2f} during {quieter}'s: '{distrusted}' verdicts for "
            f"{label} are left unclear"
            + (f" ({kept} beyond what separate runs on a saturated machine differ by stand)"
               if kept else "")
            + (f" ({tails} of them beyond p{100 * (1 - PREEMPTED_TAIL):g}, whatever their size:"
               " outside load can lengthen that share of ops by a whole scheduler slice)"
               if tails else "")
            + "; rerun on a quieter machine or interleave more iterations")
    return notes
