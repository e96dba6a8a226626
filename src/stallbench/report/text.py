"""Plain-text report that fits in 100 columns, with bcc-style log2 histograms side by side."""

from __future__ import annotations

import textwrap

import numpy as np

from ..analysis import bands as bands_mod
from ..comparison import Comparison, OpComparison
from ..units import format_ns
from .common import (
    ROW_STATS,
    STAT_LABELS,
    change_cell,
    decide_advice,
    format_count,
    format_percent,
    format_seconds,
    level_shift_notes,
    method_line,
    op_unit,
    rate_flag,
    run_count_notes,
    stat_cell,
)

MAX_EPISODES = 5


def render(comparison: Comparison, width: int = 100) -> str:
    out: list[str] = []
    out += header(comparison, width)
    for op in comparison.ops:
        out += op_tables(op, comparison, width)
    out += cpu_table(comparison)
    out += where_section(comparison, width)
    for op in comparison.ops:
        out += distribution(op, comparison, width)
    for op in comparison.ops:
        out += stalls(op, comparison, width)
    return "\n".join(line.rstrip() for line in out).rstrip() + "\n"


def _wrap(text: str, width: int, indent: str = "") -> list[str]:
    return textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=indent + "  ") \
        or [""]


def header(comparison: Comparison, width: int) -> list[str]:
    lines = [f"stallbench compare — workload {comparison.workload}"]
    for info in comparison.variants:
        role = "baseline " if info.label == comparison.baseline else "candidate"
        durations = ", ".join(f"{r.duration_s:.1f}" for r in info.runs)
        kernel = f", kernel {info.kernel}" if info.kernel else ""
        lines += _wrap(f"{role} {info.label}: {len(info.runs)} run(s) of {durations} s{kernel}",
                       width, "  ")
    lines += _wrap("change = candidate/baseline − 1 (+ means the number got larger); lower "
                   "latency and higher rate are better; " + method_line(comparison) +
                   f"; better/worse only when the interval excludes 0 and |change| > "
                   f"{comparison.options.noise:.0%} ({comparison.adjustment}); same: interval "
                   f"within ±{comparison.options.noise:.0%}; n/r: fewer than 10 samples at or "
                   "beyond the percentile; min and max have no interval", width)
    for sentence in run_count_notes(comparison):
        lines += _wrap("note: " + sentence, width)
    for sentence in level_shift_notes(comparison):
        lines += _wrap("NOT STATIONARY: " + sentence, width)
    for note in comparison.notes:
        lines += _wrap("note: " + note, width)
    for problem in comparison.problems:
        lines += _wrap("left out: " + problem, width)
    lines.append("")
    return lines


def op_tables(op: OpComparison, comparison: Comparison, width: int = 100) -> list[str]:
    unit = op_unit(op)
    unit_name = unit[0]
    what = "response time (completion − planned start)" if op.kind == "response" else "latency"
    base_label = comparison.baseline
    base = op.stats[base_label]
    lines: list[str] = []
    for cand_label in comparison.candidates:
        cand = op.stats[cand_label]
        lines.append(f"{op.op} — {what} in {unit_name}")
        lines.append(f"  {'':<8} {base_label[:14]:>14} {cand_label[:14]:>14} {'change':>8}  "
                     f"{'95% interval':<18} verdict")
        lines.append(f"  {'samples':<8} {format_count(base.samples):>14} "
                     f"{format_count(cand.samples):>14} "
                     f"{_samples_change(base.samples, cand.samples):>8}")
        for stat in ROW_STATS:
            change, interval, word = change_cell(op.changes[cand_label].get(stat), base, cand,
                                                 stat)
            if stat == "rate" and rate_flag(op, cand_label):
                word += "  " + rate_flag(op, cand_label)
            lines.append(f"  {STAT_LABELS[stat]:<8} {stat_cell(base, stat, unit):>14} "
                         f"{stat_cell(cand, stat, unit):>14} {change:>8}  {interval:<18} "
                         f"{word}")
        extra = []
        probability = op.slower_probability[cand_label]
        if probability is not None:
            extra.append(f"P({cand_label} op slower than {base_label} op) = {probability:.2f}")
        spreads = [(label, op.stats[label].iteration_p99_spread) for label in
                   (base_label, cand_label)]
        if any(s is not None for _, s in spreads):
            extra.append("iterations differ (p99 max−min / median): " + ", ".join(
                f"{label} {s:.1%}" for label, s in spreads if s is not None))
        advice = decide_advice(op.changes[cand_label])
        if advice:
            extra.append(advice)
        for text in extra:
            lines += _wrap(text, width, "  ")
        lines.append("")
    return lines


def _samples_change(base: int, cand: int) -> str:
    return format_percent(cand / base - 1) if base > 0 else ""


