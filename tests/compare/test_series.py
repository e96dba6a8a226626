"""stallbench series, list and query on a real series recorded here (randread under three memory
limits, one plan), checked against numpy on the raw ops and against run.json; the JSON's change
points on a hand-made step; bad input; and that reading leaves the results tree as it was."""

from __future__ import annotations

import csv
import hashlib
import io
import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from compare_fixtures import lognormal_ns, ops_span_s, write_run

from conftest import run_stallbench
from stallbench.analysis.histogram import QUANTILE_RELATIVE_ERROR

pytestmark = [pytest.mark.machine, pytest.mark.root]
LIMITS = ("256M", "128M", "96M")
PLAN = """workload = "randread"
duration = "1s"
warmup = "0"
iterations = 1
monitors = []
results = "{results}"
[workload_options]
file_size = "16M"
record_size = "64K"
""" + "".join(f'[[variants]]\nname = "m{m}"\nmemory = "{m}"\n' for m in LIMITS)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("series")
    plan = base / "plan.toml"
    plan.write_text(PLAN.format(results=base / "results"))
    run_stallbench("-q", "run", "--plan", str(plan), check=True, timeout=300)
    return base / "results"


def _series(results: Path, *args: str) -> dict:
    proc = run_stallbench("series", "--results", str(results), *args, "--format", "json")
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def _ops(run_dir: Path) -> dict[str, np.ndarray]:
    table = pq.read_table(run_dir / "ops.parquet")
    names = np.array(table["op"].cast("string").to_pylist())
    return {op: table["latency_ns"].to_numpy()[names == op] for op in set(names)}


