"""The report's table model: sections of titled tables with notes, built once from a Comparison
(here: what was compared and the op and CPU tables; opblocks.py: each op's distribution and stalls;
headline.py; where.py from its where section) and laid out by each format (text.py, markdown.py,
htmlout.py) without deciding any content.

As in hyperfine's MarkupExporter, the builder decides every cell's words once; an emitter only
turns rows into its syntax. Nothing is computed here: every number is a field of the Comparison,
formatted with wording.py; the unit of an op's table is chosen from its values
(analysis/display.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..analysis.quantiles import MIN_TAIL_SAMPLES, RATE
from ..compare.model import Comparison, CpuRow, OpComparison
from ..compare.verdicts import TOO_WIDE
from .wording import (
    change_cell,
    decide_advice,
    format_count,
    format_percent,
    format_seconds,
    op_unit,
    rate_flag,
    stat_cell,
)

LEFT, RIGHT = "left", "right"


@dataclass(frozen=True)
class Column:
    title: str
    align: str = LEFT        # LEFT | RIGHT
    width: int = 0           # monospace emitters pad cells to it and cut titles to it; 0: none
    gap: int = 1             # monospace emitters: spaces before the column (first: the indent)
    title_width: int = 0     # monospace emitters cut the title to it; 0: to width
    bar: int = 0             # monospace emitters draw a cell's share as a bar this long
    lead: str = ""           # a sentence table's words before a cell (left out with an empty one)
    tail: str = ""           # ... and after it


@dataclass(frozen=True)
class Cell:
    text: str
    mark: str | None = None  # a verdict markup emitters style (HTML class; bold in markdown)
    flag: str = ""           # a loud word after the text (STARVED, FEWER OPS)
    share: float | None = None  # a share of a whole (0..1) that emitters may draw as a bar


@dataclass
class Table:
    columns: list[Column]
    rows: list[list[Cell]]
    cut: bool = False   # monospace emitters cut a line longer than the page to it, ending in …
    # monospace emitters write each row as a sentence, no header: the cells, each between its
    # column's lead and tail, wrapped to the page; markup emitters show an ordinary table
    sentences: bool = False


@dataclass
class Section:
    title: str
    tables: list[Table]
    notes: list[str] = field(default_factory=list)  # sentences below the tables
    context: str = ""   # markup headings add it in parentheses; a text table's header names it
    preformatted: list[str] = field(default_factory=list)  # lines shown as they are (histograms)
    items: list[str] = field(default_factory=list)         # a list, one entry a line
    level: int = 2      # its heading's depth: 2 in the report, 3 inside a Chapter
    strong: bool = False  # the headline: bold in a coloured terminal, boxed in HTML


@dataclass
class Chapter:
    """Sections under one heading, led by warnings and findings and closed by notes (the where
    section)."""
    title: str
    sections: list[Section]
    warnings: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)  # one sentence each, a list
    css_class: str = ""  # HTML: the class of the <section> that holds it
    closing: list[str] = field(default_factory=list)   # notes after its sections


def cells(*texts: str) -> list[Cell]:
    return [Cell(t) for t in texts]


def _change_columns(baseline: str, candidate: str) -> list[Column]:
    """The layout shared by every change table: stat, baseline, candidate, change, interval,
    verdict."""
    return [Column("", LEFT, 8, 2), Column(baseline, RIGHT, 14), Column(candidate, RIGHT, 14),
            Column("change", RIGHT, 8), Column("95% interval", LEFT, 18, 2),
            Column("verdict", LEFT)]


def _verdict(word: str, flag: str = "") -> Cell:
    return Cell(word, word, flag)


def op_sections(op: OpComparison, comparison: Comparison) -> list[Section]:
    """One section per candidate: the op's statistics side by side with their changes."""
    unit = op_unit(op)
    what = "response time (completion − planned start)" if op.kind == "response" else "latency"
    base_label = comparison.baseline
    base = op.stats[base_label]
    out = []
    for cand_label in comparison.candidates:
        cand = op.stats[cand_label]
        samples_change = op.samples_change.get(cand_label)
        rows = [[*cells("samples", format_count(base.samples), format_count(cand.samples),
                        "" if samples_change is None else format_percent(samples_change), ""),
                 Cell("")]]
        for stat in comparison.stats:
            key = stat.key
            change, interval, word = change_cell(op.changes[cand_label].get(key),
                                                 base.samples == 0 or cand.samples == 0)
            flag = rate_flag(op, cand_label) if key == RATE.key else ""
            rows.append([*cells(stat.label, stat_cell(base, key, unit),
                                stat_cell(cand, key, unit), change, interval),
                         _verdict(word, flag)])
        out.append(Section(f"{op.op} — {what} in {unit.name}",
                           [Table(_change_columns(base_label, cand_label), rows)],
                           _op_notes(op, comparison, cand_label),
                           context=f"{cand_label} vs {base_label}"))
    return out


