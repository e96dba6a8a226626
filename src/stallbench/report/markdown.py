"""Markdown report: the text report's tables as GitHub-flavoured markdown."""

from __future__ import annotations

from ..analysis.intervals import DIRECTED
from ..compare.model import Comparison
from . import SECTIONS
from .headline import headline_sections
from .opblocks import distribution_sections, stalls_sections
from .tables import RIGHT, Cell, Chapter, Section, comparison_sections, variants_section
from .text import method_lines, note_lines
from .where import where_chapter

BOLD = DIRECTED


def _escape(text: str) -> str:
    return text.replace("|", "\\|")


def render(comparison: Comparison, sections: tuple[str, ...] = SECTIONS) -> str:
    """The sections asked for (report.SECTIONS), the headline's as headings of their own."""
    parts = {
        "variants": lambda: section_lines(variants_section(comparison)),
        "headline": lambda: [line for section in headline_sections(comparison)
                             for line in section_lines(section)],
        "notes": lambda: _fenced(note_lines(comparison, 100)),
        "tables": lambda: [line for section in comparison_sections(comparison)
                           for line in section_lines(section)],
        "where": lambda: where_section(comparison),
        "distributions": lambda: [line for section in distribution_sections(comparison)
                                  for line in section_lines(section)],
        "stalls": lambda: [line for section in stalls_sections(comparison)
                           for line in section_lines(section)],
        "method": lambda: _fenced(method_lines(comparison, 100)),
    }
    out = [line for name in SECTIONS if name in sections for line in parts[name]()]
    return "\n".join(out).rstrip() + "\n"


def _fenced(lines: list[str]) -> list[str]:
    lines = [line for line in lines if line]
    return ["```", *lines, "```", ""] if lines else []


def section_lines(section: Section) -> list[str]:
    """A section of the table model as a heading of its level, GitHub tables, a fenced block,
    a list and paragraphs, each followed by a blank line."""
    title = section.title + (f" ({section.context})" if section.context else "")
    lines = [f"{'#' * section.level} {_escape(title)}", ""]
    for table in section.tables:
        lines.append(_row([_escape(c.title) for c in table.columns]))
        lines.append("|" + "".join("---:|" if c.align == RIGHT else "---|"
                                   for c in table.columns))
        lines += [_row([_cell(cell) for cell in row]) for row in table.rows]
        lines.append("")
    if section.preformatted:
        lines += ["```", *section.preformatted, "```", ""]
    if section.items:
        lines += [*(f"- {item}" for item in section.items), ""]
    for note in section.notes:
        lines += [_escape(note), ""]
    return lines


def chapter_lines(chapter: Chapter) -> list[str]:
    """A chapter as a heading, its warnings quoted, its findings a list, its sections, then its
    closing notes quoted."""
    lines = [f"## {_escape(chapter.title)}", ""]
    lines += [f"> **Warning:** {warning}" for warning in chapter.warnings]
    if chapter.warnings:
        lines.append("")
    lines += [f"- {finding}" for finding in chapter.findings]
    lines.append("")
    for section in chapter.sections:
        lines += section_lines(section)
    for note in chapter.closing:
        lines += [f"> **Note:** {_escape(note)}", ""]
    return lines


def _row(texts: list[str]) -> str:
    return "|" + "|".join(f" {t} " if t else " " for t in texts) + "|"


def _cell(cell: Cell) -> str:
    """A verdict is bold when it is a finding; a flag, when there is one, is the emphasis."""
    text = _escape(cell.text)
    if cell.flag:
        return f"{text} **{_escape(cell.flag)}**"
    return f"**{text}**" if cell.mark in BOLD else text


def where_section(comparison: Comparison) -> list[str]:
    if comparison.where_error:
        return [comparison.where_error, ""]
    if comparison.where is None:
        return []
    return [*chapter_lines(where_chapter(comparison.where)), ""]
