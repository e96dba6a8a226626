"""Figures of a series (matplotlib's Figure API, as plots.py): per op, each statistic along the
axis with the 95% interval of its change against the baseline point (drawn around the
baseline's value), and the change points marked between the two points they lie between."""

from __future__ import annotations

from matplotlib.figure import Figure

from ..analysis.display import choose_time_unit
from ..analysis.quantiles import RATE
from ..compare.seriesmodel import Series, SeriesOp
from .plots import Plot, figure_plot

_WORSE, _BETTER, _POINT = "#b00020", "#006400", "#1f77b4"


def op_figure(series: Series, op: SeriesOp) -> Figure:
    stats = series.stats
    unit = choose_time_unit([v for s in op.stats for v in s.values.values() if v])
    x = list(range(len(series.points)))
    width = max(6.4, 0.45 * len(x) + 2)
    height = 2.0 * len(stats) + 1.6          # inches: the panels, the title, the tick labels
    fig = Figure(figsize=(width, height))
    axes = fig.subplots(len(stats), 1, sharex=True, squeeze=False).ravel()
    fig.subplots_adjust(left=0.9 / width, right=1 - 0.2 / width, top=1 - 0.6 / height,
                        bottom=1.0 / height, hspace=0.3)
    base = op.stats[series.baseline]
    for ax, stat in zip(axes, stats, strict=True):
        scale = 1.0 if stat.key == RATE.key else float(unit.ns)
        value_of = (lambda s: s.rate) if stat.key == RATE.key \
            else (lambda s, key=stat.key: s.values.get(key))
        reference = value_of(base)
        ys, lows, highs = [], [], []
        for i, stats_i in enumerate(op.stats):
            value = value_of(stats_i)
            ys.append(value / scale if value is not None else float("nan"))
            change = (op.changes[i] or {}).get(stat.key)
            if reference is not None and change is not None and change.low is not None \
                    and change.high is not None and change.interval_shown:
                lows.append(reference * (1 + change.low) / scale)
                highs.append(reference * (1 + change.high) / scale)
            else:
                lows.append(float("nan"))
                highs.append(float("nan"))
        ax.vlines(x, lows, highs, color=_POINT, alpha=0.45, linewidth=5)
        ax.plot(x, ys, "o-", color=_POINT, markersize=4, linewidth=1)
        for c in series.change_points:
            if c.op == op.op and c.stat == stat.key:
                color = _WORSE if c.verdict == "worse" else _BETTER
                ax.axvline(c.index - 0.5, color=color, linestyle="--", linewidth=1.2)
                ax.annotate(f"{c.change.change:+.0%}", (c.index - 0.5, 1.0),
                            xycoords=("data", "axes fraction"), color=color, fontsize=8,
                            ha="left", va="top")
        ax.set_ylabel(stat.label if stat.key == RATE.key else f"{stat.label} ({unit.name})")
        ax.grid(True, alpha=0.3)
    axes[-1].set_xticks(x)
    axes[-1].set_xticklabels(series.labels, rotation=45 if len(x) > 6 else 0, ha="right",
                             fontsize=8)
    axes[0].set_title(f"{op.op} along {series.by}\nbars: 95% interval of the change against "
                      f"{series.points[series.baseline].label}; dashed: change points",
                      fontsize=9)
    return fig


def render_series_plots(series: Series, formats: tuple[str, ...] = ("png", "svg")
                        ) -> list[Plot]:
    return [figure_plot(f"series-{op.op}", f"{op.op} along {series.by}",
                        op_figure(series, op), formats)
            for op in series.ops if any(s.samples for s in op.stats)]
