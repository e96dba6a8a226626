"""Export pieces against independent oracles, no root: heatmap binning (numpy.histogram2d),
interval coverage (brute force), the HdrHistogram bucket layout (the hdrhistogram package),
folded profiles and flame-graph layout (hand-computed), the Perfetto export of paced ops, CSV
of several iterations, and the command line's bad input."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import numpy as np
import pyarrow.csv as pacsv
import pytest
from compare_fixtures import lognormal_ns, write_run

from stallbench.analysis import folded
from stallbench.analysis import heatmap as hm
from stallbench.analysis.hdr import HdrLayout
from stallbench.cli import main

pytestmark = pytest.mark.oracle


def test_heatmap_counts_equal_numpy_histogram2d() -> None:
    rng = np.random.default_rng(1)
    latency = lognormal_ns(rng, 50_000, 2e5, 1.2)
    start = np.sort(rng.integers(0, 9_000_000_000, latency.size))
    t_edges = hm.time_edges(10e9)
    l_edges = hm.latency_edges([latency])
    assert l_edges[0] <= latency.min() and l_edges[-1] >= latency.max()
    result = hm.heatmap(start, latency, t_edges, l_edges)
    expected, _, _ = np.histogram2d(start + latency, latency, bins=[t_edges, l_edges])
    assert np.array_equal(result.counts, expected.astype(np.int64))
    assert result.counts.sum() == latency.size


def test_coverage_and_psi_share_against_brute_force() -> None:
    rng = np.random.default_rng(2)
    start = rng.uniform(0, 1e9, 300)
    duration = rng.exponential(5e6, 300)
    edges = np.linspace(0, 1.2e9, 25)
    got = hm.coverage(start, duration, edges)
    brute = [sum(max(0.0, min(s + d, hi) - max(s, lo)) for s, d in zip(start, duration,
                                                                        strict=True)) / (hi - lo)
             for lo, hi in zip(edges[:-1], edges[1:], strict=True)]
    assert np.allclose(got, brute, rtol=1e-9, atol=1e-9)
    # PSI: 25% of each second stalled -> 0.25 per bin
    t = np.arange(0, 11) * 1e9
    share = hm.stalled_share(t, t * 0.25, np.arange(0, 11) * 1e9)
    assert np.allclose(share, 0.25)


def test_hdr_layout_matches_the_hdrhistogram_package() -> None:
    histogram_mod = pytest.importorskip("hdrh.histogram")
    reference = histogram_mod.HdrHistogram(1, 3600 * 10**9, 3)
    layout = HdrLayout(1, 3600 * 10**9, 3)
    assert layout.counts_len == reference.counts_len
    rng = np.random.default_rng(3)
    values = np.concatenate([np.arange(0, 5000), rng.integers(1, 3600 * 10**9, 20_000),
                             [2047, 2048, 4095, 4096, 10**9, 3600 * 10**9]])
    got = layout.index(values)
    expected = [reference._counts_index_for(int(v)) for v in values]
    assert got.tolist() == expected


def test_folded_profile_diff_and_layout_by_hand() -> None:
    rows = [("p", "a;b", 1_500), ("p", "a;b", 1_000), ("p", "a;c", 4_000), ("q", "", 700),
            ("p", "a;c", -1)]
    profile = folded.time_weighted(rows)
    assert profile == {"p;a;b": 3, "p;a;c": 4, "q;[unknown]": 1}   # µs, rounded once
    other = {"p;a;b": 10, "r;x": 2}
    diff = folded.differential(profile, other)
    assert sum(a for _, a, _ in diff) == sum(profile.values())
    assert sum(b for _, _, b in diff) == sum(other.values())
    assert folded.format_differential(diff).splitlines()[0] == "p;a;b 3 10"
    frames, total = folded.layout(profile)
    boxes = {f.stack: (f.x, f.width) for f in frames}
    assert total == 8
    assert boxes == {"p": (0, 7), "p;a": (0, 7), "p;a;b": (0, 3), "p;a;c": (3, 4),
                     "q": (7, 1), "q;[unknown]": (7, 1)}


def test_perfetto_paced_ops_carry_the_intended_start(tmp_path) -> None:
    n = 200
    start = np.arange(n, dtype=np.int64) * 1_000_000 + 50_000
    intended = np.arange(n, dtype=np.int64) * 1_000_000
    latency = np.full(n, 20_000, dtype=np.int64)
    write_run(tmp_path / "results", "paced", {"wal": latency}, duration_s=0.3,
              starts={"wal": start}, intended={"wal": intended})
    out = tmp_path / "t.json"
    assert main(["export", "paced", "--results", str(tmp_path / "results"), "--format",
                 "perfetto", "--window", "50ms-100ms", "--output", str(out)]) == 0
    slices = [e for e in json.loads(out.read_text())["traceEvents"] if e.get("cat") == "op"]
    # op k runs from k ms + 50 µs to k ms + 70 µs: ops 50..99 overlap [50 ms, 100 ms]
    assert len(slices) == 50
    first = min(slices, key=lambda e: e["ts"])
    k = 50
    assert first["args"]["intended_start_ns"] == intended[k]
    assert first["args"]["response_ns"] == start[k] + latency[k] - intended[k]


def test_csv_of_a_variant_with_two_iterations(tmp_path, capsysbinary) -> None:
    rng = np.random.default_rng(4)
    sizes = (300, 500)
    for seed, size in enumerate(sizes):
        write_run(tmp_path / "results", "v", {"read": lognormal_ns(rng, size, 1e5),
                                              "write": lognormal_ns(rng, 7, 1e6)},
                  duration_s=1.0, seed=seed)
    assert main(["export", "v", "--results", str(tmp_path / "results"), "--format",
                 "csv", "-q"]) == 0
    captured = capsysbinary.readouterr()
    assert captured.err == b""          # -q: no summary line
    table = pacsv.read_csv(io.BytesIO(captured.out))
    assert table.column_names[:3] == ["variant", "workload", "iteration"]
    iterations = table["iteration"].to_numpy()
    assert [int((iterations == i).sum()) for i in (1, 2)] == [s + 7 for s in sizes]
    assert set(table["op"].to_pylist()) == {"read", "write"}


@pytest.mark.parametrize("args, words", [
    (["--format", "csv", "--svg"], "--svg goes with --format folded"),
    (["--format", "perfetto", "--window", "3s"], "give START-END"),
    (["--format", "perfetto", "--window", "3s-1s"], "end must come after"),
    (["--format", "perfetto", "--around-slow", "0"], "1 or more"),
    (["--format", "perfetto", "--around-slow", "9", "--max-events", "5"],
     "give --max-events 9 or more"),
    (["--format", "perfetto", "--window", "20s-21s"], "starts after the end of v/sim/"),
    (["--format", "hdr"], "exports one run"),
    (["--format", "folded"], "no blocked stacks recorded"),
    (["--format", "bogus"], "invalid choice"),
    (["--format", "csv", "--output", "/proc/nope/x.csv"], "cannot write"),
])
def test_bad_export_input_is_one_line_exit_2(tmp_path, args, words) -> None:
    rng = np.random.default_rng(5)
    for seed in (1, 2):
        write_run(tmp_path / "results", "v", {"read": lognormal_ns(rng, 50, 1e5)},
                  duration_s=1.0, seed=seed)
    proc = subprocess.run([sys.executable, "-m", "stallbench", "export", "v", "--results",
                           str(tmp_path / "results"), *args], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in proc.stderr
    assert not list(tmp_path.glob("*.tmp"))


def test_plan_schema_covers_the_loader_and_validates_the_examples() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    import tomllib

    from conftest import ROOT
    from stallbench import schemas
    from stallbench.plan import planfile as plan

    schema = schemas.load("plan")
    jsonschema.Draft202012Validator.check_schema(schema)
    assert plan._TOP_KEYS <= set(schema["properties"])
    assert plan._VARIANT_KEYS <= set(schema["$defs"]["variant"]["properties"])
    examples = sorted((ROOT / "examples").glob("*.toml"))
    assert examples
    for path in examples:
        data = tomllib.loads(path.read_text())
        plan.load_plan(path)                     # the loader accepts it ...
        jsonschema.validate(data, schema)        # ... and so does the schema
    bad = tomllib.loads(examples[0].read_text())
    bad["variants"][0]["colour"] = "blue"        # the loader refuses unknown keys: so does it
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_run_and_comparison_schemas_refuse_what_readers_refuse(tmp_path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from stallbench import schemas

    rng = np.random.default_rng(6)
    path = write_run(tmp_path / "results", "v", {"read": lognormal_ns(rng, 100, 1e5)},
                     duration_s=1.0)
    meta = json.loads((path / "run.json").read_text())
    jsonschema.validate(meta, schemas.load("run"))
    for key, value in (("status", "finished"), ("schema_version", "1"), ("variant", "a/b")):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**meta, key: value}, schemas.load("run"))
    for name in schemas.NAMES:
        jsonschema.Draft202012Validator.check_schema(schemas.load(name))


def test_perfetto_block_requests_are_async_pairs_with_numeric_times(tmp_path) -> None:
    import pyarrow.parquet as pq

    from stallbench.monitors.trace import rows_to_table
    from stallbench.results.rundirs import MONITOR_DIR

    latency = np.full(10, 2_000_000, dtype=np.int64)
    path = write_run(tmp_path / "results", "blk", {"read": latency}, duration_s=1.0,
                     starts={"read": np.arange(10, dtype=np.int64) * 50_000_000})
    rows = [{"t_ns": 1_000_000 + k * 50_000_000, "duration_ns": 300_000 + k, "pid": 7, "tid": 7,
             "comm": "w", "category": "block", "kind": "block R", "stack": "", "device": "sda",
             "detail": "sectors=8"} for k in range(10)]
    rows.append({"t_ns": 5_000, "duration_ns": 40_000, "pid": 7, "tid": 7, "comm": "w",
                 "category": "dstate", "kind": "D", "stack": "a;b;io_schedule", "device": "",
                 "detail": ""})
    for t in (100_000_000, 100_287_000):    # jiffy-rounded delays: the second overlaps partly
        rows.append({"t_ns": t, "duration_ns": 8_000_000, "pid": 7, "tid": 7, "comm": "w",
                     "category": "throttle", "kind": "vmscan throttled (writeback)", "stack": "",
                     "device": "", "detail": ""})
    (path / MONITOR_DIR).mkdir()
    pq.write_table(rows_to_table(rows), path / MONITOR_DIR / "trace_full.parquet")
    out = tmp_path / "t.json"
    assert main(["export", "blk", "--results", str(tmp_path / "results"), "--format",
                 "perfetto", "--output", str(out)]) == 0
    events = json.loads(out.read_text())["traceEvents"]
    begins = {e["id"]: e for e in events if e["ph"] == "b"}
    ends = {e["id"]: e for e in events if e["ph"] == "e"}
    assert len(begins) == len(ends) == 10
    for key, begin in begins.items():
        assert isinstance(begin["ts"], float) and begin["args"]["device"] == "sda"
        assert ends[key]["ts"] - begin["ts"] == pytest.approx(begin["args"]["duration_ns"] / 1e3)
    (d_slice,) = [e for e in events if e.get("cat") == "dstate"]
    assert d_slice["name"] == "D: io_schedule" and d_slice["args"]["stack"] == "a;b;io_schedule"
    assert d_slice["ts"] == 5.0 and d_slice["dur"] == 40.0
    first, second = sorted((e for e in events if e.get("cat") == "throttle"),
                           key=lambda e: e["ts"])
    assert first["ts"] + first["dur"] == second["ts"] == 108_000.0   # starts where it ended
    assert second["ts"] + second["dur"] == 108_287.0
    assert second["args"]["start_clipped_from_ns"] == 100_287_000
