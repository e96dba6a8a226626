"""A real kernel mechanism that makes each read cost more CPU in the kernel while nothing waits
more: reads of /dev/urandom (the kernel's ChaCha20 generator fills the buffer) against reads of
/dev/zero (a memset), the same `dd` as a `command` workload. With the profile monitor the where
section names the function the reads' CPU samples moved to; that function is checked against
the kernel's own symbol table (/proc/kallsyms) and against `perf report`'s own reading of a
separate perf recording of the same reads, and its share against numpy over the run's raw
samples. The perfstat monitor's counts per op are checked against perf stat's own output and the
ops recorded; the folded and Perfetto exports against the raw samples."""

from __future__ import annotations

import csv
import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from conftest import run_stallbench

pytestmark = [pytest.mark.oracle, pytest.mark.root,
              pytest.mark.skipif(subprocess.run(["sh", "-c", "command -v perf"],
                                                capture_output=True).returncode != 0,
                                 reason="perf is not installed (linux-perf)")]

DD = ["dd", "of=/dev/null", "bs=4k", "count=100000000"]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory):
    """zero and urandom: one 2 s run each with the profile and perfstat monitors."""
    results = tmp_path_factory.mktemp("oncpu") / "results"
    runs = {}
    for source in ("zero", "urandom"):
        run_stallbench("run", "command", "--variant", source, "--results", str(results),
                       "--duration", "2", "--monitors", "profile,perfstat", "--syscalls",
                       "read", "--no-drop-caches", "--no-progress", "--",
                       DD[0], f"if=/dev/{source}", *DD[1:], timeout=180, check=True)
        runs[source] = results / source / "command" / "1"
    done = run_stallbench("compare", "zero", "urandom", "--results", str(results), "--format",
                          "json", check=True)
    return results, runs, json.loads(done.stdout)["where"]


def _hotspot_line(where: dict) -> tuple[str, str]:
    lines = [e["text"] for e in where["explanations"]
             if e["op"] == "read" and "CPU samples in" in e["text"]]
    assert len(lines) == 1, where["explanations"]
    function = where["profiles"]["urandom"]["command"]["hotspot"]["function"]
    assert f" in {function} (" in lines[0]
    return lines[0], function


def _kernel_functions() -> set[str]:
    with open("/proc/kallsyms") as f:
        return {fields[2] for line in f if len(fields := line.split()) >= 3
                and fields[1] in "Tt"}


def _perf_report_self(tmp: Path, source: str) -> dict[str, float]:
    """perf's own reading of a separate recording of the same reads: each symbol's share of
    the samples, counted in the innermost frame (--no-children)."""
    data = tmp / f"{source}.data"
    subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", "999", "-g", "-N", "-B",
                    "-o", str(data), "--", "dd", f"if=/dev/{source}", "of=/dev/null", "bs=4k",
                    "count=60000"], check=True, capture_output=True, timeout=120)
    report = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--no-children",
                             "--sort", "sym", "-g", "none", "-q"],
                            check=True, capture_output=True, text=True, timeout=120).stdout
    shares = {}
    for line in report.splitlines():
        match = re.match(r"\s*([\d.]+)%\s+\[[k.]\]\s+(\S+)", line)
        if match:
            shares[match[2]] = float(match[1]) / 100
    return shares


def test_the_line_names_the_function_perf_report_finds_in_the_kernel(recorded, tmp_path) -> None:
    _results, _runs, where = recorded
    line, function = _hotspot_line(where)
    assert function in _kernel_functions(), f"{function} is no function of /proc/kallsyms"
    urandom, zero = _perf_report_self(tmp_path, "urandom"), _perf_report_self(tmp_path, "zero")
    top = max(urandom, key=urandom.__getitem__)
    assert function == top, (line, sorted(urandom.items(), key=lambda kv: -kv[1])[:5])
    assert zero.get(function, 0.0) < 0.01, zero
    # the caller the line names is one the function is called from, in the symbol table too
    caller = line.rsplit(", from ", 1)[1]
    assert caller in _kernel_functions()


