"""HTML report: one self-contained file (inline CSS, plots as base64 PNG), readable on a phone."""

from __future__ import annotations

import base64
import html

from ..comparison import Comparison, OpComparison
from . import flamegraph
from . import plots as plots_mod
from .common import (
    ROW_STATS,
    STAT_LABELS,
    change_cell,
    format_count,
    format_percent,
    format_seconds,
    op_unit,
    rate_flag,
    stat_cell,
)
from .text import distribution, header, stalls

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
.shift{font-weight:600}
pre.legend{white-space:pre-wrap}
"""


def _e(text: object) -> str:
    return html.escape(str(text))


def render(comparison: Comparison, plots: list[plots_mod.Plot] | None = None) -> str:
    if plots is None:
        plots = plots_mod.render_plots(comparison, formats=("png",))
    body = [f"<h1>stallbench compare — {_e(comparison.workload)}</h1>",
            '<pre class="legend">' + _e("\n".join(header(comparison, 100))) + "</pre>"]
    for op in comparison.ops:
        body += _op_tables(op, comparison)
    body += _cpu(comparison)
    body += _where(comparison)
    body += flamegraph.html_sections(comparison)
    for plot in plots:
        data = base64.b64encode(plot.png).decode("ascii")
        body.append(f"<h2>{_e(plot.title)}</h2>")
        body.append(f'<img alt="{_e(plot.title)}" src="data:image/png;base64,{data}">')
    for op in comparison.ops:
        block = distribution(op, comparison, 100) + stalls(op, comparison, 100)
        if block:
            body.append(f"<h2>{_e(op.op)}: distribution and stalls</h2>")
            body.append("<pre>" + _e("\n".join(block)) + "</pre>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>stallbench compare — {_e(comparison.workload)}</title>"
            f"<style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


def _op_tables(op: OpComparison, comparison: Comparison) -> list[str]:
    unit = op_unit(op)
    what = "response time" if op.kind == "response" else "latency"
    base = op.stats[comparison.baseline]
    out = []
    for cand_label in comparison.candidates:
        cand = op.stats[cand_label]
        out.append(f"<h2>{_e(op.op)} — {what} in {_e(unit[0])} "
                   f"({_e(cand_label)} vs {_e(comparison.baseline)})</h2>")
        rows = [f"<tr><th></th><th>{_e(comparison.baseline)}</th><th>{_e(cand_label)}</th>"
                "<th>change</th><th>95% interval</th><th>verdict</th></tr>"]
        samples_change = format_percent(cand.samples / base.samples - 1) if base.samples else ""
        rows.append(f"<tr><td>samples</td><td>{format_count(base.samples)}</td>"
                    f"<td>{format_count(cand.samples)}</td><td>{samples_change}</td>"
                    "<td></td><td></td></tr>")
        for stat in ROW_STATS:
            change, interval, word = change_cell(op.changes[cand_label].get(stat), base, cand,
                                                 stat)
            flag = f' <span class="starved">{rate_flag(op, cand_label)}</span>' \
                if stat == "rate" and rate_flag(op, cand_label) else ""
            rows.append(f"<tr><td>{STAT_LABELS[stat]}</td><td>{_e(stat_cell(base, stat, unit))}"
                        f"</td><td>{_e(stat_cell(cand, stat, unit))}</td><td>{_e(change)}</td>"
                        f"<td>{_e(interval)}</td><td class=\"{_e(word)}\">{_e(word)}{flag}</td>"
                        "</tr>")
        out.append('<div class="scroll"><table>' + "".join(rows) + "</table></div>")
        probability = op.slower_probability[cand_label]
        if probability is not None:
            out.append(f"<p>P({_e(cand_label)} op slower than {_e(comparison.baseline)} op) = "
                       f"{probability:.2f}</p>")
        shift = op.shift[cand_label]
        if shift and shift.sentence:
            out.append(f'<p class="shift">{_e(shift.sentence)}</p>')
    return out


def _cpu(comparison: Comparison) -> list[str]:
    if not comparison.cpu:
        return []
    out = ["<h2>CPU time (seconds per iteration)</h2>"]
    for cand_label in comparison.candidates:
        rows = [f"<tr><th></th><th>{_e(comparison.baseline)}</th><th>{_e(cand_label)}</th>"
                "<th>change</th><th>95% interval</th><th>verdict</th></tr>"]
        for row in comparison.cpu:
            change = row.changes[cand_label]
            word = change.verdict if change.verdict != "n/a" else "no interval"
            interval = "" if change.low is None else \
                f"[{format_percent(change.low)}, {format_percent(change.high)}]"
            rows.append(f"<tr><td>{row.name.capitalize()}</td>"
                        f"<td>{format_seconds(row.values[comparison.baseline])}</td>"
                        f"<td>{format_seconds(row.values[cand_label])}</td>"
                        f"<td>{format_percent(change.change)}</td><td>{interval}</td>"
                        f"<td class=\"{word}\">{word}</td></tr>")
        out.append('<div class="scroll"><table>' + "".join(rows) + "</table></div>")
    return out


def _where(comparison: Comparison) -> list[str]:
    section = comparison.where
    if section is None:
        return []
    if "error" in section and len(section) == 1:
        return [f"<p>{_e(section['error'])}</p>"]
    from . import where
    return [where.render_html(section)]
