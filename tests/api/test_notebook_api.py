"""The public API for notebooks (issue 35 item 6): load_comparison and load_series give the
numbers of the command's JSON as Arrow and polars (and pandas, where installed) frames, checked
against numpy on the raw ops and against the JSON; importing the plots leaves matplotlib's
backend alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from compare_fixtures import lognormal_ns, write_run

import stallbench
from stallbench.cli import main

pytestmark = pytest.mark.pure


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("api")
    rng = np.random.default_rng(6)
    for seed in range(2):
        for variant, scale in (("v1", 1.0), ("v2", 1.0), ("v3", 4.0)):
            write_run(path, variant, {"read": lognormal_ns(rng, 30000, 100e3, 0.3, scale)},
                      duration_s=3.0, seed=seed)
    return path


def test_the_comparison_frames_hold_the_json_and_numpys_numbers(results, capsys):
    loaded = stallbench.load_comparison("v1", "v3", results=results)
    assert loaded.tables == ["stats", "changes", "calls"]
    stats = loaded.frame("stats", "polars")
    ops = [pq.read_table(p / "ops.parquet") for p in sorted((results / "v3").glob("*/*"))]
    latency = np.concatenate([t["latency_ns"].to_numpy() for t in ops])
    samples = stats.filter((stats["variant"] == "v3") & (stats["stat"] == "samples"))
    assert samples["value"].to_list() == [latency.size]                   # numpy's count
    p50 = stats.filter((stats["variant"] == "v3") & (stats["stat"] == "p50"))["value"][0]
    assert p50 == pytest.approx(np.percentile(latency, 50), rel=0.01)    # within the bins
    assert main(["compare", "v1", "v3", "--results", str(results), "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    changes = loaded.frame("changes")                                      # pyarrow
    by_stat = {row["stat"]: row for row in changes.to_pylist()}
    for key, change in document["ops"]["read"]["variants"]["v3"]["change"].items():
        stat = key.removesuffix("_ns")
        assert by_stat[stat]["verdict"] == change["verdict"]
        assert by_stat[stat]["change"] == pytest.approx(change["change"])
    calls = loaded.frame("calls", "polars")
    assert set(calls["stat"].to_list()) == {"p50", "p99"} and set(calls["verdict"]) == {"worse"}
    assert loaded.json()["headline"] == document["headline"]
    assert loaded.text(brief=True).startswith("v3 against v1")


def test_pandas_frames_where_pandas_is_installed(results):
    pandas = pytest.importorskip("pandas")
    frame = stallbench.load_comparison("v1", "v3", results=results).frame("changes", "pandas")
    assert isinstance(frame, pandas.DataFrame) and len(frame) > 0


def test_the_series_frames_are_the_series_csv(tmp_path, capsys):
    rng = np.random.default_rng(7)
    names = ["s1", "s2", "s3", "s4"]
    for name, scale in zip(names, (1.0, 1.0, 4.0, 4.0), strict=True):   # one run a point
        write_run(tmp_path, name, {"read": lognormal_ns(rng, 30000, 100e3, 0.3, scale)},
                  duration_s=3.0)
    loaded = stallbench.load_series(*names, results=tmp_path)
    points = loaded.frame("points", "polars")
    assert main(["series", *names, "--results", str(tmp_path), "--format", "csv"]) in (0, 1)
    import csv
    import io
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == points.height
    for row, frame_row in zip(rows, points.iter_rows(named=True), strict=True):
        assert row["op"] == frame_row["op"] and row["point"] == frame_row["point"]
        value = frame_row["value"]
        assert (row["value"] == "") if value is None else float(row["value"]) == value
    change_points = loaded.frame("change_points", "polars")
    assert "read:p50" in change_points["metric"].to_list()
    assert change_points.filter(change_points["metric"] == "read:p50")["variant"][0] == "s3"


def test_bad_names_are_errors_not_prints(results):
    loaded = stallbench.load_comparison("v1", "v2", results=results, explain=False)
    with pytest.raises(KeyError):
        loaded.frame("nothing")
    with pytest.raises(ValueError):
        loaded.frame("stats", "excel")
    from stallbench.core.errors import UsageError
    with pytest.raises(UsageError):
        stallbench.load_comparison("v1", "nosuch", results=results)


def test_importing_the_plots_leaves_a_notebooks_backend_alone(tmp_path):
    script = (
        "import sys, matplotlib\n"
        "matplotlib.use('svg')\n"
        "import stallbench.report.plots as plots, stallbench.report.seriesplots\n"
        "import stallbench.report.heatmap\n"
        "assert matplotlib.get_backend() == 'svg', matplotlib.get_backend()\n"
        "assert 'matplotlib.pyplot' not in sys.modules\n"
        "from matplotlib.figure import Figure\n"
        "fig = Figure(); fig.subplots().plot([1, 2], [3, 4])\n"
        "png = plots.figure_plot('x', 'x', fig, ('png',)).png\n"
        "assert png.startswith(b'\\x89PNG'), png[:8]\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
