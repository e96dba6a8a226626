"""`stallbench export` on real runs: randread in a 64 MiB memory cgroup with the trace monitor
(real memcg reclaim and D-state waits) against the same reader with room. The oracles are the
run's own Parquet tables read with pyarrow/numpy, the hdrhistogram package's log reader, and a
headless Chromium for the pictures."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from test_report_html import browser, needs_chromium

from stallbench.store import resolve_runs

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (memory cgroup, tracefs)")

MONITORS = "trace,stacks,psi,counters,diskstats"


def _cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "stallbench", *args], capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("export")
    results, work = base / "results", base / "work"
    work.mkdir()
    for variant, memory, seconds in (("tight", "64M", "4"), ("roomy", "512M", "3")):
        proc = _cli("run", "randread", "--results", str(results), "--no-progress", "--variant",
                    variant, "--memory", memory, "--file-size", "256M", "--monitors", MONITORS,
                    "--duration", seconds, "--dir", str(work))
        assert proc.returncode == 0, proc.stderr
    tight = resolve_runs("tight", results).runs[0]
    roomy = resolve_runs("roomy", results).runs[0]
    return base, results, tight, roomy


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
                # the reader's root frame is red when tight blocked longer than roomy, else
                # blue: the oracle is the two variants' folded files, summed by hand
                def reader_total(variant: str) -> int:
                    proc = _cli("export", variant, "--results", str(results), "--format",
                                "folded")
                    text = proc.stdout
                    return sum(int(line.rpartition(" ")[2]) for line in text.splitlines()
                               if line.startswith("python;"))
                grew = reader_total("tight") > reader_total("roomy")
                (fill,) = [f for _, _, f, name in boxes if name == "python"]
                assert fill.startswith("rgb(255,") if grew else fill.endswith(", 255)"), fill
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
