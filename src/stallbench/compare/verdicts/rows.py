"""The rows' verdicts: RULES, in the policy's order (the package's face says it), over the
measured rows of a comparison, and `why` a finished row has its verdict."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ...analysis import distrust, paired
from ...analysis import intervals as iv
from ...analysis.change import behind_schedule
from ...analysis.interference import OutsideLoad, bounded_by_load, saturated_sd
from ...analysis.quantiles import DECIDING_STATS, MIN_TAIL_SAMPLES, RATE, stat_named
from ...analysis.summary import RESPONSE_SUFFIX
from ..changes import NO_SAMPLES
from ..model import CompareOptions

# the reasons a row carries (Change.note) where its interval alone does not say its verdict
BEHIND_SCHEDULE = "behind schedule"    # a paced op's candidate fell behind its schedule
ADJUSTED = "adjusted"                  # the multiple-comparison adjustment left it above alpha
TOO_WIDE = "interval > ×10"            # wider than MAX_INTERVAL_RATIO either way: not shown
NOT_STATIONARY = "not stationary"      # runs mixing two regimes could explain it
MACHINE_BUSIER = "machine busier"      # one side's extra outside load could explain it
SAME_SETTINGS = "same settings"        # a series' step between points that ran the same
INTERVAL_HOLDS_ZERO = "the interval holds 0"   # why(): unclear without a reason of its own
# unclear for these, more runs of the same machine state would likely decide (decide_advice)
MORE_RUNS_DECIDE = (None, ADJUSTED, TOO_WIDE)

METRICS, DEFAULT = "metrics", "default"   # the false-discovery budgets of a candidate


@dataclass(frozen=True)
class Row:
    """Where a row is: its candidate, its op (or a CPU row's name) and statistic ("": CPU)."""

    candidate: str
    op: str
    stat: str

    @property
    def cpu(self) -> bool:
        return not self.stat


@dataclass(frozen=True)
class OpFacts:
    """What the policy knows of one op: its kind, each variant's samples, and for a paced op
    (a service op with a response op, and that response op) the service op whose rate both
    rows take and each variant's share of its schedule kept (OpSide.schedule_kept)."""

    kind: str                               # "service" or "response"
    samples: Mapping[str, int]              # variant -> samples after the warm-up
    paced_by: str | None = None             # the paced service op, or None: not paced
    schedule_kept: Mapping[str, float | None] = field(default_factory=dict)


@dataclass(frozen=True)
class Facts:
    """Everything besides the measured rows that a verdict depends on."""

    baseline: str
    options: CompareOptions
    ops: Mapping[str, OpFacts]
    runs: Mapping[str, int]                               # variant -> runs compared
    regime_ratios: Mapping[tuple[str, str], float]        # distrust.regime_ratios
    loads: Mapping[str, OutsideLoad | None]               # variant -> its outside load
    busier: Mapping[str, int]       # candidate -> +1 its runs busier, -1 baseline's, 0
    saturated: Mapping[str, int]    # candidate -> saturated runs in its pair
    # (op, candidate) -> its changes with the saturated machine's prior (busier pairs only)
    loaded_bounds: Mapping[tuple[str, str], Mapping[str, iv.Change]] = field(
        default_factory=dict)


@dataclass(frozen=True)
class Judged:
    """The policy's answer: every row's finished change, and the sentences its rules add to
    the comparison's notes."""

    rows: dict[Row, iv.Change]
    notes: list[str]


Rows = dict[Row, iv.Change]
Rule = Callable[[Rows, set[Row], Facts], list[str]]


def judge(measured: Mapping[Row, iv.Change], facts: Facts) -> Judged:
    """Every row's verdict and reason: RULES in their order over the measured rows (a rule
    settles a row for the rules that weigh the numbers after it; the distrust rules act on
    what was given)."""
    rows: Rows = dict(measured)
    settled: set[Row] = set()
    notes: list[str] = []
    for _, rule in RULES:
        notes += rule(rows, settled, facts)
    return Judged(rows, notes)


def _op(row: Row, facts: Facts) -> OpFacts | None:
    """The op a row is of; None for a CPU row (whatever an op of the workload is called)."""
    return None if row.cpu else facts.ops.get(row.op)


def _paced(rows: Rows, settled: set[Row], facts: Facts) -> list[str]:
    """A paced op's rate (and its response op's, which completes as often) is its schedule's:
    the service op's estimate without an interval, PACED, or WORSE (BEHIND_SCHEDULE) when the
    candidate fell behind its schedule where the baseline did not."""
    for row in list(rows):
        op = _op(row, facts)
        if row in settled or row.stat != RATE.key or op is None or op.paced_by is None:
            continue
        rate = rows.get(Row(row.candidate, op.paced_by, RATE.key))
        if rate is None or rate.change is None:
            continue
        kept = facts.ops[op.paced_by].schedule_kept
        behind = behind_schedule(kept.get(facts.baseline), kept.get(row.candidate),
                                    facts.options.rate_drop)
        rows[row] = iv.Change(rate.change, verdict=iv.Verdict.WORSE if behind
                              else iv.Verdict.PACED, note=BEHIND_SCHEDULE if behind else None,
                              runs=rate.runs)
        settled.add(row)
    return []


def _no_samples(rows: Rows, settled: set[Row], facts: Facts) -> list[str]:
    """An op a side has no samples of has no interval; its rate is worse where the candidate
    completed none and the baseline MIN_TAIL_SAMPLES or more."""
    for row, change in rows.items():
        op = _op(row, facts)
        if row in settled or op is None:
            continue
        base, cand = op.samples.get(facts.baseline, 0), op.samples.get(row.candidate, 0)
        if base and cand:
            continue
        if row.stat == RATE.key and cand == 0 and base >= MIN_TAIL_SAMPLES:
            rows[row] = dataclasses.replace(change, verdict=iv.Verdict.WORSE, note=NO_SAMPLES)
        settled.add(row)
    return []


def decides(op: str, kind: str, stat: str, options: CompareOptions) -> str | None:
    """The false-discovery budget a row is in, or None: the metrics asked for with --metric
    (check, bisect, iterations auto, compare --metric) in their own, so that a metric's verdict
    is the one `check` gives whatever else is shown; DECIDING_STATS of every op (not a response
    op's rate, which is its service op's) in theirs, unless only the metrics decide (check)."""
    if options.metrics is not None and (op, stat) in options.metrics:
        return METRICS
    if options.default_rows and stat in DECIDING_STATS and \
            not (kind == "response" and stat == RATE.key):
        return DEFAULT
    return None


def _multiplicity(rows: Rows, settled: set[Row], facts: Facts) -> list[str]:
    """Benjamini–Hochberg within each candidate and budget over the rows that decide, then
    their verdicts and, where unclear, why (ADJUSTED) and how many runs would likely decide;
    the other rows with an interval: INTERVAL_ONLY, no verdict."""
    options = facts.options
    families: dict[tuple[str, str], list[Row]] = {}
    for row, change in rows.items():
        if row in settled:
            continue
        op = _op(row, facts)
        budget = None if op is None else decides(row.op, op.kind, row.stat, options)
        if budget is not None:
            families.setdefault((row.candidate, budget), []).append(row)
        elif change.low is not None:
            rows[row] = dataclasses.replace(change, verdict=iv.Verdict.INTERVAL_ONLY)
    for family in families.values():
        with_p = [row for row in family if rows[row].p_value is not None]
        adjusted = dict(zip(with_p, iv.benjamini_hochberg([rows[r].p_value for r in with_p]),
                            strict=True))
        for row in family:
            change = dataclasses.replace(rows[row], p_adjusted=adjusted.get(row))
            verdict = iv.verdict(change, stat_named(row.stat).higher_is_better, options.noise)
            change = dataclasses.replace(change, verdict=verdict)
            if verdict == iv.Verdict.UNCLEAR:
                needed = (paired.pairs_needed if change.variance.get("paired")
                          else iv.iterations_to_decide)(change, options.noise)
                note = ADJUSTED if iv.excludes_zero(change) and \
                    abs(change.change) > options.noise else change.note
                change = dataclasses.replace(change, note=note, iterations_needed=needed)
            rows[row] = change
    return []


def _too_wide(rows: Rows, settled: set[Row], facts: Facts) -> list[str]:
    """An op row's interval wider than MAX_INTERVAL_RATIO either way tells nothing as numbers:
    it is not shown (Change.interval_shown), its verdict stands where even it excludes 0
    (O_DIRECT's 40x on a saturated machine), and an unclear row says why (TOO_WIDE)."""
    for row, change in rows.items():
        if row.cpu or not iv.too_wide(change):
            continue
        rows[row] = dataclasses.replace(
            change, interval_shown=False,
            note=TOO_WIDE if change.verdict == iv.Verdict.UNCLEAR else change.note)
    return []


def _not_stationary(rows: Rows, settled: set[Row], facts: Facts) -> list[str]:
    """A decided verdict on an op whose runs (either side's) mix two regimes, that the mix
    could explain (distrust.regimes_could_explain), becomes unclear (NOT_STATIONARY)."""
    for row, change in rows.items():
        if row.cpu or change.verdict not in iv.DECIDED:
            continue
        name = row.op.removesuffix(RESPONSE_SUFFIX)
        ratio = max(facts.regime_ratios.get((facts.baseline, name), 0.0),
                    facts.regime_ratios.get((row.candidate, name), 0.0))
        runs = min(facts.runs.get(facts.baseline, 0), facts.runs.get(row.candidate, 0))
        if distrust.regimes_could_explain(change, ratio, runs):
            rows[row] = dataclasses.replace(change, verdict=iv.Verdict.UNCLEAR,
                                            note=NOT_STATIONARY)
    return []


def _machine_busier(rows: Rows, settled: set[Row], facts: Facts) -> list[str]:
    """Where one side's runs had more outside load (interference.busier_side), 'worse' (the
    candidate's busier) or 'better' (the baseline's) becomes unclear (MACHINE_BUSIER), unless
    it holds with the saturated machine's prior (distrust.holds_beyond_load). The notes: the
    saturated pairs', then a MACHINE BUSIER sentence per such candidate."""
    floors = {label: saturated_sd([facts.loads.get(facts.baseline), facts.loads.get(label)])
              for label in facts.saturated}
    notes = distrust.saturated_notes(facts.baseline, facts.saturated, floors)
    for label, side in facts.busier.items():
        if side == 0:
            continue
        distrusted = iv.Verdict.WORSE if side > 0 else iv.Verdict.BETTER
        kept = tails = 0
        for row, change in rows.items():
            if row.candidate != label or change.verdict != distrusted:
                continue
            stat = None if row.cpu else stat_named(row.stat)
            # a saturated pair's intervals already have the saturated prior
            bound = change if facts.saturated[label] else \
                facts.loaded_bounds.get((row.op, label), {}).get(row.stat)
            tails += stat is not None and not bounded_by_load(stat.probability)
            if distrust.holds_beyond_load(None if row.cpu else bound, stat, distrusted,
                                          facts.options.noise):
                kept += 1
                continue
            rows[row] = dataclasses.replace(change, verdict=iv.Verdict.UNCLEAR,
                                            note=MACHINE_BUSIER)
        notes.append(distrust.busier_note(facts.baseline, label, side, facts.loads, kept,
                                          tails))
    return notes


RULES: tuple[tuple[str, Rule], ...] = (
    ("paced", _paced),
    ("no samples", _no_samples),
    ("multiplicity", _multiplicity),
    ("too wide", _too_wide),
    ("not stationary", _not_stationary),
    ("machine busier", _machine_busier),
)


def why(change: iv.Change) -> str | None:
    """Why a finished row has its verdict, in the words the reports print after it: the
    reason a rule gave ('adjusted', 'not stationary', 'machine busier', 'behind schedule',
    'interval > ×10', 'no samples', a series' 'same settings'), for an unclear row without
    one INTERVAL_HOLDS_ZERO, and for a row without a verdict why it has no interval; None when
    the interval says it all."""
    if change.verdict == iv.Verdict.UNCLEAR:
        return change.note or INTERVAL_HOLDS_ZERO
    if change.verdict == iv.Verdict.NA:
        return change.note or "no interval"
    if change.verdict in iv.DIRECTED:
        return change.note or (TOO_WIDE if not change.interval_shown else None)
    return None


def more_runs_decide(change: iv.Change) -> bool:
    """An unclear row that more runs of the same machine state would likely decide (not one
    the distrust rules took back: those need a quieter machine or a longer warm-up)."""
    return change.verdict == iv.Verdict.UNCLEAR and change.note in MORE_RUNS_DECIDE


def by_op(rows: Mapping[Row, iv.Change]
          ) -> tuple[dict[str, dict[str, dict[str, iv.Change]]], dict[str, dict[str, iv.Change]]]:
    """Finished rows as the Comparison holds them: op -> candidate -> statistic -> change (in
    the measured order), and CPU row name -> candidate -> change."""
    ops: dict[str, dict[str, dict[str, iv.Change]]] = {}
    cpu: dict[str, dict[str, iv.Change]] = {}
    for row, change in rows.items():
        if row.cpu:
            cpu.setdefault(row.op, {})[row.candidate] = change
        else:
            ops.setdefault(row.op, {}).setdefault(row.candidate, {})[row.stat] = change
    return ops, cpu


def measured_rows(op_changes: Mapping[str, Mapping[str, Mapping[str, iv.Change]]],
                  cpu_changes: Sequence[tuple[str, Mapping[str, iv.Change]]]
                  ) -> dict[Row, iv.Change]:
    """The rows to judge: op -> candidate -> statistic -> change, and (name, candidate ->
    change) per CPU row, as Row -> change."""
    rows = {Row(candidate, op, stat): change
            for op, by_candidate in op_changes.items()
            for candidate, stats in by_candidate.items() for stat, change in stats.items()}
    rows.update({Row(candidate, name, ""): change for name, by_candidate in cpu_changes
                 for candidate, change in by_candidate.items()})
    return rows
