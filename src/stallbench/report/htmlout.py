"""HTML report: one self-contained file (inline CSS, plots as base64 PNG), readable on a phone."""

from __future__ import annotations

import base64
import html

from ..compare.model import Comparison
from . import SECTIONS, flamegraph
from . import plots as plots_mod
from .headline import headline_sections
from .opblocks import distribution_sections, stalls_sections
from .tables import Cell, Chapter, Section, comparison_sections, variants_section
from .text import method_lines, note_lines
from .where import where_chapter

_CSS = """
body{font-family:system-ui,-apple-system,sans-serif;margin:0 auto;max-width:1100px;padding:12px;
color:#222;line-height:1.4}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}
.scroll{overflow-x:auto;-webkit-overflow-scrolling:touch}
table{border-collapse:collapse;font-variant-numeric:tabular-nums;margin:6px 0}
th,td{padding:3px 8px;border-bottom:1px solid #ddd;text-align:right;white-space:nowrap}
th:first-child,td:first-child{text-align:left}
td.worse{color:#b00020;font-weight:600}td.better{color:#006400;font-weight:600}
td.unclear,td.same{color:#555}
.starved{background:#b00020;color:#fff;padding:0 4px;border-radius:3px}
pre{background:#f6f6f6;padding:8px;overflow-x:auto;font-size:12px}
img{max-width:100%;height:auto;border:1px solid #eee}
pre.legend{white-space:pre-wrap}
section.headline{border:2px solid #222;border-radius:6px;padding:4px 12px;margin:12px 0}
section.headline h2{margin-top:.6em;font-weight:700}
p.note{color:#555}
.bar{display:inline-block;width:120px;height:.8em;margin-left:6px;background:#eee}
.bar span{display:block;height:100%;background:#777}
"""


def _e(text: object) -> str:
    return html.escape(str(text))


def render(comparison: Comparison, plots: list[plots_mod.Plot] | None = None,
           sections: tuple[str, ...] = SECTIONS) -> str:
    """The sections asked for (report.SECTIONS), the headline boxed first; the plots and flame
    graphs go with the where section."""
    if plots is None and "where" in sections:
        plots = plots_mod.render_plots(comparison, formats=("png",))
    parts = {
        "variants": lambda: section_html(variants_section(comparison)),
        "headline": lambda: ['<section class="headline">',
                             *(line for section in headline_sections(comparison)
                               for line in section_html(section)), "</section>"],
        "notes": lambda: [preformatted(lines)] if (lines := note_lines(comparison, 100))
        else [],
        "tables": lambda: [line for section in comparison_sections(comparison)
                           for line in section_html(section)],
        "where": lambda: [*_where(comparison), *flamegraph.html_sections(comparison),
                          *_plots(plots or [])],
        "distributions": lambda: [line for section in distribution_sections(comparison)
                                  for line in section_html(section)],
        "stalls": lambda: [line for section in stalls_sections(comparison)
                           for line in section_html(section)],
        "method": lambda: [preformatted(method_lines(comparison, 100))],
    }
    body = [line for name in SECTIONS if name in sections for line in parts[name]()]
    return page(f"stallbench compare — {comparison.workload}", body)


def _plots(plots: list[plots_mod.Plot]) -> list[str]:
    out = []
    for plot in plots:
        data = base64.b64encode(plot.png).decode("ascii")
        out.append(f"<h2>{_e(plot.title)}</h2>")
        out.append(f'<img alt="{_e(plot.title)}" src="data:image/png;base64,{data}">')
    return out


def page(title: str, body: list[str]) -> str:
    """One self-contained HTML page: the style and these body lines."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{_e(title)}</title>"
            f"<style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


def preformatted(lines: list[str], css_class: str = "legend") -> str:
    return f'<pre class="{_e(css_class)}">' + _e("\n".join(lines)) + "</pre>"


def section_html(section: Section) -> list[str]:
    """A section of the table model as a heading of its level, scrollable tables, a
    preformatted block, a list and paragraphs."""
    title = section.title + (f" ({section.context})" if section.context else "")
    out = [f"<h{section.level}>{_e(title)}</h{section.level}>"]
    for table in section.tables:
        rows = ["<tr>" + "".join(f"<th>{_e(c.title)}</th>" for c in table.columns) + "</tr>"]
        rows += ["<tr>" + "".join(_td(cell) for cell in row) + "</tr>" for row in table.rows]
        out.append('<div class="scroll"><table>' + "".join(rows) + "</table></div>")
    if section.preformatted:
        out.append("<pre>" + _e("\n".join(section.preformatted)) + "</pre>")
    if section.items:
        out.append(_list(section.items))
    out += [f"<p>{_e(note)}</p>" for note in section.notes]
    return out


def _list(items: list[str]) -> str:
    return "<ul>" + "".join(f"<li>{_e(item)}</li>" for item in items) + "</ul>"


def chapter_html(chapter: Chapter) -> list[str]:
    """A chapter as a <section> of its class: heading, warnings, findings, its sections, its
    closing notes."""
    out = [f'<section class="{_e(chapter.css_class)}">', f"<h2>{_e(chapter.title)}</h2>"]
    out += [f'<p class="warning"><strong>Warning:</strong> {_e(warning)}</p>'
            for warning in chapter.warnings]
    if chapter.findings:
        out.append(_list(chapter.findings))
    for section in chapter.sections:
        out += section_html(section)
    out += [f'<p class="note"><strong>Note:</strong> {_e(note)}</p>' for note in chapter.closing]
    return [*out, "</section>"]


def _td(cell: Cell) -> str:
    klass = "" if cell.mark is None else f' class="{_e(cell.mark)}"'
    flag = f' <span class="starved">{_e(cell.flag)}</span>' if cell.flag else ""
    bar = "" if cell.share is None else \
        f'<span class="bar"><span style="width:{cell.share:.1%}"></span></span>'
    return f"<td{klass}>{_e(cell.text)}{flag}{bar}</td>"


def _where(comparison: Comparison) -> list[str]:
    if comparison.where_error:
        return [f"<p>{_e(comparison.where_error)}</p>"]
    if comparison.where is None:
        return []
    return chapter_html(where_chapter(comparison.where))
