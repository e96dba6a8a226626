"""A series as the report's table model (tables.py), built once and laid out by the text,
markdown and HTML emitters: per op one table with the points as columns (MMTests'
compare-kernels) and two rows per statistic, its value and its change against the baseline
point (`*`: the 95% interval excludes 0; `»`: a change point of that statistic is there), cut
into tables that fit the page, or the points as rows where there are too many; then the change
points. Nothing is computed here: every number is a field of the Series."""

from __future__ import annotations

import os
import shlex

from ..analysis.change import excludes_zero
from ..analysis.display import TimeUnit, choose_time_unit
from ..compare.seriesmodel import Series, SeriesChange, SeriesOp
from .tables import LEFT, RIGHT, Cell, Column, Section, Table, cells
from .wording import format_count, format_interval, format_percent, stat_cell

WIDTH = 100
LABEL_WIDTH = 9          # the statistic's column
MIN_CELL, MAX_CELL = 9, 16
MAX_WRAPS = 2            # more tables of columns than this: the points as rows
SIGNIFICANT, CHANGE_POINT = "*", "»"


def legend(series: Series) -> list[str]:
    base = series.points[series.baseline].label
    return [f"change = point/{base} − 1 (+: the number got larger; lower latency and higher "
            f"rate are better); {SIGNIFICANT} its 95% interval excludes 0 (two-level: time "
            "blocks within runs and the spread between runs, as compare); "
            f"{CHANGE_POINT} a change point of that statistic lands on this point"]


def header_lines(series: Series) -> list[str]:
    """What the series holds, a line per point."""
    lines = [f"stallbench series — workload {series.workload}, {len(series.points)} points by "
             f"{series.by}, baseline {series.points[series.baseline].label}"]
    for point in series.points:
        facts = [f"{len(point.runs)} run(s)", point.first_utc[:16].replace("T", " ")]
        if point.kernels:
            facts.append("kernel " + ", ".join(point.kernels))
        if point.commit:
            facts.append(f"commit {point.commit[:12]}")
        if point.hosts:
            facts.append("host " + ", ".join(point.hosts))
        if point.variants != [point.label]:
            facts.append("variants " + ", ".join(point.variants))
        lines.append(f"  {point.label}: " + "; ".join(facts))
    lines += [f"note: {note}" for note in series.notes]
    if series.noise_profile:
        lines.append(f"run-to-run prior: {series.noise_profile}")
    return lines + [f"left out: {p}" for p in series.problems]


def short_labels(labels: list[str], width: int) -> tuple[list[str], str | None]:
    """Labels that fit `width`: as they are, else without the part every label shares at its
    start and end (6.1.0-53-amd64, 6.1.0-56-amd64 -> 53, 56), said as 'start…end'; a label
    still too long is cut at its end."""
    if max(len(label) for label in labels) <= width or len(labels) < 2:
        return [label[:width] for label in labels], None
    prefix = os.path.commonprefix(labels)
    suffix = os.path.commonprefix([label[::-1] for label in labels])[::-1]
    keep = min(len(suffix), min(len(label) for label in labels) - len(prefix))
    suffix = suffix[len(suffix) - keep:] if keep > 0 else ""
    middles = [label[len(prefix):len(label) - len(suffix)] for label in labels]
    if not all(middles):
        return [label[:width] for label in labels], None
    return [m[:width] for m in middles], f"{prefix}…{suffix}"


def _marks(series: Series, op: str) -> dict[tuple[str, int], SeriesChange]:
    return {(c.stat, c.index): c for c in series.change_points if c.op == op}


def _value(series: Series, op: SeriesOp, key: str, i: int, unit: TimeUnit,
           marks: dict) -> Cell:
    text = stat_cell(op.stats[i], key, unit) if key != "samples" else \
        format_count(op.stats[i].samples)
    mark = marks.get((key, i))
    return Cell(f"{CHANGE_POINT}{text}" if mark else text, mark.verdict if mark else None)


def _change(op: SeriesOp, key: str, i: int) -> Cell:
    changes = op.changes[i]
    change = changes.get(key) if changes else None
    if change is None or change.change is None:
        return Cell("")
    star = SIGNIFICANT if excludes_zero(change) else ""
    return Cell(format_percent(change.change) + star)


def _rows(series: Series) -> list[tuple[str, str]]:
    """(key, label) of each row: samples, then each statistic."""
    return [("samples", "samples"), *((s.key, s.label) for s in series.stats)]


