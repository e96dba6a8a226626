"""Plain-text report that fits in 100 columns, with bcc-style log2 histograms side by side: the
table model (tables.py) as monospace lines."""

from __future__ import annotations

import textwrap

from ..analysis.intervals import Verdict
from ..analysis.quantiles import MIN_TAIL_SAMPLES
from ..compare.model import Comparison
from . import SECTIONS
from .environment import render_lines as environment_lines  # fidelity
from .headline import headline_sections
from .opblocks import distribution_sections, stalls_sections
from .tables import (
    RIGHT,
    Cell,
    Chapter,
    Column,
    Section,
    Table,
    comparison_sections,
    variants_section,
)
from .where import where_chapter
from .wording import duet_lines, level_shift_notes, method_line, run_count_notes

_SHARE_WIDTH = len("100.0%")  # a bar's share, right-aligned before it


# ANSI styles of a coloured terminal (report/__init__.py decides when: --color, NO_COLOR)
_STYLE = {Verdict.WORSE: "\x1b[31m", Verdict.BETTER: "\x1b[32m", "strong": "\x1b[1m",
          "flag": "\x1b[1;31m"}
_RESET = "\x1b[0m"


def _styled(text: str, style: str | None, color: bool) -> str:
    return f"{_STYLE[style]}{text}{_RESET}" if color and style in _STYLE and text else text


def render(comparison: Comparison, width: int = 100, sections: tuple[str, ...] = SECTIONS,
           color: bool = False) -> str:
    """The report's sections asked for (report.SECTIONS, in that order); `color`: ANSI
    colour (worse red, better green, the headline bold)."""
    parts = {
        "variants": lambda: section_lines(variants_section(comparison), width),
        "headline": lambda: [line for section in headline_sections(comparison)
                             for line in section_lines(section, width, color)],
        "notes": lambda: note_lines(comparison, width),
        "tables": lambda: [line for section in comparison_sections(comparison)
                           for line in section_lines(section, width, color)],
        "where": lambda: where_section(comparison, width),
        "distributions": lambda: [line for section in distribution_sections(comparison, width)
                                  for line in section_lines(section, width)],
        "stalls": lambda: [line for section in stalls_sections(comparison)
                           for line in section_lines(section, width)],
        "method": lambda: method_lines(comparison, width),
    }
    out = [line for name in SECTIONS if name in sections for line in parts[name]()]
    return "\n".join(line.rstrip() for line in out).rstrip() + "\n"


def _wrap(text: str, width: int, indent: str = "") -> list[str]:
    """Lines of at most `width`, the later ones indented two more; never broken at a hyphen
    (paths and commands stay whole)."""
    return textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=indent + "  ",
                         break_on_hyphens=False) or [""]


def method_lines(comparison: Comparison, width: int) -> list[str]:
    """How to read the numbers: the sign, the intervals, when a change is called."""
    return [*_wrap("how to read it: change = candidate/baseline − 1 (+ means the number got "
                   "larger); lower latency and higher rate are better; " +
                   method_line(comparison) +
                   f"; better/worse only when the interval excludes 0 and |change| > "
                   f"{comparison.options.noise:.0%} ({comparison.adjustment}); same: interval "
                   f"within ±{comparison.options.noise:.0%}; n/r: fewer than "
                   f"{MIN_TAIL_SAMPLES} samples at or beyond the percentile; min and max have "
                   "no interval", width), ""]


def note_lines(comparison: Comparison, width: int) -> list[str]:
    """What the verdicts rest on: duets, the runs per variant and their prior, regime mixes,
    the comparison's notes, what was left out, what else differed between the machines."""
    lines = []
    for sentence in duet_lines(comparison):
        lines += _wrap(sentence, width)
    for sentence in run_count_notes(comparison):
        lines += _wrap("note: " + sentence, width)
    for sentence in level_shift_notes(comparison):
        lines += _wrap("NOT STATIONARY: " + sentence, width)
    for note in comparison.notes:
        lines += _wrap("note: " + note, width)
    for problem in comparison.problems:
        lines += _wrap("left out: " + problem, width)
    lines += environment_lines(comparison.environment, width)  # fidelity: report/environment.py
    return [*lines, ""] if lines else []


