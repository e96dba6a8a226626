"""The headline: per candidate, the answer before any table (issue 35) — the calls that matter
(worse first, then better), the ops that starved or lost ops, the first cause the where
section gives for each op that got worse or starved, what was not decided and what would decide it.

Built once here as Sections of the table model (tables.py), so the text, markdown and HTML
reports lay out the same thing and the JSON's `headline` holds it (`compare --brief` prints
only it). Nothing is computed: every number is the Comparison's, every cause the where
section's first explanation of that variant and op (WhereSection.explanations), in its words.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..analysis.display import format_ns
from ..analysis.intervals import DIRECTED, Change, Verdict
from ..analysis.quantiles import RATE, Stat
from ..compare.model import Comparison, OpComparison, OpStats
from ..compare.verdicts import why
from .tables import LEFT, RIGHT, Cell, Column, Section, Table, cells
from .wording import change_cell, format_rate, rate_flag, stat_cell

# the order of the calls: regressions first, then rates flagged but undecided, then the better
_ORDER = {Verdict.WORSE: 0, Verdict.BETTER: 2}
_FLAGGED = 1


@dataclass
class Call:
    """One row of the headline: a called change (or a flagged rate) of one op."""
    op: OpComparison
    stat: Stat
    change: Change
    flag: str


def calls(comparison: Comparison, candidate: str) -> list[Call]:
    """The candidate's called changes (better/worse, on the rows that decide) and every rate
    flagged STARVED or FEWER OPS: worse first, then flagged, then better; within each, the op
    with the largest change first, its rows in the report's order (a stable sort)."""
    found = []
    for op in comparison.ops:
        for stat in comparison.stats:
            change = op.changes[candidate].get(stat.key)
            if change is None:
                continue
            flag = rate_flag(op, candidate) if stat.key == RATE.key else ""
            if change.verdict in DIRECTED or flag:
                found.append(Call(op, stat, change, flag))
    # within a kind, the op whose change is largest (as a factor either way) first: the story
    strength: dict[tuple[str, str], float] = {}
    for call in found:
        key = (call.op.op, call.change.verdict)
        factor = abs(math.log1p(call.change.change)) if call.change.change is not None and \
            call.change.change > -1 else math.inf
        strength[key] = max(strength.get(key, 0.0), factor)
    return sorted(found, key=lambda c: (_ORDER.get(c.change.verdict, _FLAGGED),
                                        -strength[c.op.op, c.change.verdict]))


def _value(stats: OpStats, stat: Stat) -> str:
    """A value with its own unit: the headline's rows are of different ops and statistics."""
    if stats.samples == 0 or stat.key in stats.unresolved:
        return stat_cell(stats, stat.key, ("", 1))
    if stat.key == RATE.key:
        return f"{format_rate(stats.rate)}/s"
    return format_ns(stats.values.get(stat.key))


def _row(call: Call, comparison: Comparison, candidate: str) -> list[Cell]:
    op = call.op
    base, cand = op.stats[comparison.baseline], op.stats[candidate]
    change, interval, word = change_cell(call.change, base.samples == 0 or cand.samples == 0)
    return [Cell(word, call.change.verdict, call.flag),
            *cells(op.op, call.stat.label, _value(base, call.stat), _value(cand, call.stat),
                   change, interval)]


def causes(comparison: Comparison, candidate: str, found: list[Call]) -> list[tuple[str, str]]:
    """(op, the where section's first explanation of it) for each op called worse or STARVED
    (not for a FEWER OPS whose rate is undecided: no regression is called there to explain)."""
    if comparison.where is None:
        return []
    worse = dict.fromkeys(c.op.op for c in found
                          if c.change.verdict == Verdict.WORSE or c.flag == "STARVED")
    first: dict[str, str] = {}
    for explanation in comparison.where.explanations:
        if explanation.variant == candidate and explanation.op in worse:
            first.setdefault(explanation.op, explanation.text)
    return [(op, first[op]) for op in worse if op in first]


def _undecided(comparison: Comparison, candidate: str) -> str | None:
    """'not decided: 11 of 15 rows that decide (9 the interval holds 0, 2 machine busier)'."""
    deciding = [change for op in comparison.ops for change in op.changes[candidate].values()
                if change.verdict in (*DIRECTED, Verdict.SAME, Verdict.UNCLEAR)]
    unclear = [change for change in deciding if change.verdict == Verdict.UNCLEAR]
    if not unclear:
        return None
    reasons: dict[str, int] = {}
    for change in unclear:
        reason = why(change)
        reasons[reason] = reasons.get(reason, 0) + 1
    same = sum(change.verdict == Verdict.SAME for change in deciding)
    return (f"not decided: {len(unclear)} of {len(deciding)} rows that decide ("
            + ", ".join(f"{n} {why}" for why, n in reasons.items()) + ")"
            + (f"; {same} the same within ±{comparison.options.noise:.0%}" if same else "")
            + "; the tables below have them")


def _title(comparison: Comparison, candidate: str, found: list[Call]) -> str:
    runs = {v.label: len(v.runs) for v in comparison.variants}
    counts = [f"{sum(c.change.verdict == v for c in found)} {v}" for v in _ORDER
              if any(c.change.verdict == v for c in found)]
    flagged = sorted({f"{c.op.op} {c.flag}" for c in found if c.flag})
    verdicts = ", ".join(counts + flagged) or "no change called"
    return (f"{candidate} against {comparison.baseline} ({runs[candidate]} vs "
            f"{runs[comparison.baseline]} run(s)): {verdicts}")


def headline_sections(comparison: Comparison) -> list[Section]:
    """One section per candidate: its calls as a table, the causes, what is left undecided,
    and the command that would decide it (Comparison.decide_hint, where the caller knew it)."""
    out = []
    for candidate in comparison.candidates:
        found = calls(comparison, candidate)
        tables = []
        if found:
            # the verdict first: it is what a reader scans for (and a phone shows it unscrolled)
            columns = [Column("verdict", LEFT, gap=2), Column("op", LEFT, gap=2), Column("stat"),
                       Column(comparison.baseline, RIGHT, gap=2), Column(candidate, RIGHT, gap=2),
                       Column("change", RIGHT, gap=2), Column("95% interval", LEFT, gap=2)]
            tables.append(Table(columns, [_row(c, comparison, candidate) for c in found]))
        notes = [n for n in (_undecided(comparison, candidate), comparison.decide_hint) if n]
        out.append(Section(_title(comparison, candidate, found), tables, notes,
                           items=[f"why: {text}" for _, text in causes(comparison, candidate,
                                                                        found)],
                           strong=True))
    return out