def _op_notes(op: OpComparison, comparison: Comparison, cand_label: str) -> list[str]:
    base_label = comparison.baseline
    notes = []
    if comparison.options.percentiles is not None:   # asked with --percentiles: say what it takes
        for stat in comparison.stats:
            short = [(label, op.stats[label]) for label in (base_label, cand_label)
                     if stat.key in op.stats[label].needed and op.stats[label].samples]
            if short:
                notes.append(f"{stat.label} is not resolved: it needs ≥ "
                             f"{format_count(short[0][1].needed[stat.key])} ops "
                             f"({MIN_TAIL_SAMPLES} at or beyond it); " + ", ".join(f"{label} has "
                                                        f"{format_count(s.samples)}"
                                                        for label, s in short))
    probability = op.slower_probability[cand_label]
    if probability is not None:
        notes.append(f"P({cand_label} op slower than {base_label} op) = {probability:.2f}")
    spreads = [(label, op.stats[label].iteration_p99_spread) for label in
               (base_label, cand_label)]
    if any(s is not None for _, s in spreads):
        notes.append("iterations differ (p99 max−min / median): " + ", ".join(
            f"{label} {s:.1%}" for label, s in spreads if s is not None))
    advice = decide_advice(op.changes[cand_label], comparison.stats)
    if advice:
        notes.append(advice)
    wide = [stat.label for stat in comparison.stats
            if (change := op.changes[cand_label].get(stat.key)) is not None
            and not change.interval_shown]
    if wide:
        notes.append(f"{', '.join(wide)}: {TOO_WIDE}, so no interval is shown (the JSON has "
                     "it); more runs per variant, a noise profile of this host (`stallbench "
                     "calibrate PLAN`) or a quieter machine would give one")
    return notes


def _cpu_row(row: CpuRow, baseline: str, candidate: str) -> list[Cell]:
    change, interval, word = change_cell(row.changes[candidate])
    return [*cells(row.name.capitalize(), format_seconds(row.values[baseline]),
                   format_seconds(row.values[candidate]), change, interval), _verdict(word)]


def cpu_section(comparison: Comparison) -> list[Section]:
    """The workload's CPU time, one table per candidate."""
    if not comparison.cpu:
        return []
    base = comparison.baseline
    tables = [Table(_change_columns(base, cand),
                    [_cpu_row(row, base, cand) for row in comparison.cpu])
              for cand in comparison.candidates]
    return [Section("CPU time of the workload's processes (seconds per iteration)", tables)]


def comparison_sections(comparison: Comparison) -> list[Section]:
    """The report's tables in reading order: each op against each candidate, then CPU time."""
    out = [s for op in comparison.ops for s in op_sections(op, comparison)]
    return out + cpu_section(comparison)


def variants_section(comparison: Comparison) -> Section:
    """What was compared: the workload, then each variant's role, runs and kernel."""
    kernels = any(info.kernel for info in comparison.variants)
    columns = [Column("role", LEFT, len("candidate"), 2), Column("variant", lead=" "),
               Column("runs", lead=": "), Column("seconds each", lead=" run(s) of ", tail=" s"),
               *([Column("kernel", lead=", kernel ")] if kernels else [])]
    rows = [cells("baseline" if info.label == comparison.baseline else "candidate", info.label,
                  str(len(info.runs)), ", ".join(f"{r.duration_s:.1f}" for r in info.runs),
                  *([info.kernel or ""] if kernels else []))
            for info in comparison.variants]
    return Section(f"stallbench compare — workload {comparison.workload}",
                   [Table(columns, rows, sentences=True)], level=1)
