"""Render a Comparison (computed in compare/comparison.py) as text, markdown, json, html or a
mail (email.py); plots.

Renderers only format numbers that the Comparison already holds; they compute no statistics.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:       # the CLI imports FORMATS for --help: keep numpy out of that
    from ..compare.model import Comparison

FORMATS = ("text", "markdown", "json", "html", "email")
# the report's parts in reading order (compare --sections picks some; the JSON has them all):
# what was compared, the answer, what the verdicts rest on, the tables, where the time went,
# the distributions and stalls over time, how to read the numbers
SECTIONS = ("variants", "headline", "notes", "tables", "where", "distributions", "stalls",
            "method")
BRIEF = ("headline",)   # compare --brief


def render(comparison: Comparison, fmt: str, width: int = 100,
           sections: tuple[str, ...] = SECTIONS, color: bool = False) -> str:
    """The report in one format, as a string: the sections asked for (text, markdown; the JSON
    holds every one), `color` ANSI colour in text."""
    if fmt == "text":
        from . import text
        return text.render(comparison, width, sections, color)
    if fmt == "markdown":
        from . import markdown
        return markdown.render(comparison, sections)
    if fmt == "json":
        from . import jsonout
        return jsonout.render(comparison)
    if fmt == "html":
        from . import htmlout
        return htmlout.render(comparison)
    if fmt == "email":
        from . import email
        return email.render(comparison)
    raise ValueError(f"unknown format {fmt!r}")
