"""The README's `stallbench query` (DuckDB) and polars examples, run as written on a results tree,
against numpy."""

from __future__ import annotations

import csv
import io
import os
import re
import shlex

import numpy as np
import pytest
from compare_fixtures import lognormal_ns, write_run

from conftest import ROOT, run_stallbench

pytestmark = pytest.mark.oracle


def _blocks(language: str) -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("### Querying a results tree", 1)[1].split("\n### ", 1)[0]
    return re.findall(rf"```{language}\n(.*?)```", section, re.S)


@pytest.fixture
def tree(tmp_path):
    rng = np.random.default_rng(11)
    data = {}
    for variant, scale in (("vanilla", 1.0), ("patched", 1.5)):
        for seed in (1, 2):
            ops = {"read": lognormal_ns(rng, 3000, 2e5, 0.6, scale),
                   "write": lognormal_ns(rng, 400, 1e6, 0.4, scale)}
            path = write_run(tmp_path / "results", variant, ops, duration_s=3.0, seed=seed)
            data[(variant, seed)] = path
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        yield tmp_path, data
    finally:
        os.chdir(cwd)


def _numpy_ops(paths):
    import pyarrow.parquet as pq
    tables = [pq.read_table(p / "ops.parquet") for p in paths]
    out = {}
    for t in tables:
        names = np.array(t["op"].cast("string").to_pylist())
        for op in set(names):
            out.setdefault(op, []).append(t["latency_ns"].to_numpy()[names == op])
    return {op: np.concatenate(v) for op, v in out.items()}


def test_the_query_command_from_the_readme(tree) -> None:
    pytest.importorskip("duckdb")
    _base, data = tree
    (block,) = _blocks("sh")
    (line,) = [x for x in block.splitlines() if x.startswith("stallbench query")]
    args = shlex.split(line)[1:]
    proc = run_stallbench(*args, "--format", "csv")       # ./results, as the README says
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert [(r["variant"], r["op"]) for r in rows] == [
        ("patched", "read"), ("patched", "write"), ("vanilla", "read"), ("vanilla", "write")]
    for row in rows:
        samples = _numpy_ops([p for (v, _s), p in data.items() if v == row["variant"]])[row["op"]]
        assert int(row["ops"]) == samples.size
        assert float(row["p99_ms"]) == pytest.approx(np.percentile(samples, 99) / 1e6, rel=1e-9)
    text = run_stallbench(*args)                          # as written: a table
    assert text.returncode == 0 and "p99_ms" in text.stdout and "patched" in text.stdout


def test_polars_query_from_the_readme(tree) -> None:
    pytest.importorskip("polars")
    _base, data = tree
    (code,) = _blocks("python")
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)  # noqa: S102 - the README's own example
    frame = scope["per_second"]
    import pyarrow.parquet as pq
    table = pq.read_table(data[("patched", 2)] / "ops.parquet")
    names = np.array(table["op"].cast("string").to_pylist())
    end = table["start_ns"].to_numpy() + table["latency_ns"].to_numpy()
    latency = table["latency_ns"].to_numpy()
    rows = frame.filter((frame["variant"] == "patched") & (frame["iteration"] == 2)
                        & (frame["op"] == "read")).to_dicts()
    mask = names == "read"
    seconds = end[mask] // 10**9
    assert [r["second"] for r in rows] == sorted(set(seconds.tolist()))
    for row in rows:
        in_second = seconds == row["second"]
        assert row["ops"] == int(in_second.sum())
        assert row["max_ms"] == pytest.approx(latency[mask][in_second].max() / 1e6)
    assert frame["ops"].sum() == sum(3400 for _ in data)