def cpu_table(comparison: Comparison) -> list[str]:
    if not comparison.cpu:
        return []
    lines = ["CPU time of the workload's processes (seconds per iteration)"]
    for cand_label in comparison.candidates:
        lines.append(f"  {'':<8} {comparison.baseline[:14]:>14} {cand_label[:14]:>14} "
                     f"{'change':>8}  {'95% interval':<18} verdict")
        for row in comparison.cpu:
            change, interval, word = change_cell(row.changes[cand_label], _Any, _Any, row.name)
            lines.append(f"  {row.name.capitalize():<8} "
                         f"{format_seconds(row.values[comparison.baseline]):>14} "
                         f"{format_seconds(row.values[cand_label]):>14} {change:>8}  "
                         f"{interval:<18} {word}")
    lines.append("")
    return lines


class _Any:
    samples = 1


def where_section(comparison: Comparison, width: int) -> list[str]:
    section = comparison.where
    if section is None:
        return []
    if "error" in section and len(section) == 1:
        return [section["error"], ""]
    from . import where
    return [where.render_text(section, width), ""]


def distribution(op: OpComparison, comparison: Comparison, width: int) -> list[str]:
    labels = comparison.labels
    counts = np.array([op.bands[label] for label in labels])
    totals = counts.sum(axis=1)
    if not totals.any():
        return []
    used = np.flatnonzero(counts.sum(axis=0))
    first, last = int(used[0]), int(used[-1])
    lines = [f"{op.op} — distribution (log2 bands, share of ops)"]
    for cand_label in comparison.candidates:
        shift = op.shift[cand_label]
        if shift and shift.sentence:
            lines.append(f"  {cand_label}: {shift.sentence}")
        elif shift:
            lines.append(f"  {cand_label}: {shift.moved:.1%} of ops changed band")
    label_width = 20
    column = (width - label_width - 2) // len(labels)
    bar = max(column - 10, 4)  # a cell is " 12.3% |" + bar + "|"
    lines.append(f"  {'latency':<{label_width}}" + "".join(
        f" {label[:column - 2]:<{column - 1}}" for label in labels))
    for band in range(first, last + 1):
        cells = []
        for row, total in zip(counts, totals, strict=True):
            share = row[band] / total if total else 0.0
            stars = int(round(share * bar))
            cells.append(f" {share:6.1%} |{'*' * stars:<{bar}}|")
        name = f"{bands_mod.edge_label(band)} – {bands_mod.edge_label(band + 1)}"
        lines.append(f"  {name:<{label_width}}" + "".join(cells))
    lines.append("")
    return lines


def stalls(op: OpComparison, comparison: Comparison, width: int) -> list[str]:
    lines: list[str] = []
    any_stalls = False
    if not any(op.stats[label].samples for label in comparison.labels):
        return []
    for label in comparison.labels:
        summary = op.stalls[label]
        stats = op.stats[label]
        if stats.samples == 0 and not summary.episodes:
            continue
        longest = summary.longest_stall
        parts = [f"longest time without a completed op {format_ns(longest['duration_ns'])} "
                 f"at {longest['start_ns'] / 1e9:.1f} s (iteration {longest['iteration']})"]
        slow = [e for e in summary.episodes if e["kind"] == "slow"]
        starved = [e for e in summary.episodes if e["kind"] == "starved"]
        if slow:
            parts.append(f"{len(slow)} interval run(s) with max > "
                         f"{format_ns(summary.threshold_ns)}")
        if starved:
            parts.append(f"{len(starved)} run(s) of intervals with no op while others ran")
        starved_workers = [(w["iteration"], w["starved"], w["counts"]) for w in summary.workers
                           if w["starved"]]
        for iteration, workers, counts in starved_workers:
            median = int(np.median(list(counts.values())))
            parts.append(f"iteration {iteration}: starved worker(s) " + ", ".join(
                f"{w} ({counts[w]} ops)" for w in workers) + f" vs median {median}")
        lines += _wrap(f"{label}: " + "; ".join(parts), width, "  ")
        for episode in summary.episodes[:MAX_EPISODES]:
            any_stalls = True
            worst = f", worst {format_ns(episode['worst_ns'])}" if episode["worst_ns"] else ""
            lines.append(f"    {episode['kind']:<8} iteration {episode['iteration']} at "
                         f"{episode['start_ns'] / 1e9:.1f} s for "
                         f"{episode['duration_ns'] / 1e9:.1f} s{worst}")
        if len(summary.episodes) > MAX_EPISODES:
            lines.append(f"    … and {len(summary.episodes) - MAX_EPISODES} more episodes")
    if not lines:
        return []
    interval = format_ns(op.stalls[comparison.baseline].interval_ns)
    title = f"{op.op} — stalls over time ({interval} intervals)"
    if not any_stalls:
        title += ": no stall episodes"
    return [title, *lines, ""]
