"""Markdown report: the text report's tables as GitHub-flavoured markdown."""

from __future__ import annotations

from ..comparison import Comparison, OpComparison
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


def _escape(text: str) -> str:
    return text.replace("|", "\\|")


def render(comparison: Comparison) -> str:
    out = [f"# stallbench compare — {comparison.workload}", ""]
    out += ["```", *header(comparison, 100), "```", ""]
    for op in comparison.ops:
        out += op_tables(op, comparison)
    out += cpu_table(comparison)
    out += where_section(comparison)
    for op in comparison.ops:
        block = distribution(op, comparison, 100) + stalls(op, comparison, 100)
        if block:
            out += [f"### {op.op}: distribution and stalls", "", "```", *block, "```", ""]
    return "\n".join(out).rstrip() + "\n"


def op_tables(op: OpComparison, comparison: Comparison) -> list[str]:
    unit = op_unit(op)
    what = "response time" if op.kind == "response" else "latency"
    base = op.stats[comparison.baseline]
    lines = []
    for cand_label in comparison.candidates:
        cand = op.stats[cand_label]
        lines += [f"## {_escape(op.op)} — {what} in {unit[0]} ({_escape(cand_label)} vs "
                  f"{_escape(comparison.baseline)})", "",
                  f"| stat | {_escape(comparison.baseline)} | {_escape(cand_label)} | change "
                  "| 95% interval | verdict |",
                  "|---|---:|---:|---:|---|---|"]
        samples_change = format_percent(cand.samples / base.samples - 1) if base.samples else ""
        lines.append(f"| samples | {format_count(base.samples)} | {format_count(cand.samples)} "
                     f"| {samples_change} | | |")
        for stat in ROW_STATS:
            change, interval, word = change_cell(op.changes[cand_label].get(stat), base, cand,
                                                 stat)
            if stat == "rate" and rate_flag(op, cand_label):
                word += f" **{rate_flag(op, cand_label)}**"
            if word in ("worse", "better"):
                word = f"**{word}**"
            lines.append(f"| {STAT_LABELS[stat]} | {stat_cell(base, stat, unit)} | "
                         f"{stat_cell(cand, stat, unit)} | {change} | {interval} | {word} |")
        probability = op.slower_probability[cand_label]
        lines.append("")
        if probability is not None:
            lines.append(f"P({_escape(cand_label)} op slower than "
                         f"{_escape(comparison.baseline)} op) = {probability:.2f}")
        shift = op.shift[cand_label]
        if shift and shift.sentence:
            lines += ["", f"**{shift.sentence}**"]
        lines.append("")
    return lines


def cpu_table(comparison: Comparison) -> list[str]:
    if not comparison.cpu:
        return []
    lines = ["## CPU time (seconds per iteration)", ""]
    for cand_label in comparison.candidates:
        lines += [f"| | {_escape(comparison.baseline)} | {_escape(cand_label)} | change | "
                  "95% interval | verdict |", "|---|---:|---:|---:|---|---|"]
        for row in comparison.cpu:
            change = row.changes[cand_label]
            word = change.verdict if change.verdict != "n/a" else "no interval"
            lines.append(f"| {row.name.capitalize()} | "
                         f"{format_seconds(row.values[comparison.baseline])} | "
                         f"{format_seconds(row.values[cand_label])} | "
                         f"{format_percent(change.change)} | "
                         f"{change_cell(change, _One, _One, row.name)[1]} | {word} |")
        lines.append("")
    return lines


class _One:
    samples = 1


def where_section(comparison: Comparison) -> list[str]:
    section = comparison.where
    if section is None:
        return []
    if "error" in section and len(section) == 1:
        return [section["error"], ""]
    from . import where
    return [where.render_markdown(section), ""]
