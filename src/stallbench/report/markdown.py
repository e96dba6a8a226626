"""Markdown report: the text report's tables as GitHub-flavoured markdown."""

from __future__ import annotations

from ..analysis.intervals import DIRECTED
from ..compare.model import Comparison
from .tables import RIGHT, Cell, Chapter, Section, comparison_sections
from .text import distribution, header, stalls
from .where import where_chapter

BOLD = DIRECTED


def _escape(text: str) -> str:
    return text.replace("|", "\\|")


def render(comparison: Comparison) -> str:
    out = [f"# stallbench compare — {comparison.workload}", ""]
    out += ["```", *header(comparison, 100), "```", ""]
    for section in comparison_sections(comparison):
        out += section_lines(section)
    out += where_section(comparison)
    for op in comparison.ops:
        block = distribution(op, comparison, 100) + stalls(op, comparison, 100)
        if block:
            out += [f"### {op.op}: distribution and stalls", "", "```", *block, "```", ""]
    return "\n".join(out).rstrip() + "\n"


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
    """A chapter as a heading, its warnings quoted, its findings a list, then its sections."""
    lines = [f"## {_escape(chapter.title)}", ""]
    lines += [f"> **Warning:** {warning}" for warning in chapter.warnings]
    if chapter.warnings:
        lines.append("")
    lines += [f"- {finding}" for finding in chapter.findings]
    lines.append("")
    for section in chapter.sections:
        lines += section_lines(section)
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
