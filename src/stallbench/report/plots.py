"""Figures of a Comparison (matplotlib): CCDF, shift function, timeline, iterations,
counters. Each figure has one panel per op; rendered to PNG and SVG.

Only matplotlib's Figure API, never pyplot or matplotlib.use: a Figure renders to PNG or SVG
without a backend chosen, and importing this module leaves a notebook's backend as it was."""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import (
    FuncFormatter,
    LogLocator,
    NullFormatter,
    NullLocator,
)

from ..analysis.display import choose_time_unit
from ..compare.model import Comparison, OpComparison
from ..core.units import RUN_TIME_AXIS

MAX_COUNTERS = 6
_COLORS = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]


@dataclass
class Plot:
    name: str
    title: str
    png: bytes
    svg: str


def _ops_with_samples(comparison: Comparison) -> list[OpComparison]:
    return [op for op in comparison.ops if any(s.samples for s in op.stats.values())]


def _grid(n: int, height: float = 3.2) -> tuple[Figure, list]:
    # fixed margins: constrained layout measures every tick label and costs seconds per figure
    columns = 2 if n > 1 else 1
    rows = math.ceil(n / columns)
    fig = Figure(figsize=(6.4 * columns, height * rows))
    axes = fig.subplots(rows, columns, squeeze=False).ravel().tolist()
    inch_w, inch_h = 6.4 * columns, height * rows
    fig.subplots_adjust(left=0.95 / inch_w, right=1 - 0.2 / inch_w, bottom=0.6 / inch_h,
                        top=1 - 0.4 / inch_h, wspace=0.28, hspace=1.1 / height)
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes[:n]


_PLAIN = FuncFormatter(lambda value, _: f"{value:g}")


def _log_axis(axis, minor: bool = True) -> None:
    """Log scale with plain tick labels: mathtext labels (the default) make rendering slow."""
    axis.set_major_locator(LogLocator(base=10))
    axis.set_major_formatter(_PLAIN)
    axis.set_minor_formatter(NullFormatter())
    if not minor:
        axis.set_minor_locator(NullLocator())


def first_run_end_s(comparison: Comparison) -> float | None:
    """Where the longest first iteration ended (its last completion), on the run clock (its
    workers start after the clock and the monitors): the time axes' right end, so that no
    plot runs past the run. None when no run has an op."""
    ends = [v.runs[0].end_s for v in comparison.variants if v.runs]
    return max(ends) if any(ends) else None


def _color(comparison: Comparison, label: str) -> str:
    return _COLORS[comparison.labels.index(label) % len(_COLORS)]


def ccdf_figure(comparison: Comparison) -> Figure | None:
    ops = _ops_with_samples(comparison)
    if not ops:
        return None
    fig, axes = _grid(len(ops))
    for ax, op in zip(axes, ops, strict=True):
        values = [v for c in op.ccdf.values() for v in c["latency_ns"]]
        unit, scale = choose_time_unit(values)
        for label in comparison.labels:
            curve = op.ccdf[label]
            if curve["latency_ns"]:
                ax.step(np.array(curve["latency_ns"]) / scale, curve["fraction_above"],
                        where="post", label=label, color=_color(comparison, label))
        ax.set_xscale("log")
        ax.set_yscale("log")
        _log_axis(ax.xaxis)
        _log_axis(ax.yaxis, minor=False)
        ax.set_xlabel(f"latency ({unit})")
        ax.set_ylabel("fraction of ops slower")
        ax.set_title(f"{op.op}: latency CCDF")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
    return fig


def _p_position(p: float) -> float:
    return -math.log10(1.0 - p)


