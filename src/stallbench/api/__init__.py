"""The public API for notebooks and scripts (re-exported by the package's face): load a
comparison or a series of recorded runs and get its tables as pyarrow, pandas or polars
frames, its JSON document or its text report::

    import stallbench
    cmp = stallbench.load_comparison("vanilla", "patched", results="results")
    cmp.frame("calls", "polars")            # the headline's calls, with their cause
    cmp.frame("changes", "pandas").query("verdict == 'worse'")
    print(cmp.text(brief=True))             # the headline, as `compare --brief` prints it

It reads runs (results/) and builds with compare/ as the command line does; the tables are
report/frames.py's. Nothing here prints or exits: bad input raises core.errors.UsageError.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..compare.model import CompareOptions, Comparison
from ..compare.seriesmodel import Series
from ..results.runselect import Resolved

FRAME_KINDS = ("arrow", "pandas", "polars")


def _frame(table: Any, kind: str) -> Any:
    if kind == "arrow":
        return table
    if kind == "pandas":
        return table.to_pandas()        # needs pandas installed
    if kind == "polars":
        import polars

        return polars.from_arrow(table)
    raise ValueError(f"kind {kind!r}: one of {', '.join(FRAME_KINDS)}")


class _Tables:
    """What a loaded comparison and series share: named tables, as frames of any kind."""

    def _rows(self) -> dict[str, list[dict[str, Any]]]:
        raise NotImplementedError

    @property
    def tables(self) -> list[str]:
        """The names frame() takes."""
        return list(self._rows())

    def frame(self, name: str, kind: str = "arrow") -> Any:
        """Table `name` as a pyarrow Table (`arrow`), a pandas or a polars DataFrame."""
        from ..report.frames import arrow_tables

        rows = self._rows()
        if name not in rows:
            raise KeyError(f"{name!r}: one of {', '.join(rows)}")
        return _frame(arrow_tables({name: rows[name]})[name], kind)

    def frames(self, kind: str = "arrow") -> dict[str, Any]:
        return {name: self.frame(name, kind) for name in self.tables}


@dataclass
class LoadedComparison(_Tables):
    """A comparison as `stallbench compare` builds it (.comparison: the dataclass tree)."""

    comparison: Comparison

    def _rows(self) -> dict[str, list[dict[str, Any]]]:
        from ..report.frames import comparison_rows

        return comparison_rows(self.comparison)

    def json(self) -> dict[str, Any]:
        """The comparison JSON (`compare --format json`) as a dict."""
        import json

        from ..report import jsonout

        return json.loads(jsonout.render(self.comparison))

    def text(self, brief: bool = False, width: int = 100) -> str:
        """The text report (brief: the headline alone)."""
        from ..report import BRIEF, SECTIONS, render

        return render(self.comparison, "text", width, BRIEF if brief else SECTIONS)


@dataclass
class LoadedSeries(_Tables):
    """A series as `stallbench series` builds it (.series: its dataclass tree)."""

    series: Series

    def _rows(self) -> dict[str, list[dict[str, Any]]]:
        from ..report.frames import series_tables_rows

        return series_tables_rows(self.series)

    def json(self) -> dict[str, Any]:
        """The series JSON (`series --format json`) as a dict."""
        from ..report.seriesdata import to_json

        return to_json(self.series)


def _resolve(specs: list[str], results: str | Path | None, workload: str | None
             ) -> list[Resolved]:
    from ..results.runselect import prepare_summaries, resolve_runs

    results = Path(results) if results is not None else None
    prepare_summaries(specs, results)
    return [resolve_runs(spec, results, workload) for spec in specs]


def load_comparison(baseline: str, *candidates: str, results: str | Path | None = None,
                    workload: str | None = None, percentiles: tuple[float, ...] | None = None,
                    metrics: list[str] | None = None, explain: bool = True
                    ) -> LoadedComparison:
    """Compare recorded variants (names under `results`, default $STALLBENCH_RESULTS or
    ./results, or paths) as `stallbench compare BASELINE CANDIDATE...` does; `metrics`
    ("read:p99", ...) as --metric; explain=False skips the where section."""
    from ..compare.comparison import build_comparison
    from ..compare.gate import metric_options
    from ..compare.metrics import parse_metric

    base, *others = _resolve([baseline, *candidates], results, workload)
    options = CompareOptions(percentiles=percentiles, explain=explain)
    if metrics:
        options = metric_options([parse_metric(m) for m in metrics], options)
    return LoadedComparison(build_comparison(base, others, options))


def load_series(*variants: str, by: str = "order", results: str | Path | None = None,
                workload: str | None = None, baseline: str | None = None) -> LoadedSeries:
    """Read variants as points along an axis, as `stallbench series VARIANT... --by BY`."""
    from ..compare.series import SeriesOptions, build_series

    results_path = Path(results) if results is not None else None
    options = SeriesOptions(results=results_path, by=by, baseline=baseline)
    return LoadedSeries(build_series(_resolve(list(variants), results, workload), options))