def _tree_state(root: Path) -> dict[str, tuple[str, int]]:
    return {str(p.relative_to(root)): (hashlib.sha256(p.read_bytes()).hexdigest(),
                                       p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_table_holds_numpys_numbers_from_the_raw_ops(recorded):
    data = _series(recorded, *(f"m{m}" for m in LIMITS))
    assert [p["label"] for p in data["points"]] == [f"m{m}" for m in LIMITS]
    for point in data["points"]:
        (run_dir,) = point["run_dirs"]
        latency = _ops(Path(run_dir))["read"]          # randread: no warm-up by default
        cell = data["ops"]["read"]["points"][point["label"]]
        assert cell["samples"] == latency.size
        assert cell["mean_ns"] == pytest.approx(latency.mean(), rel=1e-9)
        # the rate over the measured span: from the first op's start to the last completion
        assert cell["rate"] == pytest.approx(latency.size / ops_span_s(Path(run_dir)), rel=1e-9)
        for key, q in (("p50_ns", 0.5), ("p99_ns", 0.99)):
            exact = np.quantile(latency, q, method="inverted_cdf")
            assert cell[key] == pytest.approx(exact, rel=QUANTILE_RELATIVE_ERROR)
        if point["label"] != data["baseline"]:
            base = data["ops"]["read"]["points"][data["baseline"]]
            change = cell["change"]["p50"]
            assert change["change"] == pytest.approx(cell["p50_ns"] / base["p50_ns"] - 1)
            assert change["low"] <= change["change"] <= change["high"]


def test_by_a_plan_key_orders_by_its_value_and_runs_record_their_plan(recorded):
    data = _series(recorded, *(f"m{m}" for m in LIMITS), "--by", "memory")
    mib = [int(m[:-1]) << 20 for m in LIMITS]
    assert [p["label"] for p in data["points"]] == [f"memory={v}" for v in sorted(mib)]
    assert [p["variants"] for p in data["points"]] == [[f"m{m}"] for m in reversed(LIMITS)]
    metas = [json.loads(p.read_text()) for p in sorted(recorded.glob("*/*/*/run.json"))]
    assert len({m["plan"]["hash"] for m in metas}) == 1          # one plan, one hash
    assert sorted(m["plan"]["settings"]["memory"] for m in metas) == sorted(mib)
    assert all(m["plan"]["file"].endswith("plan.toml") for m in metas)


def test_list_and_query_agree_with_run_json_and_numpy(recorded):
    proc = run_stallbench("list", "--results", str(recorded), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    entries = json.loads(proc.stdout)["entries"]
    metas = {json.loads(p.read_text())["variant"]: json.loads(p.read_text())
             for p in recorded.glob("*/*/*/run.json")}
    assert sorted(e["variant"] for e in entries) == sorted(metas)
    for entry in entries:
        meta = metas[entry["variant"]]
        assert entry["runs"] == 1 and entry["status"] == {"complete": 1}
        assert entry["kernels"] == [meta["kernel"]["release"]]
        assert entry["hosts"] == [meta["host"]] and entry["first_utc"] == meta["start_utc"]
    text = run_stallbench("list", "--results", str(recorded))
    assert text.returncode == 0 and "m96M" in text.stdout and "randread" in text.stdout

    sql = ("SELECT variant, kernel, count(*) AS n, quantile_disc(latency_ns, 0.99) AS p99 "
           "FROM ops GROUP BY variant, kernel ORDER BY variant")
    proc = run_stallbench("query", "--results", str(recorded), sql, "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert [r["variant"] for r in rows] == sorted(metas)
    for row in rows:
        run_dir = next(recorded.glob(f"{row['variant']}/*/*"))
        latency = _ops(run_dir)["read"]
        assert int(row["n"]) == latency.size
        assert row["kernel"] == metas[row["variant"]]["kernel"]["release"]
        assert int(row["p99"]) == int(np.quantile(latency, 0.99, method="inverted_cdf"))
    proc = run_stallbench("query", "--results", str(recorded), "SELECT variant, host, samples, "
                          "mean_ns FROM summaries ORDER BY variant", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    for row in json.loads(proc.stdout):
        latency = _ops(next(recorded.glob(f"{row['variant']}/*/*")))["read"]
        assert row["samples"] == latency.size and row["host"] == metas[row["variant"]]["host"]
        assert row["mean_ns"] == pytest.approx(latency.mean(), rel=1e-9)


def test_reading_leaves_the_results_tree_as_it_was(recorded, tmp_path):
    before = _tree_state(recorded)
    for args in (("series", *(f"m{m}" for m in LIMITS), "--plots", str(tmp_path / "plots")),
                 ("series", *(f"m{m}" for m in LIMITS), "--by", "kernel"),
                 ("list",), ("query", "SELECT count(*) FROM summaries")):
        run_stallbench(args[0], "--results", str(recorded), *args[1:])
    assert _tree_state(recorded) == before
    assert sorted(p.suffix for p in (tmp_path / "plots").iterdir()) == [".png", ".svg"]


def _step_tree(root: Path, knee: int = 3, points: int = 6) -> list[str]:
    """A hand-made series: p50 and p99 x1.6 from point `knee` on, 2 runs a point."""
    rng = np.random.default_rng(5)
    names = []
    for i in range(points):
        names.append(f"p{i}")
        for _ in range(2):
            scale = (1.6 if i >= knee else 1.0) * np.exp(rng.normal(0, 0.02))
            write_run(root, f"p{i}", {"read": lognormal_ns(rng, 20000, 5e4, 0.4, scale)},
                      duration_s=2.0)
    return names


def test_the_json_change_points_and_the_exit_status_as_check(tmp_path):
    names = _step_tree(tmp_path)
    proc = run_stallbench("series", "--results", str(tmp_path), *names, "--format", "json")
    assert proc.returncode == 1, proc.stderr                       # a new regression
    points = json.loads(proc.stdout)["change_points"]
    assert {c["metric"] for c in points} == {"read:p50", "read:p99"}
    for c in points:
        assert {"metric", "variant", "change", "low", "high", "verdict"} <= set(c)
        assert c["variant"] == "p3" and c["verdict"] == "worse"
        assert c["low"] < 0.6 < c["high"]
    # no longer new after p3; within a bound of 100%: exit 0; a bound inside the interval: 125
    assert run_stallbench("series", "--results", str(tmp_path), *names, "--since",
                          "p3").returncode == 0
    assert run_stallbench("series", "--results", str(tmp_path), *names, "--max-regression",
                          "100%").returncode == 0
    assert run_stallbench("series", "--results", str(tmp_path), *names, "--max-regression",
                          "60%").returncode == 125


@pytest.mark.parametrize("case", ["two points", "mixed shapes", "axis some lack", "bad since"])
def test_bad_input_is_one_line_and_exit_2(tmp_path, case):
    names = _step_tree(tmp_path / "r", points=4)
    args = list(names)
    if case == "two points":
        args = names[:2]
    elif case == "mixed shapes":
        write_run(tmp_path / "r", "other", {"read": np.full(100, 1000)}, duration_s=1.0,
                  seed=9)                                # another seed: another shape
        args = [*names, "other"]
    elif case == "axis some lack":
        args = [*names, "--by", "memory"]
    else:
        args = [*names, "--since", "yesterday"]
    proc = run_stallbench("series", "--results", str(tmp_path / "r"), *args)
    assert proc.returncode == 2
    assert proc.stderr.startswith("stallbench: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_change_point_between_two_commits_gives_the_bisect_command(tmp_path):
    names = _step_tree(tmp_path)
    shas = [f"{i + 1:040x}" for i in range(len(names))]
    for name, sha in zip(names, shas, strict=True):   # what bisect --git's kernels record
        for run_json in (tmp_path / name).glob("*/*/run.json"):
            meta = json.loads(run_json.read_text())
            meta["plan"] = {"hash": "0123456789abcdef", "file": str(tmp_path / "plan.toml"),
                            "settings": {}, "commit": sha, "git": str(tmp_path / "linux")}
            run_json.write_text(json.dumps(meta))
    data = _series(tmp_path, *names)
    (first, *_) = data["change_points"]
    assert first["bisect"] == ["stallbench", "bisect", "--git", str(tmp_path / "linux"),
                               "--good", shas[2], "--bad", shas[3], "--plan",
                               str(tmp_path / "plan.toml"), "--metric", first["metric"]]
    text = run_stallbench("series", "--results", str(tmp_path), *names).stdout
    assert " ".join(first["bisect"]) in text
    # --bisect runs it: here bisect itself refuses the missing tree, one line, exit 2
    proc = run_stallbench("series", "--results", str(tmp_path), *names, "--bisect")
    assert proc.returncode == 2
    assert f"running stallbench bisect --git {tmp_path / 'linux'}" in proc.stderr
    assert proc.stderr.splitlines()[-1].startswith("stallbench: ")


@pytest.mark.parametrize("points", [5, 12, 30])
def test_the_text_fits_100_columns_wrapped_or_transposed(tmp_path, points):
    rng = np.random.default_rng(2)
    names = [f"kernel-6.1.0-{i}-amd64" for i in range(points)]
    for name in names:
        write_run(tmp_path, name, {"read": lognormal_ns(rng, 3000, 5e4, 0.4)}, duration_s=1.0)
    proc = run_stallbench("series", "--results", str(tmp_path), *names)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100
    table = lines[lines.index(next(x for x in lines if x.startswith("read — "))) + 1:]
    if points > 16:       # the points as rows: one line each, named by what differs
        assert table[0].split()[:2] == ["point", "samples"]
        assert [x.split()[0] for x in table[1:points + 1]] == [str(i) for i in range(points)]
        assert "points named kernel-6.1.0-…-amd64" in proc.stdout
    else:                 # the points as columns (8 a table), named by what differs
        assert table[0].split() == [str(i) for i in range(min(points, 8))]
