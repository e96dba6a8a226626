"""The verdicts of a comparison's rows: which rows decide (the false-discovery budget), the
Benjamini–Hochberg adjustment and verdict words, intervals too wide to show, and the rates of
paced ops, which their own schedule sets."""

from __future__ import annotations

import numpy as np

from ..analysis import intervals as iv
from ..analysis import paired
from ..analysis.quantiles import DECIDING_STATS, RATE, stat_named
from ..analysis.summary import RESPONSE_SUFFIX
from .loading import OpSide
from .model import CompareOptions, CpuRow, OpComparison

METRICS, DEFAULT = "metrics", "default"   # the false-discovery budgets of a candidate


def decides(op: OpComparison, stat: str, options: CompareOptions) -> str | None:
    """The false-discovery budget a row is in, or None: the metrics asked for with --metric
    (check, bisect, iterations auto, compare --metric) in their own, so that a metric's verdict
    is the one `check` gives whatever else is shown; DECIDING_STATS of every op (not a response
    op's rate, which is its service op's) in theirs, unless only the metrics decide (check)."""
    if options.metrics is not None and (op.op, stat) in options.metrics:
        return METRICS
    if options.default_rows and stat in DECIDING_STATS and \
            not (op.kind == "response" and stat == RATE.key):
        return DEFAULT
    return None


def adjust(ops: list[OpComparison], cpu: list[CpuRow], candidates: list[str],
           options: CompareOptions) -> None:
    """Benjamini–Hochberg within each candidate and budget over the rows that decide
    (`decides`), then their verdict words and, where undecided, why and how many runs would
    likely decide; the other rows keep their unadjusted interval with the verdict
    INTERVAL_ONLY."""
    for label in candidates:
        families: dict[str, list[tuple[iv.Change, bool]]] = {METRICS: [], DEFAULT: []}
        for op in ops:
            for stat, change in op.changes[label].items():
                if change.verdict != iv.Verdict.NA:
                    continue
                budget = decides(op, stat, options)
                if budget is not None:
                    families[budget].append((change, stat_named(stat).higher_is_better))
                elif change.low is not None:
                    change.verdict = iv.Verdict.INTERVAL_ONLY
        for family in families.values():
            _decide(family, options)
        for op in ops:
            for change in op.changes[label].values():
                _mark_wide_interval(change)
    for row in cpu:
        for change in row.changes.values():
            if change.low is not None and change.verdict == iv.Verdict.NA:
                change.verdict = iv.Verdict.INTERVAL_ONLY


def _decide(family: list[tuple[iv.Change, bool]], options: CompareOptions) -> None:
    """One budget's Benjamini–Hochberg adjustment and verdicts."""
    with_p = [change for change, _ in family if change.p_value is not None]
    for change, adjusted in zip(with_p, iv.benjamini_hochberg([c.p_value for c in with_p]),
                                strict=True):
        change.p_adjusted = adjusted
    for change, higher_is_better in family:
        change.verdict = iv.verdict(change, higher_is_better, options.noise)
        if change.verdict == iv.Verdict.UNCLEAR:
            if iv.excludes_zero(change) and abs(change.change) > options.noise:
                change.note = iv.ADJUSTED
            change.iterations_needed = (paired.pairs_needed if change.variance.get(
                "paired") else iv.iterations_to_decide)(change, options.noise)


def _mark_wide_interval(change: iv.Change) -> None:
    """An interval wider than MAX_INTERVAL_RATIO either way tells nothing as numbers: it is not
    shown (Change.interval_shown), its verdict stands where even it excludes 0 (O_DIRECT's 40x
    on a saturated machine), and an unclear row says why (TOO_WIDE)."""
    if iv.too_wide(change):
        change.interval_shown = False
        if change.verdict == iv.Verdict.UNCLEAR:
            change.note = iv.TOO_WIDE


def pace_rates(ops: list[OpComparison], sides_of: dict[str, list[OpSide]],
               labels: list[str], rate_drop: float) -> None:
    """A paced op's rate is set by its own schedule: no interval, verdict PACED, unless the
    candidate fell behind its schedule by more than `rate_drop` where the baseline did not
    (then worse, BEHIND_SCHEDULE)."""
    names = {op.op for op in ops}
    for op in ops:
        if op.kind != "service" or op.op + RESPONSE_SUFFIX not in names:
            continue
        kept = {label: schedule_kept(side) for label, side in
                zip(labels, sides_of[op.op + RESPONSE_SUFFIX], strict=True)}
        op.schedule_kept = kept
        response = next(o for o in ops if o.op == op.op + RESPONSE_SUFFIX)
        for label in labels[1:]:
            change = op.changes[label]["rate"]
            if change.change is None:
                continue
            base, cand = kept[labels[0]], kept[label]
            behind = cand is not None and cand < 1 - rate_drop and \
                (base is None or base - cand > rate_drop)
            for paced in (op, response):   # the response op completes as often
                paced.changes[label]["rate"] = iv.Change(
                    change.change, verdict=iv.Verdict.WORSE if behind else iv.Verdict.PACED,
                    note=iv.BEHIND_SCHEDULE if behind else None, runs=change.runs)


def schedule_kept(response: OpSide) -> float | None:
    """The share of the runs' time that a paced op's planned starts covered (its response op
    is binned by planned start): 1.0 when it kept its schedule to the end, 0.6 when its last
    op was planned 60% of the way through; the mean over runs."""
    shares = []
    for op, run in zip(response.ops, response.runs, strict=True):
        counts = op.block_count[run.warmup_blocks:]
        if counts.size == 0 or not counts.any():
            continue
        shares.append((int(np.flatnonzero(counts)[-1]) + 1) / counts.size)
    return float(np.mean(shares)) if shares else None