def test_the_shares_in_the_line_are_the_raw_samples_counted(recorded) -> None:
    _results, runs, where = recorded
    line, function = _hotspot_line(where)
    shares = []
    for source in ("urandom", "zero"):
        stacks = np.array(pq.read_table(runs[source] / "monitors" / "profile.parquet")
                          .column("stack").to_pylist(), dtype=object)
        meta = json.loads((runs[source] / "run.json").read_text())
        assert stacks.size == meta["monitors"]["profile"]["samples"] > 0
        leaves = np.array([s.rsplit(";", 1)[-1] for s in stacks])
        shares.append(float(np.mean(leaves == function)))
    assert f"{shares[0]:.0%} of the command workers' CPU samples in {function} " \
           f"({shares[1]:.0%} in the baseline)" in line


def _raw_counts(run: Path) -> dict[str, float]:
    """perf stat's own output as the run kept it, added up per event (task-clock in ns)."""
    meta = json.loads((run / "run.json").read_text())
    totals: dict[str, float] = {}
    for fields in csv.reader(line for line in meta["monitors"]["perfstat"]["output"]
                             if not line.startswith("#")):
        value, unit, event = fields[1], fields[2], fields[3]
        if value.startswith("<"):
            continue
        totals[event] = totals.get(event, 0.0) + float(value) * (1e6 if unit == "msec" else 1)
    return totals


def test_counters_per_op_are_perf_stat_output_over_the_ops(recorded) -> None:
    _results, runs, where = recorded
    per_op = {}
    for source, run in runs.items():
        ops = pq.read_table(run / "ops.parquet", columns=["op"]).num_rows
        raw = _raw_counts(run)
        rows = {r["role"]: r for r in where["perf_counters"][source]}
        assert rows["command"]["ops"] == ops
        for event in ("task-clock", "context-switches", "cpu-migrations", "page-faults"):
            assert rows["command"]["per_op"][event] == pytest.approx(raw[event] / ops, rel=1e-9)
        meta = json.loads((run / "run.json").read_text())
        assert raw["task-clock"] <= 1e9 * meta["duration_s"] * meta["machine_load"]["cpus"]
        per_op[source] = raw["task-clock"] / ops
    # the mechanism: each read of /dev/urandom costs several times the CPU of one of /dev/zero
    assert per_op["urandom"] > 3 * per_op["zero"]


def test_the_exports_carry_the_raw_samples(recorded, tmp_path) -> None:
    results, runs, _where = recorded
    stacks = pq.read_table(runs["urandom"] / "monitors" / "profile.parquet").column(
        "stack").to_pylist()
    folded = run_stallbench("export", "urandom", "--results", str(results), "--format",
                            "folded", "--stacks", "on-cpu", check=True).stdout
    counts = {}
    for line in folded.splitlines():
        stack, count = line.rsplit(" ", 1)
        assert stack.startswith("command;")
        counts[stack.removeprefix("command;")] = int(count)
    expected = dict(zip(*np.unique(np.array(stacks, dtype=object), return_counts=True),
                        strict=True))
    assert counts == {k: int(v) for k, v in expected.items()}
    trace = tmp_path / "trace.json"
    run_stallbench("export", "urandom", "--results", str(results), "--format", "perfetto",
                   "--output", str(trace), check=True)
    events = [e for e in json.loads(trace.read_text())["traceEvents"] if e.get("cat") == "oncpu"]
    assert sorted(e["args"]["stack"] for e in events) == sorted(stacks)
    assert all(e["name"] == e["args"]["stack"].rsplit(";", 1)[-1] for e in events)


def test_the_html_report_has_the_on_cpu_flame_graph(recorded, tmp_path) -> None:
    results, _runs, where = recorded
    _line, function = _hotspot_line(where)
    page = tmp_path / "report.html"
    run_stallbench("compare", "zero", "urandom", "--results", str(results), "--format", "html",
                   "--output", str(page), check=True)
    html = page.read_text()
    start = html.index("Where tasks ran on a CPU: urandom vs zero")
    assert f"<title>{function}\n" in html[start:html.index("</svg>", start)]