def section_lines(section: Section, width: int = 100, color: bool = False) -> list[str]:
    """A section of the table model as text: its title (a bare list's with a colon; the headline's
    bold in colour), tables, lines kept as they are, the list and the notes wrapped under them;
    a blank line after."""
    title = textwrap.wrap(section.title + (":" if section.items and not section.tables else ""),
                          width,
                          subsequent_indent="  ")
    lines = [_styled(line, "strong", color and section.strong) for line in title]
    for table in section.tables:
        lines += sentence_lines(table, width) if table.sentences else \
            table_lines(table, width, color)
    lines += section.preformatted
    for text in (*section.items, *section.notes):
        lines += _wrap(text, width, "  ")
    return [*lines, ""]


def table_lines(table: Table, width: int = 100, color: bool = False) -> list[str]:
    """Columns padded to their width (titles cut to it) or, width 0, to their widest cell; in a
    table to be cut, a line longer than the page is cut to it. `color`: a verdict cell red
    (worse) or green (better), its flag bold red (not in tables that are cut)."""
    texts = [[_cell_text(cell, column) for cell, column in zip(row, table.columns, strict=True)]
             for row in table.rows]
    widths = [column.width or max([len(column.title), *(len(r[i]) for r in texts)])
              for i, column in enumerate(table.columns)]
    color = color and not table.cut

    def cell_text(cell: Cell, text: str, w: int, align: str) -> str:
        padding = " " * max(w - len(text), 0)
        if not color or (cell.mark not in _STYLE and not cell.flag):
            return padding + text if align == RIGHT else text + padding
        styled = _styled(cell.text, cell.mark, color) + \
            (f"  {_styled(cell.flag, 'flag', color)}" if cell.flag else "")
        return padding + styled if align == RIGHT else styled + padding

    def line(row: list[Cell], row_texts: list[str]) -> str:
        text = "".join(" " * column.gap + cell_text(cell, t, w, column.align)
                       for column, cell, t, w in zip(table.columns, row, row_texts, widths,
                                                     strict=True)).rstrip()
        return text if len(text) <= width or not table.cut else text[:width - 1] + "…"

    header = [c.title[:c.title_width or c.width] if c.width else c.title for c in table.columns]
    return [line([Cell(t) for t in header], header),
            *(line(row, row_texts) for row, row_texts in zip(table.rows, texts, strict=True))]


def _cell_text(cell: Cell, column: Column) -> str:
    """A cell's words and flag; a share in a column with a bar: the share, then the bar."""
    if cell.share is not None and column.bar:
        stars = "*" * int(round(cell.share * column.bar))
        return f"{cell.text:>{_SHARE_WIDTH}} |{stars:<{column.bar}}|"
    return cell.text + (f"  {cell.flag}" if cell.flag else "")


def sentence_lines(table: Table, width: int = 100) -> list[str]:
    """A table of sentences: each row one line, indented by the first column's gap and wrapped
    to the page, its cells (those not empty, padded to their column's width) each between the
    column's lead and tail."""
    indent = " " * table.columns[0].gap if table.columns else ""
    lines = []
    for row in table.rows:
        text = "".join(column.lead + cell.text.ljust(column.width) + column.tail
                       for column, cell in zip(table.columns, row, strict=True) if cell.text)
        lines += _wrap(text, width, indent)
    return lines


def chapter_lines(chapter: Chapter, width: int = 100) -> list[str]:
    """A chapter as text: its title underlined, warnings (!) and findings (*) wrapped, a blank
    line, its sections, then its closing notes."""
    lines = [chapter.title, "=" * len(chapter.title)]
    for mark, notes in (("!", chapter.warnings), ("*", chapter.findings)):
        for note in notes:
            lines += textwrap.wrap(note, width, initial_indent=f"{mark} ",
                                   subsequent_indent="  ")
    lines.append("")
    for section in chapter.sections:
        lines += section_lines(section, width)
    for note in chapter.closing:
        lines += _wrap(f"note: {note}", width)
    return [*lines, ""] if chapter.closing else lines


def where_section(comparison: Comparison, width: int) -> list[str]:
    if comparison.where_error:
        return [comparison.where_error, ""]
    if comparison.where is None:
        return []
    return chapter_lines(where_chapter(comparison.where), width)
