"""Latency over time: per variant a figure, in it per op a heatmap of log latency against time
(colour = ops per cell, one colour scale per op across the variants), and under it the share
of time the workload stalled (PSI memory/io some) and the threads in reclaim or throttled
(trace monitor)."""

from __future__ import annotations

import numpy as np
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from ..analysis.display import choose_time_unit
from ..core.units import RUN_TIME_AXIS

_OVERLAY_COLOURS = {"memory": "#d62728", "io": "#1f77b4", "reclaim": "#ff7f0e",
                    "throttle": "#9467bd"}


def heatmap_figures(comparison) -> list[tuple[str, Figure]]:
    """One figure per variant (label, figure), each op a row: separate pictures stay readable
    at page width however many variants there are. Each op keeps one colour scale across the
    variants, so that the pictures compare."""
    views = getattr(comparison, "views", None)
    maps = views.heatmaps if views is not None else []
    if not maps:
        return []
    norms = [LogNorm(vmin=1, vmax=max(max(int(v.heatmap.counts.max()) for v in m.variants), 2))
             for m in maps]
    labels = [v.label for v in maps[0].variants]
    return [(label, _variant_figure(maps, norms, column))
            for column, label in enumerate(labels)]


def _variant_figure(maps, norms, column: int) -> Figure:
    rows = len(maps)
    height = 3.4 * rows
    fig = Figure(figsize=(7.6, height))
    grid = fig.add_gridspec(2 * rows, 1, height_ratios=[3, 1] * rows, left=0.11, right=0.84,
                            bottom=0.5 / height, top=1 - 0.45 / height, hspace=0.55)
    for row, (op_maps, norm) in enumerate(zip(maps, norms, strict=True)):
        item = op_maps.variants[column]
        edges = op_maps.variants[0].heatmap.latency_edges_ns
        unit, scale = choose_time_unit([float(edges[len(edges) // 2])])
        ax = fig.add_subplot(grid[2 * row, 0])
        strip = fig.add_subplot(grid[2 * row + 1, 0], sharex=ax)
        h = item.heatmap
        t = h.time_edges_ns / 1e9
        counts = np.ma.masked_less(h.counts.T, 1)
        mesh = ax.pcolormesh(t, h.latency_edges_ns / scale, counts, norm=norm,
                             cmap="viridis", shading="flat")
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_title(f"{op_maps.op}: {item.label}"
                     + (f" ({item.runs} runs summed)" if item.runs > 1 else ""),
                     fontsize="medium")
        ax.set_ylabel(f"latency ({unit})")
        ax.tick_params(labelbottom=False)
        centres = (t[:-1] + t[1:]) / 2
        for name, share in item.psi.items():
            resource = name.split()[1]
            strip.plot(centres, share * 100, color=_OVERLAY_COLOURS.get(resource),
                       linewidth=1, label=f"PSI {name} %")
        spans = strip.twinx() if item.intervals else None
        for name, threads in item.intervals.items():
            spans.fill_between(centres, threads, step="mid", alpha=0.35,
                               color=_OVERLAY_COLOURS.get(name), label=f"{name} (threads)")
        if spans is not None:
            spans.set_ylim(bottom=0)
            spans.tick_params(labelsize="small")
            spans.set_ylabel("threads", fontsize="small")
        strip.set_ylim(0, 100)
        strip.set_xlim(t[0], t[-1])
        strip.tick_params(labelsize="small")
        strip.set_xlabel(RUN_TIME_AXIS, fontsize="small")
        strip.set_ylabel("stalled %", fontsize="small")
        handles, labels = strip.get_legend_handles_labels()
        if spans is not None:
            more = spans.get_legend_handles_labels()
            handles, labels = handles + more[0], labels + more[1]
        if handles:
            strip.legend(handles, labels, fontsize="x-small", loc="upper left", ncol=2,
                         framealpha=0.6)
        elif not item.psi:
            strip.text(0.5, 0.5, "no PSI or trace monitor in this run", ha="center",
                       va="center", transform=strip.transAxes, fontsize="small")
        cax = fig.add_axes([0.93, 1 - (0.45 + 3.4 * row + 2.3) / height, 0.018,
                            2.0 / height])
        fig.colorbar(mesh, cax=cax).set_label("ops per cell", fontsize="small")
    return fig
