"""`stallbench export` on real runs: randread in a 64 MiB memory cgroup with the trace monitor
(real memcg reclaim and D-state waits) against the same reader with room. The oracles are the
run's own Parquet tables read with pyarrow/numpy, the hdrhistogram package's log reader, and a
headless Chromium for the pictures."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from test_report_html import browser, needs_chromium

from stallbench.analysis import histogram as hist
from stallbench.results.runselect import resolve_runs

pytestmark = [pytest.mark.oracle, pytest.mark.root]

MONITORS = "trace,stacks,psi,counters,diskstats"


def _cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "stallbench", *args], capture_output=True,
                          text=True, timeout=timeout)


def _record(results: Path, variant: str, *args: str) -> None:
    """One run of `variant`, recorded again (at most twice more) when another program dropped
    the page cache during it: the suite runs other tests beside this one, and their cache drops
    empty the tight cgroup, which then never reclaims (run.json's machine_load says so)."""
    for _attempt in range(3):
        proc = _cli("run", "randread", "--results", str(results), "--no-progress", "--variant",
                    variant, "--file-size", "256M", *args)
        assert proc.returncode == 0, proc.stderr
        run = resolve_runs(variant, results).runs[0]
        if not run.meta.machine_load["page_cache_drops"]:
            return
        shutil.rmtree(results / variant)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("export")
    results, work = base / "results", base / "work"
    work.mkdir()
    for variant, memory, seconds in (("tight", "64M", "4"), ("roomy", "512M", "3")):
        _record(results, variant, "--memory", memory, "--monitors", MONITORS,
                "--duration", seconds, "--dir", str(work))
    tight = resolve_runs("tight", results).runs[0]
    roomy = resolve_runs("roomy", results).runs[0]
    return base, results, tight, roomy


@pytest.fixture(scope="module")
def full(pair):
    """A third variant recorded by both trace monitors at once (trace-full adds syscalls and
    the block requests of the disk), in the same tight cgroup."""
    base, results, _tight, _roomy = pair
    _record(results, "full", "--memory", "64M", "--monitors",
            "trace,trace-full,psi,counters,diskstats", "--duration", "2", "--dir",
            str(base / "work"))
    return resolve_runs("full", results).runs[0]


def _ops(run) -> dict[str, np.ndarray]:
    table = pq.read_table(run.path / "ops.parquet")
    return {"op": np.array(table["op"].cast("string").to_pylist(), dtype=object),
            **{c: table[c].to_numpy() for c in ("worker", "start_ns", "latency_ns")}}


def _trace(run) -> list[dict]:
    return pq.read_table(run.path / "monitors" / "trace.parquet").to_pylist()


def test_perfetto_trace_matches_the_run(pair) -> None:
    base, results, tight, _roomy = pair
    out = base / "tight.json"
    proc = _cli("export", "tight", "--results", str(results), "--format", "perfetto",
                "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    trace = json.loads(out.read_text())
    events = trace["traceEvents"]
    ops = _ops(tight)
    op_slices = [e for e in events if e.get("cat") == "op"]
    # every op is a slice, per op name and per worker track
    assert len(op_slices) == ops["op"].size
    names, counts = np.unique(ops["op"].astype(str), return_counts=True)
    assert {e["name"] for e in op_slices} == set(names)
    assert sum(1 for e in op_slices if e["name"] == names[0]) == counts[0]
    thread_names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
                    if e["ph"] == "M" and e["name"] == "thread_name"}
    assert any("worker 0 (reader)" in n for n in thread_names.values())

    # a slow op that a memcg reclaim interval overlaps, found from the Parquet tables
    rows = _trace(tight)
    reclaims = [r for r in rows if r["kind"] == "memcg reclaim"]
    assert reclaims, "a 64 MiB cgroup reading a 256 MiB file reclaims"
    worker_pid = int(tight.meta.workload_summary["worker_pids"]["0"])
    r_start = np.array([r["t_ns"] for r in reclaims if r["pid"] == worker_pid])
    r_end = r_start + np.array([r["duration_ns"] for r in reclaims if r["pid"] == worker_pid])
    start, latency = ops["start_ns"], ops["latency_ns"]
    overlapping = [i for i in np.argsort(latency)[::-1][:5000]
                   if np.any((r_start < start[i] + latency[i]) & (r_end > start[i]))]
    assert overlapping
    slow = overlapping[0]
    assert latency[slow] >= np.median(latency)
    slices = [e for e in op_slices if e["args"]["latency_ns"] == int(latency[slow])
              and abs(e["ts"] * 1000 - start[slow]) < 1.0]
    assert len(slices) == 1
    op_slice = slices[0]
    assert abs(op_slice["dur"] * 1000 - latency[slow]) < 1.0
    assert "worker 0" in thread_names[(op_slice["pid"], op_slice["tid"])]
    lo, hi = op_slice["ts"], op_slice["ts"] + op_slice["dur"]
    reclaim_slices = [e for e in events if e.get("cat") == "reclaim" and e["ph"] == "X"
                      and e["ts"] < hi and e["ts"] + e["dur"] > lo]
    assert reclaim_slices
    track = thread_names[(reclaim_slices[0]["pid"], reclaim_slices[0]["tid"])]
    assert "reclaim" in track and "worker 0" in track
    assert reclaim_slices[0]["args"]["tid"] == worker_pid
    # D-state slices carry their stack; PSI and op rates are counter tracks on the same clock
    dstate = [e for e in events if e.get("cat") == "dstate"]
    assert dstate and all(e["args"]["stack"].endswith(e["name"][3:]) for e in dstate[:100])
    counter_names = {e["name"] for e in events if e["ph"] == "C"}
    assert any(n.startswith("PSI system memory some") for n in counter_names)
    assert "read ops/s" in counter_names
    assert any(n.startswith("vmstat.") for n in counter_names)
    # Trace Event JSON shape: X slices never negative, and on each track nested or disjoint
    # (viewers drop slices that overlap partly)
    assert all(e["dur"] >= 0 for e in events if e["ph"] == "X")
    tracks: dict = {}
    for e in events:
        if e["ph"] == "X":
            tracks.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in tracks.values():
        open_ends: list[float] = []
        for begin, end in sorted(spans):
            while open_ends and open_ends[-1] <= begin:
                open_ends.pop()
            assert not open_ends or end <= open_ends[-1] + 1e-6
            open_ends.append(end)
    assert trace["displayTimeUnit"] == "ns"


def test_trace_d_states_are_the_workloads_own(pair) -> None:
    _base, _results, tight, _roomy = pair
    pids = {int(p) for p in tight.meta.workload_summary["worker_pids"].values()}
    dstate = [r for r in _trace(tight) if r["category"] == "dstate"]
    assert dstate
    assert {r["pid"] for r in dstate} <= pids | set(tight.meta.monitors["trace"]
                                                   ["workload_pids"])


def test_perfetto_windows_around_the_slowest_ops_and_the_cut(pair) -> None:
    base, _results, tight, _roomy = pair
    out = base / "slow.json"
    proc = _cli("export", str(tight.path), "--format", "perfetto", "--around-slow", "3",
                "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    events = json.loads(out.read_text())["traceEvents"]
    ops = _ops(tight)
    start, latency = ops["start_ns"], ops["latency_ns"]
    top3 = np.argsort(latency)[-3:]
    spans = sorted((max(0, start[i] - 100_000_000), start[i] + latency[i] + 100_000_000)
                   for i in top3)
    inside = np.zeros(start.size, dtype=bool)
    for lo, hi in spans:
        inside |= (start + latency >= lo) & (start <= hi)
    op_slices = [e for e in events if e.get("cat") == "op"]
    assert len(op_slices) == int(inside.sum()) < start.size
    exported = {e["args"]["latency_ns"] for e in op_slices}
    assert {int(latency[i]) for i in top3} <= exported

    proc = _cli("export", str(tight.path), "--format", "perfetto", "--max-events", "2000",
                "--output", str(base / "cut.json"))
    assert proc.returncode == 0, proc.stderr
    assert "cut at" in proc.stderr and "--window" in proc.stderr
    events = json.loads((base / "cut.json").read_text())["traceEvents"]
    assert sum(1 for e in events if e["ph"] == "X") <= 2000


def test_csv_has_every_op_with_variant_workload_iteration(pair) -> None:
    _base, results, tight, roomy = pair
    proc = subprocess.run([sys.executable, "-m", "stallbench", "export", "tight", "--results",
                           str(results), "--format", "csv"], capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    import pyarrow.csv as pacsv
    table = pacsv.read_csv(io.BytesIO(proc.stdout))
    ops = _ops(tight)
    assert table.num_rows == ops["op"].size
    assert set(table["variant"].to_pylist()) == {"tight"}
    assert set(table["workload"].to_pylist()) == {"randread"}
    assert set(table["iteration"].to_pylist()) == {1}
    assert table["latency_ns"].to_numpy().sum() == ops["latency_ns"].sum()
    assert np.array_equal(table["start_ns"].to_numpy(), ops["start_ns"])


def test_folded_totals_and_the_differential_file(pair) -> None:
    base, results, tight, roomy = pair
    files = {}
    for variant in ("tight", "roomy"):
        files[variant] = base / f"{variant}.folded"
        proc = _cli("export", variant, "--results", str(results), "--format", "folded",
                    "--output", str(files[variant]))
        assert proc.returncode == 0, proc.stderr
    diff = base / "diff.folded"
    proc = _cli("export", "roomy", "--results", str(results), "--format", "folded", "--diff",
                "tight", "--output", str(diff))
    assert proc.returncode == 0, proc.stderr

    def totals(path: Path) -> dict[str, int]:
        out = {}
        for line in path.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            out[stack] = int(count)
        return out

    tight_folded, roomy_folded = totals(files["tight"]), totals(files["roomy"])
    # time-weighted: the D-state time of the trace table, in µs (rounded once per stack)
    dstate = [r for r in _trace(tight) if r["category"] == "dstate" and r["duration_ns"] > 0]
    total_us = sum(r["duration_ns"] for r in dstate) / 1000
    assert abs(sum(tight_folded.values()) - total_us) <= len(tight_folded)
    assert any("folio_wait_bit_common" in s or "io_schedule" in s for s in tight_folded)
    a_total = b_total = 0
    stacks = set()
    for line in diff.read_text().splitlines():
        stack, a, b = line.rsplit(" ", 2)
        a_total += int(a)
        b_total += int(b)
        stacks.add(stack)
        assert int(a) == roomy_folded.get(stack, 0) and int(b) == tight_folded.get(stack, 0)
    assert a_total == sum(roomy_folded.values())
    assert b_total == sum(tight_folded.values())
    assert stacks == set(roomy_folded) | set(tight_folded)


def test_hdr_log_read_back_by_hdrhistogram(pair) -> None:
    hdrh_log = pytest.importorskip("hdrh.log")
    from hdrh.histogram import HdrHistogram

    base, _results, tight, _roomy = pair
    out = base / "tight.hlog"
    proc = _cli("export", str(tight.path), "--format", "hdr", "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    reader = hdrh_log.HistogramLogReader(str(out), HdrHistogram(1, 3600 * 10**9, 3))
    ops = _ops(tight)
    second = (ops["start_ns"] + ops["latency_ns"]) // 10**9
    total = HdrHistogram(1, 3600 * 10**9, 3)
    intervals = 0
    while (histogram := reader.get_next_interval_histogram()) is not None:
        intervals += 1
        # each interval's count is numpy's count of ops completing in that second
        index = round(histogram.get_start_time_stamp() / 1000 - reader.start_time_sec)
        assert histogram.get_total_count() == int((second == index).sum())
        total.add(histogram)
    assert intervals == len(np.unique(second))
    latency = ops["latency_ns"]
    assert total.get_total_count() == latency.size
    # the library's own recording of the raw samples is the oracle for the buckets
    recorded = HdrHistogram(1, 3600 * 10**9, 3)
    for value in latency.tolist():
        recorded.record_value(value)
    for q in (1, 50, 90, 99, 99.9, 99.99, 100):
        assert total.get_value_at_percentile(q) == recorded.get_value_at_percentile(q)
    assert total.get_max_value() == recorded.get_max_value()
    assert abs(total.get_value_at_percentile(50) - np.median(latency)) <= np.median(latency) * 0.01


def test_parquet_metadata_read_back_by_pyarrow(pair) -> None:
    _base, _results, tight, _roomy = pair
    for path in [tight.path / "ops.parquet", *sorted((tight.path / "monitors").glob("*.parquet"))]:
        metadata = pq.read_schema(path).metadata
        assert metadata[b"stallbench.variant"] == b"tight"
        assert metadata[b"stallbench.workload"] == b"randread"
        assert metadata[b"stallbench.iteration"] == str(tight.meta.iteration).encode()
        assert metadata[b"stallbench.version"] == tight.meta.stallbench_version.encode()
        assert metadata[b"stallbench.schema_version"] == str(tight.meta.schema_version).encode()
        units = json.loads(metadata[b"stallbench.units"])
        assert set(units) == set(pq.read_schema(path).names)
        if path.name == "ops.parquet":
            assert units["latency_ns"] == "ns" and "since run start" in units["start_ns"]
        # a monitor's table carries the units its TableSchema declares, not name guesses
        expected = {"diskstats.parquet": {"reads": "requests", "read_ms": "ms",
                                          "read_sectors": "512-byte sectors"},
                    "psi.parquet": {"avg10": "percent", "total_ns": "ns"}}.get(path.name, {})
        assert {k: units.get(k) for k in expected} == expected, (path.name, units)
    names = {p.name for p in (tight.path / "monitors").glob("*.parquet")}
    assert {"diskstats.parquet", "psi.parquet"} <= names, names


def test_schemas_validate_real_outputs(pair) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from stallbench import schemas

    base, results, tight, roomy = pair
    for run in (tight, roomy):
        jsonschema.validate(json.loads((run.path / "run.json").read_text()), schemas.load("run"))
    proc = _cli("compare", "roomy", "tight", "--results", str(results), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    comparison = json.loads(proc.stdout)
    assert list(comparison)[:2] == ["schema_version", "stallbench_version"]
    jsonschema.validate(comparison, schemas.load("comparison"))


@needs_chromium
def test_browser_renders_the_flame_graphs_and_the_report_heatmap(pair) -> None:
    base, results, _tight, _roomy = pair
    flame, diff, report = base / "tight.svg", base / "diff.svg", base / "report.html"
    for args, path in ((("tight", "--svg"), flame), (("roomy", "--diff", "tight", "--svg"), diff)):
        proc = _cli("export", *args, "--results", str(results), "--format", "folded",
                    "--output", str(path))
        assert proc.returncode == 0, proc.stderr
        ET.fromstring(path.read_text())      # well-formed XML
        assert "http://" not in path.read_text().replace("http://www.w3.org/2000/svg", "")
    proc = _cli("compare", "roomy", "tight", "--results", str(results), "--format", "html",
                "--output", str(report))
    assert proc.returncode == 0, proc.stderr

    driver = browser(base / "profile", 1280, 900)
    try:
        for path in (flame, diff):
            driver.get(path.as_uri())
            boxes = driver.execute_script(
                "return Array.from(document.querySelectorAll('g.frame')).map(g => {"
                "const r = g.querySelector('rect'); const b = r.getBBox();"
                " return [b.width, b.height, getComputedStyle(r).fill,"
                " g.querySelector('title').textContent.split('\\n')[0]]})")
            assert len(boxes) > 5 and all(w > 0 and h > 0 for w, h, _, _ in boxes)
            if path == diff:
                # the reader's root frame holds no stack of its own: drawn pale, however
                # much more time went through it (the frames' colours against the folded
                # files: test_differential_flame_graph_colours_each_frames_own_change)
                (fill,) = [f for _, _, f, name in boxes if name == "python"]
                assert fill == "rgb(235, 235, 235)", fill
            png = driver.get_screenshot_as_png()
            _assert_not_blank(png)
        driver.get(report.as_uri())
        heatmap = driver.execute_script(
            "const i = Array.from(document.images).find(i => i.alt.startsWith('Latency over"
            " time')); return i ? [i.complete, i.naturalWidth, i.naturalHeight] : null")
        assert heatmap and heatmap[0] and heatmap[1] > 300 and heatmap[2] > 100
        flame_in_report = driver.execute_script(
            "return document.querySelectorAll('.flame svg g.frame rect').length")
        assert flame_in_report > 5
        driver.execute_script(
            "Array.from(document.images).find(i => i.alt.startsWith('Latency over time'))"
            ".scrollIntoView()")
        _assert_not_blank(driver.get_screenshot_as_png())
        # on a phone the page itself does not scroll sideways: wide parts scroll in their box
        driver.set_window_size(412, 915)
        assert driver.execute_script(
            "return document.documentElement.scrollWidth - window.innerWidth") <= 1
    finally:
        driver.quit()


def _assert_not_blank(png: bytes) -> None:
    from PIL import Image
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("L"))
    assert pixels.std() > 10 and (pixels < 160).mean() > 0.005


# -- bounded exports: what the cap keeps (issue 23) ------------------------------------------

ALWAYS_KEPT = ("reclaim", "throttle", "dstate")
PAD_NS = 100_000_000


def _export(*args: str) -> tuple[subprocess.CompletedProcess, dict | None]:
    out = Path(args[args.index("--output") + 1]) if "--output" in args else None
    proc = _cli("export", *args)
    trace = json.loads(out.read_text()) if out is not None and proc.returncode == 0 else None
    return proc, trace


def _table_rows(run, name: str = "trace") -> list[dict]:
    return pq.read_table(run.path / "monitors" / f"{name}.parquet").to_pylist()


def _overlaps(t: np.ndarray, end: np.ndarray, spans) -> np.ndarray:
    inside = np.zeros(t.size, dtype=bool)
    for lo, hi in spans:
        inside |= (end >= lo) & (t <= hi)
    return inside


def test_around_slow_keeps_the_slowest_ops_and_their_windows_whatever_the_cap(pair) -> None:
    base, _results, tight, _roomy = pair
    ops = _ops(tight)
    start, latency = ops["start_ns"], ops["latency_ns"]
    n = 5
    top = np.argsort(latency, kind="stable")[-n:]
    spans = [(max(0, int(start[i]) - PAD_NS), int(start[i] + latency[i]) + PAD_NS) for i in top]
    rows = _table_rows(tight)
    t = np.array([r["t_ns"] for r in rows])
    end = t + np.maximum([r["duration_ns"] for r in rows], 0)
    kernel = [r for r, inside in zip(rows, _overlaps(t, end, spans), strict=True) if inside]
    assert kernel and {r["category"] for r in kernel} <= set(ALWAYS_KEPT)
    in_windows = _overlaps(start, start + latency, spans)
    room = 200
    cap = n + len(kernel) + room
    assert in_windows.sum() + len(kernel) > 1.5 * cap, "the cap must bite for this test"
    out = base / "slow-capped.json"
    proc, trace = _export(str(tight.path), "--format", "perfetto", "--around-slow", str(n),
                          "--max-events", str(cap), "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    events = trace["traceEvents"]
    assert sum(1 for e in events if e["ph"] == "X") <= cap
    op_slices = [e for e in events if e.get("cat") == "op"]
    for i in top:   # each of the n slowest, exactly once
        assert sum(1 for e in op_slices if e["args"]["latency_ns"] == int(latency[i])
                   and abs(e["ts"] * 1000 - start[i]) < 1.0) == 1, int(latency[i])
    # every kernel interval of the windows, per category, as the trace table has them
    for category in ALWAYS_KEPT:
        assert sum(1 for e in events if e.get("cat") == category and e["ph"] == "X") == \
            sum(1 for r in kernel if r["category"] == category), category
    # the other ops: the longest of those in the windows
    others = np.sort(latency[in_windows & ~np.isin(np.arange(latency.size), top)])[::-1]
    kept = sorted((e["args"]["latency_ns"] for e in op_slices), reverse=True)[n:]
    assert kept == others[:len(kept)].tolist() and len(kept) == room
    # and one line says what was left out and what keeps everything
    total = int(in_windows.sum()) + len(kernel)
    lines = [line for line in proc.stderr.splitlines() if "left out" in line]
    assert len(lines) == 1 and f"--max-events {total}" in lines[0], proc.stderr
    assert f"{int(in_windows.sum()) - n - room:,} shorter" in lines[0]
    assert trace["otherData"]["notes"] == [lines[0].removeprefix("stallbench: ")]


def test_whole_run_keeps_every_kernel_interval_and_thins_the_ops(pair) -> None:
    base, _results, tight, _roomy = pair
    ops = _ops(tight)
    latency = ops["latency_ns"]
    rows = _table_rows(tight)
    room = 1000
    out = base / "whole-capped.json"
    proc, trace = _export(str(tight.path), "--format", "perfetto", "--max-events",
                          str(len(rows) + room), "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    events = trace["traceEvents"]
    for category in ALWAYS_KEPT:
        assert sum(1 for e in events if e.get("cat") == category and e["ph"] == "X") == \
            sum(1 for r in rows if r["category"] == category), category
    op_slices = [e for e in events if e.get("cat") == "op"]
    assert sorted(e["args"]["latency_ns"] for e in op_slices) == np.sort(latency)[-room:].tolist()
    # the kept ops lie all over the run, not in its first part
    end = ops["start_ns"].max() / 1000
    assert max(e["ts"] for e in op_slices) > 0.8 * end
    # the op rates still count every op: one second of the counter track against numpy
    rates = [e for e in events if e["ph"] == "C" and e["name"] == "read ops/s"]
    completions = (ops["start_ns"] + latency) / 1000
    middle = rates[len(rates) // 2]
    counted = ((completions >= middle["ts"]) & (completions < middle["ts"] + 100_000)).sum()
    assert middle["args"]["value"] == pytest.approx(counted * 10, rel=1e-6)
    assert "left out" in proc.stderr and f"--max-events {len(rows) + latency.size}" in proc.stderr


def test_output_dash_is_standard_output(pair, tmp_path) -> None:
    _base, _results, tight, _roomy = pair
    proc = subprocess.run([sys.executable, "-m", "stallbench", "export", str(tight.path),
                           "--format", "csv", "--output", "-"], capture_output=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "-").exists() and list(tmp_path.iterdir()) == []
    import pyarrow.csv as pacsv
    table = pacsv.read_csv(io.BytesIO(proc.stdout))
    assert table.num_rows == _ops(tight)["op"].size


def test_window_outside_the_run_is_a_usage_error(pair) -> None:
    base, _results, tight, _roomy = pair
    ops = _ops(tight)
    last_start = ops["start_ns"].max() / 1e9
    last_end = (ops["start_ns"] + ops["latency_ns"]).max() / 1e9
    beyond = int(last_end) + 5
    proc, _ = _export(str(tight.path), "--format", "perfetto", "--window",
                      f"{beyond}s-{beyond + 1}s", "--output", str(base / "beyond.json"))
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    said = float(proc.stderr.split("lasts ")[1].split(" s")[0])
    assert last_start - 0.001 <= said <= max(last_end, tight.duration_s) + 1.0, proc.stderr
    assert not (base / "beyond.json").exists()
    # a window that reaches past the end is fine: it shows the end
    proc, trace = _export(str(tight.path), "--format", "perfetto", "--window",
                          f"{last_end - 0.2:.3f}s-{beyond}s", "--output", str(base / "end.json"))
    assert proc.returncode == 0, proc.stderr
    assert any(e.get("cat") == "op" for e in trace["traceEvents"])


def test_perfetto_and_folded_read_the_same_trace_table(pair, full) -> None:
    base, results, _tight, _roomy = pair
    rows = _table_rows(full, "trace_full")
    expected: dict[str, int] = {}
    for r in rows:
        if r["category"] == "dstate" and r["duration_ns"] > 0:
            key = f"{r['comm']};{r['stack'] or '[unknown]'}"
            expected[key] = expected.get(key, 0) + r["duration_ns"]
    expected = {k: (v + 500) // 1000 for k, v in expected.items() if (v + 500) // 1000}
    other = [r for r in _table_rows(full, "trace") if r["category"] == "dstate"]
    assert sum(r["duration_ns"] for r in other if r["duration_ns"] > 0) != \
        sum(r["duration_ns"] for r in rows if r["category"] == "dstate" and r["duration_ns"] > 0)
    proc = _cli("export", str(full.path), "--format", "folded")
    assert proc.returncode == 0, proc.stderr
    folded = {line.rpartition(" ")[0]: int(line.rpartition(" ")[2])
              for line in proc.stdout.splitlines()}
    assert folded == expected
    proc, trace = _export(str(full.path), "--format", "perfetto", "--output",
                          str(base / "full.json"))
    assert proc.returncode == 0, proc.stderr
    dstate_ns = sum(e["args"]["duration_ns"] for e in trace["traceEvents"]
                    if e.get("cat") == "dstate" and e["ph"] == "X")
    assert abs(dstate_ns / 1000 - sum(folded.values())) <= len(folded)


def test_compare_html_prints_no_numpy_warning(pair, full) -> None:
    base, results, _tight, _roomy = pair
    block = [r for r in _table_rows(full, "trace_full") if r["category"] == "block"]
    assert block and all(r["pid"] is None for r in block)   # what made numpy warn
    proc = _cli("compare", "tight", "full", "--results", str(results), "--format", "html",
                "--output", str(base / "full.html"))
    assert proc.returncode == 0, proc.stderr
    assert "Warning" not in proc.stderr, proc.stderr


def test_trace_full_sees_the_first_ops_and_monitors_stop_with_the_last(pair, full) -> None:
    _base, results, tight, _roomy = pair
    ops = _ops(full)
    pids = {int(k): int(v) for k, v in full.meta.workload_summary["worker_pids"].items()}
    calls = [r for r in _table_rows(full, "trace_full") if r["category"] == "syscall"]
    by_tid: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for tid in {r["tid"] for r in calls}:
        mine = sorted((r["t_ns"], r["t_ns"] + r["duration_ns"]) for r in calls if r["tid"] == tid)
        by_tid[tid] = (np.array([a for a, _ in mine]), np.array([b for _, b in mine]))
    for worker, pid in pids.items():
        first = np.flatnonzero(ops["worker"] == worker)[:50]
        begin, finish = by_tid[pid]
        for i in first:   # each of the worker's first ops holds one of its system calls
            # (the trace's clock has µs: a call may seem to begin up to 1 µs before its op)
            s, e = ops["start_ns"][i] - 1000, ops["start_ns"][i] + ops["latency_ns"][i] + 1000
            assert ((begin >= s) & (finish <= e)).any(), (worker, int(i))
    last_op = (ops["start_ns"] + ops["latency_ns"]).max()
    for table in ("counters", "psi", "diskstats"):
        t = pq.read_table(full.path / "monitors" / f"{table}.parquet")["t_ns"].to_numpy()
        assert t.min() <= ops["start_ns"].min(), table
        assert t.max() <= last_op + 100_000_000, (table, t.max() / 1e9, last_op / 1e9)
    # the plots of time stop at the run's end
    from stallbench.compare.comparison import build_comparison
    from stallbench.report import plots
    comparison = build_comparison(resolve_runs("full", results), [resolve_runs("tight", results)])
    ends = [(_ops(run)["start_ns"] + _ops(run)["latency_ns"]).max() / 1e9 for run in (full, tight)]
    for figure in (plots.counters_figure(comparison), plots.timeline_figure(comparison)):
        right = max(ax.get_xlim()[1] for ax in figure.axes if ax.get_visible())
        assert max(ends) <= right <= max(ends) + 0.1, (right, ends)
    # the heatmaps' time bins reach the last op's completion (none piled into the last bin)
    # and stop with the run as the plots do (the run's end: when the workload's processes
    # had exited, under load up to ~90 ms after the last op; and two bins of rounding)
    for op_maps in comparison.views.heatmaps:
        edges = op_maps.variants[0].heatmap.time_edges_ns / 1e9
        assert max(ends) <= edges[-1] <= max(ends) + 0.1 + 2 * (edges[1] - edges[0]), \
            (edges[-1], ends)


def _folded(variant: str, results: Path) -> dict[str, int]:
    proc = _cli("export", variant, "--results", str(results), "--format", "folded")
    assert proc.returncode == 0, proc.stderr
    return {line.rpartition(" ")[0]: int(line.rpartition(" ")[2])
            for line in proc.stdout.splitlines()}


def _svg_frames(svg: str) -> dict[str, str]:
    """Each frame of a flame-graph SVG as {stack path: fill}, the path rebuilt from geometry
    alone: a frame's parent is the box one row lower whose span holds it."""
    ns = {"s": "http://www.w3.org/2000/svg"}
    boxes = []
    for g in ET.fromstring(svg).iterfind(".//s:g[@class='frame']", ns):
        rect = g.find("s:rect", ns)
        boxes.append((float(rect.get("y")), float(rect.get("x")), float(rect.get("width")),
                      g.find("s:title", ns).text.split("\n")[0], rect.get("fill")))
    rows = sorted({y for y, *_ in boxes}, reverse=True)          # the root row is lowest
    paths: dict[tuple[float, float], str] = {}
    out = {}
    for y, x, width, name, fill in sorted(boxes, key=lambda b: -b[0]):
        depth = rows.index(y)
        parent = "" if depth == 0 else next(
            paths[(py, px)] for py, px, pw, *_ in boxes
            if py == rows[depth - 1] and px - 0.01 <= x and x + width <= px + pw + 0.6)
        paths[(y, x)] = f"{parent};{name}" if parent else name
        out[paths[(y, x)]] = fill
    return out


def test_differential_flame_graph_colours_each_frames_own_change(pair) -> None:
    base, results, _tight, _roomy = pair
    before, after = _folded("roomy", results), _folded("tight", results)
    proc = _cli("export", "roomy", "--diff", "tight", "--results", str(results), "--format",
                "folded", "--svg")
    assert proc.returncode == 0, proc.stderr
    assert "own time" in proc.stdout and "relative to its width" in proc.stdout   # the legend
    frames = _svg_frames(proc.stdout)
    assert len(frames) > 5

    def size(counts: dict[str, int], path: str) -> int:
        return sum(v for k, v in counts.items() if k == path or k.startswith(path + ";"))

    coloured = 0
    for path, fill in frames.items():
        own = after.get(path, 0) - before.get(path, 0)
        change = own / max(size(after, path), size(before, path))
        fade = int(235 - 190 * min(1.0, abs(change)))
        expected = (f"rgb(255,{fade},{fade})" if change > 0 else
                    f"rgb({fade},{fade},255)" if change < 0 else "rgb(235,235,235)")
        assert fill == expected, (path, fill, expected, own)
        coloured += fill != "rgb(235,235,235)"
    # the roots hold no stack of their own: pale, however much more time went through them
    roots = {p for p in frames if ";" not in p}
    assert roots and all(frames[p] == "rgb(235,235,235)" for p in roots if p not in after)
    assert coloured, "the leaves whose own time changed are coloured"


def test_shift_plot_axis_follows_the_changes_and_marks_clipped_intervals(pair, full) -> None:
    _base, results, tight, roomy = pair
    from stallbench.compare.comparison import build_comparison
    from stallbench.report import plots
    comparison = build_comparison(resolve_runs("roomy", results),
                                  [resolve_runs("tight", results), resolve_runs("full", results)])
    figure = plots.shift_figure(comparison)
    (op,) = [o for o in comparison.ops if o.op == "read"]
    (ax,) = [a for a in figure.axes if a.get_title().startswith("read:")]

    def after_warmup(run) -> np.ndarray:
        # the warm-up the comparison left out, stated or found (the subject here is the axis)
        ops = _ops(run)
        return ops["latency_ns"][ops["start_ns"] >= run.summary().warmup_ns]

    base_lat = after_warmup(roomy)
    # numpy's bracket of each change: the neighbouring order statistics of both sides (the
    # histogram interpolates between them), widened by the histogram's documented bucket error
    error = hist.QUANTILE_RELATIVE_ERROR
    lows, ups, highs = [], [], []
    for label, run in (("tight", tight), ("full", full)):
        curve = op.shift_curve[label]
        lat = after_warmup(run)
        for p, high in zip(curve.probabilities, curve.high, strict=True):
            lo_c, hi_c = (np.quantile(lat, p, method=m) for m in ("lower", "higher"))
            lo_b, hi_b = (np.quantile(base_lat, p, method=m) for m in ("lower", "higher"))
            lows.append((lo_c * (1 - error) / (hi_b * (1 + error)) - 1) * 100)
            ups.append((hi_c * (1 + error) / (lo_b * (1 - error)) - 1) * 100)
            highs.append(np.nan if high is None else high * 100)
    bottom, top = ax.get_ylim()
    # every change and 0 are on the axis, and the axis reaches no further than a quarter of
    # their span (at most) beyond them (0 included: in the suite every change of one recording
    # was below 0, the highest -0.5%, and the axis rightly reached 21.9 above 0)
    assert bottom <= min(ups + [0]) and max(lows + [0]) <= top
    span = max(max(ups + [0]) - min(lows + [0]), plots.SHIFT_MIN_SPAN)
    assert top <= max(ups + [0]) + span / 4, (top, max(ups), span)
    beyond = np.nanmax(highs)
    assert beyond > top, "an interval must reach beyond the axis for this test to mean something"
    markers = [line for line in ax.get_lines()
               if line.get_marker() == "^" and len(line.get_ydata())]
    assert markers and all(np.allclose(line.get_ydata(), top) for line in markers)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "interval goes on beyond the axis" in legend


@needs_chromium
def test_html_heatmaps_one_per_variant_readable_at_page_width(pair, full) -> None:
    base, results, _tight, _roomy = pair
    report = base / "three.html"
    proc = _cli("compare", "roomy", "tight", "full", "--results", str(results), "--format",
                "html", "--output", str(report))
    assert proc.returncode == 0, proc.stderr
    driver = browser(base / "profile-heatmaps", 1280, 900)
    try:
        driver.get(report.as_uri())
        shown = driver.execute_script(
            "return Array.from(document.images).filter(i => i.alt.startsWith('Latency over"
            " time')).map(i => [i.alt, i.complete, i.naturalWidth, i.clientWidth])")
        assert [alt.rsplit(": ", 1)[1] for alt, *_ in shown] == ["roomy", "tight", "full"]
        for alt, complete, natural, client in shown:
            assert complete and client >= 0.95 * natural, (alt, natural, client)  # not squeezed
        driver.execute_script(
            "Array.from(document.images).find(i => i.alt.endsWith(': tight'))"
            ".scrollIntoView()")
        png = driver.get_screenshot_as_png()
        (base / "heatmap-screenshot.png").write_bytes(png)
        _assert_not_blank(png)
    finally:
        driver.quit()