def shift_figure(comparison: Comparison) -> Figure | None:
    ops = [op for op in _ops_with_samples(comparison)
           if any(op.shift_curve[c].probabilities for c in comparison.candidates)]
    if not ops:
        return None
    fig, axes = _grid(len(ops))
    ticks = [0.5, 0.9, 0.99, 0.999, 0.9999]
    for ax, op in zip(axes, ops, strict=True):
        curves = [op.shift_curve[label] for label in comparison.candidates]
        bottom, top = shift_limits([v * 100 for c in curves for v in c.change if v is not None])
        clipped = False
        for label, curve in zip(comparison.candidates, curves, strict=True):
            x = np.array([_p_position(p) for p in curve.probabilities])
            y, low, high = (np.array([np.nan if v is None else v * 100 for v in values])
                            for values in (curve.change, curve.low, curve.high))
            color = _color(comparison, label)
            ax.plot(x, y, marker="o", markersize=3, color=color,
                    label=f"{label} vs {comparison.baseline}")
            ax.fill_between(x, np.clip(low, bottom, top), np.clip(high, bottom, top),
                            color=color, alpha=0.2, label="95% interval")
            for beyond, edge, marker in ((high > top, top, "^"), (low < bottom, bottom, "v")):
                if beyond.any():
                    clipped = True
                    ax.plot(x[beyond], np.full(int(beyond.sum()), edge), linestyle="none",
                            marker=marker, markersize=6, color=color, clip_on=False)
        if clipped:
            ax.plot([], [], linestyle="none", marker="^", color="grey",
                    label="interval goes on beyond the axis")
        ax.set_ylim(bottom, top)
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_xticks([_p_position(p) for p in ticks], [f"p{p * 100:g}" for p in ticks])
        ax.set_xlabel("percentile")
        ax.set_ylabel("change of the percentile (%)")
        ax.set_title(f"{op.op}: shift function (+ = slower)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    return fig


SHIFT_MIN_SPAN = 10.0   # percentage points: the axis of changes that are all about nothing


def shift_limits(changes: list[float]) -> tuple[float, float]:
    """The shift axis: the changes (in %) and 0, padded by a quarter of their span; intervals
    reaching further are clipped, so one wide interval does not flatten every line."""
    finite = [v for v in changes if math.isfinite(v)]
    low, high = min([0.0, *finite]), max([0.0, *finite])
    pad = max(high - low, SHIFT_MIN_SPAN) / 4
    return low - pad, high + pad


def timeline_figure(comparison: Comparison) -> Figure | None:
    ops = _ops_with_samples(comparison)
    ops = [op for op in ops if op.kind == "service"]
    if not ops:
        return None
    height = 3.6 * len(ops)
    fig = Figure(figsize=(12.8, height))
    axes = fig.subplots(2 * len(ops), 1, height_ratios=[2, 1] * len(ops), squeeze=False).ravel()
    fig.subplots_adjust(left=0.07, right=0.99, bottom=0.55 / height, top=1 - 0.35 / height,
                        hspace=0.45)
    end_s = first_run_end_s(comparison)
    for index, op in enumerate(ops):
        top, bottom = axes[2 * index], axes[2 * index + 1]
        bottom.sharex(top)
        values = [v for s in op.stalls.values() for t in s.timelines[:1] for v in t["max_ns"]
                  if v]
        unit, scale = choose_time_unit(values)
        for label in comparison.labels:
            stalls = op.stalls[label]
            if not stalls.timelines:
                continue
            line = stalls.timelines[0]
            t = np.arange(len(line["count"])) * stalls.interval_ns / 1e9
            color = _color(comparison, label)
            p99 = np.array([np.nan if v is None else v / scale for v in line["p99_ns"]])
            peak = np.array([np.nan if v is None else v / scale for v in line["max_ns"]])
            top.plot(t, peak, color=color, linewidth=0.8, alpha=0.6, label=f"{label} max")
            top.plot(t, p99, color=color, linewidth=1.6, label=f"{label} p99")
            bottom.step(t, line["count"], where="post", color=color, label=label)
            if stalls.warmup_ns:
                for axis in (top, bottom):
                    axis.axvline(stalls.warmup_ns / 1e9, color=color, linestyle="--",
                                 linewidth=0.8)
        top.set_yscale("log")
        _log_axis(top.yaxis, minor=False)
        top.set_ylabel(f"latency ({unit})")
        top.set_title(f"{op.op}: per-interval p99 and max (first iteration of each variant)")
        top.grid(True, alpha=0.3)
        top.legend(fontsize="small", ncol=2)
        bottom.set_ylabel("ops per interval")
        bottom.set_ylim(bottom=0)  # from zero, so that an op that stops completing stands out
        if end_s is not None:
            bottom.set_xlim(0, end_s)
        if index == len(ops) - 1:
            bottom.set_xlabel(RUN_TIME_AXIS)
        bottom.grid(True, alpha=0.3)
    return fig


def strip_figure(comparison: Comparison) -> Figure | None:
    ops = [op for op in _ops_with_samples(comparison)
           if any(v is not None for s in op.stats.values() for v in s.iteration_p99_ns)]
    if not ops:
        return None
    fig, axes = _grid(len(ops), height=2.8)
    for ax, op in zip(axes, ops, strict=True):
        values = [v for s in op.stats.values() for v in s.iteration_p99_ns if v]
        unit, scale = choose_time_unit(values)
        for position, label in enumerate(comparison.labels):
            points = [v / scale for v in op.stats[label].iteration_p99_ns if v is not None]
            jitter = np.linspace(-0.12, 0.12, len(points)) if len(points) > 1 else [0.0]
            ax.scatter(np.full(len(points), position) + jitter, points,
                       color=_color(comparison, label), zorder=3)
        ax.set_xticks(range(len(comparison.labels)), comparison.labels)
        ax.set_ylabel(f"p99 ({unit})")
        ax.set_title(f"{op.op}: p99 of each iteration")
        ax.grid(True, axis="y", alpha=0.3)
    return fig


def counters_figure(comparison: Comparison) -> Figure | None:
    if not comparison.counters:
        return None
    names: list[str] = []
    for columns in comparison.counters.values():
        for name in columns:
            if name not in names:
                names.append(name)
    # the counters whose level differs most between variants (relative to their size) first:
    # an ordering for display, computed from the numbers the Comparison holds
    def difference(name: str) -> float:
        means = [float(np.nanmean(columns[name]["values"]))
                 for columns in comparison.counters.values() if name in columns]
        if len(means) < 2 or max(abs(m) for m in means) == 0:
            return 0.0
        return (max(means) - min(means)) / max(abs(m) for m in means)
    chosen = [n for n in sorted(names, key=difference, reverse=True) if difference(n) > 0]
    chosen = chosen[:MAX_COUNTERS]
    if not chosen:
        return None
    fig, axes = _grid(len(chosen), height=2.8)
    end_s = first_run_end_s(comparison)
    for ax, name in zip(axes, chosen, strict=True):
        kind = "value"
        for label, columns in comparison.counters.items():
            if name in columns:
                column = columns[name]
                kind = column["kind"]
                ax.plot(column["t_s"], column["values"], color=_color(comparison, label),
                        label=label)
        if end_s is not None:
            ax.set_xlim(0, end_s)
        ax.set_title(f"{name} ({kind})")
        ax.set_xlabel(RUN_TIME_AXIS)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    return fig


FIGURES = (
    ("ccdf", "Latency CCDF per op (log-log): how often an op is slower than x", ccdf_figure),
    ("shift", "Shift function: change of each percentile with its 95% interval", shift_figure),
    ("timeline", "Stalls over time: per-interval p99/max and op count", timeline_figure),
    ("iterations", "p99 of each iteration", strip_figure),
    ("counters", "Kernel counters over time (first iteration)", counters_figure),
)
HEATMAP_TITLE = "Latency over time: ops per latency and time, with PSI and reclaim/throttle"


def _figures(comparison: Comparison):
    """(file name, title, figure) of each plot: the heatmaps one per variant."""
    for name, title, make in FIGURES:
        fig = make(comparison)
        if fig is not None:
            yield name, title, fig
    from .heatmap import heatmap_figures
    for label, fig in heatmap_figures(comparison):
        yield f"heatmap-{label}", f"{HEATMAP_TITLE}: {label}", fig


def render_plots(comparison: Comparison, formats: tuple[str, ...] = ("png", "svg")) -> list[Plot]:
    return [figure_plot(name, title, fig, formats) for name, title, fig in _figures(comparison)]


def figure_plot(name: str, title: str, fig: Figure, formats: tuple[str, ...]) -> Plot:
    """A figure rendered in the formats asked (png, svg)."""
    png = b""
    svg = ""
    if "png" in formats:
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=90)
        png = buffer.getvalue()
    if "svg" in formats:
        text = io.StringIO()
        fig.savefig(text, format="svg")
        svg = text.getvalue()
    return Plot(name, title, png, svg)


def write_plots(plots: list[Plot], directory: Path) -> list[Path]:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for plot in plots:
        if plot.png:
            path = directory / f"{plot.name}.png"
            path.write_bytes(plot.png)
            written.append(path)
        if plot.svg:
            path = directory / f"{plot.name}.svg"
            path.write_text(plot.svg)
            written.append(path)
    return written
