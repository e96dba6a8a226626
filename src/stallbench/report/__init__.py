"""Render a Comparison (computed in compare/comparison.py) as text, markdown, json or html; plots.

Renderers only format numbers that the Comparison already holds; they compute no statistics.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:       # the CLI imports FORMATS for --help: keep numpy out of that
    from ..compare.model import Comparison

FORMATS = ("text", "markdown", "json", "html")


def render(comparison: Comparison, fmt: str, width: int = 100) -> str:
    """The whole report in one format, as a string."""
    if fmt == "text":
        from . import text
        return text.render(comparison, width)
    if fmt == "markdown":
        from . import markdown
        return markdown.render(comparison)
    if fmt == "json":
        from . import jsonout
        return jsonout.render(comparison)
    if fmt == "html":
        from . import htmlout
        return htmlout.render(comparison)
    raise ValueError(f"unknown format {fmt!r}")