def op_sections(series: Series, op: SeriesOp) -> list[Section]:
    """The op's table: points as columns (cut to fit WIDTH), or as rows when there are many."""
    unit = choose_time_unit([v for s in op.stats for v in s.values.values() if v])
    what = "response time" if op.kind == "response" else "latency"
    title = f"{op.op} — {what} in {unit.name}, rate in ops/s"
    marks = _marks(series, op.op)
    labels, pattern = short_labels(series.labels, MAX_CELL - 1)
    notes = [f"points named {pattern}: the part shown"] if pattern else []
    cell = max(MIN_CELL, min(MAX_CELL, max(len(label) for label in labels) + 1))
    per_table = (WIDTH - 2 - LABEL_WIDTH) // (cell + 1)
    if len(labels) > per_table * MAX_WRAPS:
        table, pattern = _transposed(series, op, unit, marks)
        return [Section(title, [table], [f"points named {pattern}: the part shown"]
                        if pattern else [])]
    tables = []
    for start in range(0, len(labels), per_table):
        shown = range(start, min(start + per_table, len(labels)))
        columns = [Column("", LEFT, LABEL_WIDTH, 2),
                   *(Column(labels[i], RIGHT, cell) for i in shown)]
        rows = []
        for key, label in _rows(series):
            rows.append([Cell(label), *(_value(series, op, key, i, unit, marks) for i in shown)])
            if key != "samples":
                rows.append([Cell("  change"), *(_change(op, key, i) for i in shown)])
        tables.append(Table(columns, rows))
    return [Section(title, tables, notes)]


def _transposed(series: Series, op: SeriesOp, unit: TimeUnit, marks: dict
                ) -> tuple[Table, str | None]:
    """One row per point: its samples, then each statistic's value and change."""
    stats = [Column("samples", RIGHT, 9)]
    for _key, label in _rows(series)[1:]:
        stats += [Column(label, RIGHT, 8), Column("change", RIGHT, 7)]
    room = WIDTH - 2 - sum(c.width + c.gap for c in stats)
    labels, pattern = short_labels(series.labels, max(8, room))
    columns = [Column("point", LEFT, max(5, *(len(label) for label in labels)), 2), *stats]
    rows = []
    for i, label in enumerate(labels):
        row = [Cell(label), _value(series, op, "samples", i, unit, marks)]
        for key, _ in _rows(series)[1:]:
            row += [_value(series, op, key, i, unit, marks), _change(op, key, i)]
        rows.append(row)
    return Table(columns, rows), pattern


def change_point_section(series: Series) -> Section:
    """Each change point: the statistic, the first point after it and the one before, the
    change across it with its interval, the verdict; the bisect command where commits allow."""
    title = (f"Change points of {', '.join(series.metrics)}" if len(series.metrics) <= 6 else
             f"Change points of {len(series.metrics)} statistics")
    notes = ["each: the change of the points from it on against the points before it (back to "
             "the previous change point); binary segmentation, tested with compare's "
             "two-level interval, Bonferroni over the places tried and the statistics "
             "(analysis/changepoints.py)"]
    if not series.change_points:
        return Section(title, [], ["none: no statistic shifted beyond its runs' noise", *notes])
    columns = [Column("statistic", LEFT, 0, 2), Column("between", LEFT, 0, 2),
               Column("change", RIGHT, 0, 2), Column("95% interval", LEFT, 0, 2),
               Column("verdict", LEFT, 0, 2), Column("", LEFT)]
    rows = [[*cells(c.metric, f"{c.before} → {c.variant}", format_percent(c.change.change),
                    format_interval(c.change)),
             Cell(f"{c.verdict} ({c.change.note})" if c.change.note else c.verdict, c.verdict),
             Cell("" if c.new else "(before --since)")] for c in series.change_points]
    commands = []     # as they are, never wrapped: each a line to copy
    for c in series.change_points:
        if c.bisect:
            commands += [f"# {c.metric} at {c.variant}: the commits between {c.before} and it",
                         shlex.join(bisect_argv(c))]
    return Section(title, [Table(columns, rows)], notes, preformatted=commands)


def bisect_argv(change: SeriesChange) -> list[str]:
    """The `stallbench bisect --git` command for a change point between two commits."""
    b = change.bisect or {}
    return ["stallbench", "bisect", "--git", str(b["git"]), "--good", b["good"], "--bad",
            b["bad"], "--plan", str(b["plan"]), "--metric", change.metric]


def series_sections(series: Series) -> list[Section]:
    return [s for op in series.ops if any(st.samples for st in op.stats)
            for s in op_sections(series, op)] + [change_point_section(series)]


def render(series: Series, fmt: str) -> str:
    """text, markdown or html (json and csv: seriesdata.py)."""
    import textwrap

    head = [line for text in header_lines(series) + legend(series)
            for line in textwrap.wrap(text, WIDTH, subsequent_indent="    ")]
    if fmt == "text":
        from .text import section_lines
        lines = [*head, ""]
        for section in series_sections(series):
            lines += section_lines(section, WIDTH)
        return "\n".join(line.rstrip() for line in lines).rstrip() + "\n"
    if fmt == "markdown":
        from .markdown import section_lines as markdown_lines
        lines = [f"# stallbench series — {series.workload}", "", "```", *head, "```", ""]
        for section in series_sections(series):
            lines += markdown_lines(section)
        return "\n".join(lines).rstrip() + "\n"
    import html

    from .htmlout import page, preformatted, section_html
    body = [f"<h1>stallbench series — {html.escape(series.workload)}</h1>", preformatted(head)]
    for section in series_sections(series):
        body += section_html(section)
    return page(f"stallbench series — {series.workload}", body)
