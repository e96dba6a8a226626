"""The verdict policy: the one owner of every row's verdict and of the reason it carries, of
every gate outcome (`check`, bisect's steps, `series`' exit status: GateOutcome) and of every
change point's verdict (`series`).

changes.py measures each row (one statistic of one op, or a CPU row, for one candidate: the
change and its interval, no verdict). `judge` takes the measured rows and the facts about the
runs (Facts) and lets RULES give each row its verdict, in this order:

  paced           a paced op's rate is set by its own schedule: PACED, or worse when the
                  candidate fell behind it (BEHIND_SCHEDULE); no interval
  no samples      a side recorded none of the op: no interval, except that the rate of a
                  candidate that completed none, where the baseline resolved a tail, is worse
  multiplicity    the rows that decide (`decides`: their false-discovery budget) get
                  Benjamini–Hochberg and better / worse / same / unclear (ADJUSTED when the
                  interval alone would have called it); the others with an interval: interval only
  too wide        an op row's interval beyond ×10 either way is not shown; unclear says so
  not stationary  a decided row that runs mixing two regimes could explain becomes unclear
  machine busier  a worse (better) row that the candidate's (baseline's) extra outside load
                  could explain becomes unclear

The first two settle a row before the numbers are weighed; the last two only take back a
verdict that was given, so a row both not stationary and on a busier machine says 'not
stationary'. A series' change points (series.py measures them, analysis/changepoints.py finds
them: `change_point`) get their direction, then the machine busier rule, and one of their own
after it:

  same settings   a change point between two points whose runs ran the same settings (the
                  plan's settings of the variant, the workload's options, the kernel and its
                  build, stallbench's version: seriesmodel.ran_settings): no configuration
                  changed there, so it is the machine's; unclear (SAME_SETTINGS)

The gate (`gate_metric`) reads a finished row against the bound, in its own order: runs left
out -> a row a distrust rule took back (undecided) -> behind schedule (a regression) -> a paced
rate (its estimate against the bound) -> no estimate -> no interval -> the interval against the
bound (`against_bound`, which a series' new change points take too). `overall` is several
metrics' outcome, EXIT_CODE its exit status.

The predicates are analysis/'s (change.py, distrust.py, interference.py). `why`
answers, for any finished row, why it has its verdict.
"""

from .gates import EXIT_CODE, GateOutcome, against_bound, gate_metric, overall
from .rows import (
    ADJUSTED,
    BEHIND_SCHEDULE,
    DEFAULT,
    INTERVAL_HOLDS_ZERO,
    MACHINE_BUSIER,
    METRICS,
    MORE_RUNS_DECIDE,
    NOT_STATIONARY,
    RULES,
    SAME_SETTINGS,
    TOO_WIDE,
    Facts,
    Judged,
    OpFacts,
    Row,
    by_op,
    decides,
    judge,
    measured_rows,
    more_runs_decide,
    why,
)
from .shifts import change_point

__all__ = [
    "ADJUSTED", "BEHIND_SCHEDULE", "DEFAULT", "EXIT_CODE", "Facts", "GateOutcome",
    "INTERVAL_HOLDS_ZERO", "Judged", "MACHINE_BUSIER", "METRICS", "MORE_RUNS_DECIDE",
    "NOT_STATIONARY", "OpFacts", "RULES", "Row", "SAME_SETTINGS", "TOO_WIDE", "against_bound",
    "by_op", "change_point", "decides", "gate_metric", "judge", "measured_rows",
    "more_runs_decide", "overall", "why",
]
