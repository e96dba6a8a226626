"""machine_load: the CPU time of outside work during a run, and what a comparison does with it.

Oracles: a real CPU-burning process's own utime+stime from /proc/PID/stat; a real A/A pair where
one run shares the machine with two such processes (it must not be called worse)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import run_stallbench, stallbench_cmd
from stallbench.analysis import intervals as iv
from stallbench.analysis.interference import OutsideLoad, busier_side, outside_load, saturated
from stallbench.compare import verdicts
from stallbench.compare.model import CompareOptions
from stallbench.core import machineload

pytestmark = pytest.mark.quiet

BURN = "import time\nend = time.time() + 60\nwhile time.time() < end: pass\n"
TICK = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rfind(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def _outside_burner(tmp_path: Path) -> int:
    """A busy loop that is not our descendant: setsid -f forks it off and exits."""
    pidfile = tmp_path / f"burner-{time.monotonic_ns()}.pid"
    subprocess.run(["setsid", "-f", sys.executable, "-c",
                    f"import os; open({str(pidfile)!r}, 'w').write(str(os.getpid()))\n" + BURN],
                   check=True)
    for _ in range(500):
        if pidfile.exists() and pidfile.read_text():
            return int(pidfile.read_text())
        time.sleep(0.01)
    raise AssertionError("the burner did not start")


def _stop(pid: int) -> None:
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        pass


def test_outside_and_own_cpu_match_the_burners_own_accounting(tmp_path):
    outside = _outside_burner(tmp_path)
    own = subprocess.Popen([sys.executable, "-c", BURN])
    try:
        time.sleep(0.2)
        before = (_cpu_s(outside), _cpu_s(own.pid))
        start = machineload.snapshot()
        time.sleep(1.5)
        end = machineload.snapshot()
        after = (_cpu_s(outside), _cpu_s(own.pid))
    finally:
        _stop(outside)
        own.kill()
        own.wait()
    load = machineload.between(start, end)
    seconds = load["interval_s"]
    outside_cpus = (after[0] - before[0]) / seconds
    own_cpus = (after[1] - before[1]) / seconds
    assert outside_cpus > 0.1 and own_cpus > 0.1        # both ran (on a busy machine, a little)
    # the live descendant is ours, the setsid one is someone else's (ticks are 10 ms)
    assert load["own_cpus"] >= own_cpus - 0.05
    assert load["others_cpus"] >= outside_cpus - 0.05
    assert load["own_cpus"] <= own_cpus + 0.25          # plus this test process's own little
    assert load["busy_cpus"] <= load["cpus"] + 0.05


def test_saturated_needs_busy_cpus_mostly_taken_by_others():
    assert saturated({"cpus": 2, "busy_cpus": 1.95, "others_cpus": 1.2, "steal_cpus": 0.0})
    assert not saturated({"cpus": 2, "busy_cpus": 1.95, "others_cpus": 0.3})   # mostly ours
    assert not saturated({"cpus": 2, "busy_cpus": 1.5, "others_cpus": 1.2})    # idle time left
    assert saturated({"cpus": 2, "busy_cpus": 1.6, "others_cpus": 0.9, "steal_cpus": 0.3})


def test_busier_side_uses_a_tenth_of_the_machine():
    quiet, loaded = OutsideLoad(2, 0.10, 2), OutsideLoad(2, 0.35, 2)
    assert busier_side(quiet, loaded) == 1 and busier_side(loaded, quiet) == -1
    assert busier_side(quiet, OutsideLoad(2, 0.29, 2)) == 0          # 0.19 < 0.2 of 2 CPUs
    assert busier_side(None, loaded) == 0
    # on a full machine others' share is only what the workload left them (a lower bound)
    full = OutsideLoad(2, 1.6, 2, busy_share=0.97)
    assert busier_side(quiet, full) == 1                  # the quiet side had room: a demand
    cached_full = OutsideLoad(2, 0.5, 2, busy_share=0.98)  # cached reads took most of it
    assert busier_side(cached_full, full) == 0 and busier_side(full, cached_full) == 0
    alone_full = OutsideLoad(2, 0.02, 2, busy_share=0.99)  # nobody else wanted a CPU
    assert busier_side(alone_full, full) == 1 and busier_side(full, alone_full) == -1
    mean = outside_load([{"cpus": 2, "busy_cpus": 1.0, "others_cpus": 0.5, "steal_cpus": 0.1},
                         None, {"cpus": 2, "busy_cpus": 0.6, "others_cpus": 0.3}])
    assert mean == OutsideLoad(2, (0.6 + 0.3) / 2, 2, 0, (1.1 + 0.6) / 2 / 2)


def test_an_aa_run_next_to_a_cpu_hog_is_not_called_worse(tmp_path):
    results, work = tmp_path / "results", tmp_path / "work"
    work.mkdir()
    run = ["--results", str(results), "--dir", str(work), "--duration", "3", "--threads", "1",
           "--monitors", "none", "--no-progress", "--no-drop-caches", "--file-size", "32M"]
    run_stallbench("run", "randread", "--variant", "quiet", *run, check=True)
    hogs = [_outside_burner(tmp_path) for _ in range(2)]
    try:
        run_stallbench("run", "randread", "--variant", "hogged", *run, check=True)
    finally:
        for pid in hogs:
            _stop(pid)
    loads = {v: json.loads((results / v / "randread" / "1" / "run.json").read_text())
             ["machine_load"] for v in ("quiet", "hogged")}
    # the hogs really ran: more outside CPU, or a machine already saturated by other work
    assert (loads["hogged"]["others_cpus"] - loads["quiet"]["others_cpus"] > 0.2
            or any(map(saturated, loads.values()))), loads
    out = run_stallbench("compare", "quiet", "hogged", "--results", str(results),
                         "--format", "json", check=True)
    report = json.loads(out.stdout)
    verdicts = [c["verdict"] for op in report["ops"].values()
                for c in op["variants"]["hogged"]["change"].values()]
    assert "worse" not in verdicts
    # two hogs on a 2-CPU machine saturate it; on a bigger one the hogged run is only busier
    said = "MACHINE SATURATED" if any(map(saturated, loads.values())) else "MACHINE BUSIER"
    assert any(said in note for note in report["notes"]), (report["notes"], loads)
    text = run_stallbench("compare", "quiet", "hogged", "--results", str(results), check=True)
    assert said in text.stdout
    check = run_stallbench("check", "quiet", "hogged", "--results", str(results),
                           "--metric", "read:p50", "--metric", "read:p99",
                           "--metric", "read:p999", "--max-regression", "10%")
    assert check.returncode == 125, check.stdout + check.stderr


def test_a_busier_sides_far_tail_is_never_called_worse():
    """A 0.25-CPU neighbour multiplied the p99.9 of µs reads by 24 in an A/A pair (a few
    preempted ops take a scheduler slice each): the load bound that lets a 30x p50 stand must
    not let such a tail stand. Hand-made changes, each far beyond its bound."""
    def worse() -> iv.Change:
        return iv.Change(change=23.4, low=1.48, high=60.0, p_value=1e-6)
    stats = ("p50", "p99", "p999", "p9999")
    measured = {verdicts.Row("b", "read", stat): worse() for stat in stats}
    facts = verdicts.Facts(
        baseline="a", ops={"read": verdicts.OpFacts("service", {"a": 10**6, "b": 10**6})},
        options=CompareOptions(metrics=tuple(("read", s) for s in stats), default_rows=False),
        runs={"a": 3, "b": 3}, regime_ratios={},
        loads={"a": OutsideLoad(2, 0.0, 3), "b": OutsideLoad(2, 0.25, 3)},
        busier={"b": 1}, saturated={"b": 0},
        loaded_bounds={("read", "b"): {stat: worse() for stat in stats}})
    judged = verdicts.judge(measured, facts)
    found = {row.stat: (c.verdict, verdicts.why(c)) for row, c in judged.rows.items()}
    assert found == {"p50": (iv.Verdict.WORSE, None), "p99": (iv.Verdict.WORSE, None),
                     "p999": (iv.Verdict.UNCLEAR, verdicts.MACHINE_BUSIER),
                     "p9999": (iv.Verdict.UNCLEAR, verdicts.MACHINE_BUSIER)}
    [note] = judged.notes
    assert "(2 beyond what separate runs" in note and "2 of them beyond p99," in note, note


def test_a_large_change_next_to_a_cpu_hog_still_stands(tmp_path):
    """O_DIRECT reads are tens of times slower than cached ones here; a CPU hog beside the
    O_DIRECT runs makes their machine busier, but not by anything that could explain that.
    (The bound is the spread that much outside load puts between runs: with 0.6 of 2 CPUs
    taken, sd 1.5 on the log scale, which only three runs a side narrow below 25x.)"""
    results, work = tmp_path / "results", tmp_path / "work"
    work.mkdir()
    run = ["--results", str(results), "--dir", str(work), "--duration", "1", "--threads", "1",
           "--monitors", "none", "--no-progress", "--no-drop-caches", "--file-size", "16M"]
    for _ in range(3):
        run_stallbench("run", "randread", "--variant", "cached", *run, check=True)
    hog = _outside_burner(tmp_path)
    try:
        for _ in range(3):
            run_stallbench("run", "randread", "--variant", "direct", "--direct", *run,
                           check=True)
    finally:
        _stop(hog)
    out = run_stallbench("compare", "cached", "direct", "--results", str(results),
                         "--format", "json", check=True)
    report = json.loads(out.stdout)
    loads = [outside_load([json.loads(path.read_text())["machine_load"]
                           for path in sorted((results / v / "randread").glob("*/run.json"))])
             for v in ("cached", "direct")]
    p50 = report["ops"]["read"]["variants"]["direct"]["change"]["p50_ns"]
    assert busier_side(*loads) == 1, loads
    assert any("MACHINE BUSIER" in note and "stand" in note for note in report["notes"]), (
        report["notes"], p50)
    # the interval: well above 0 (with one hog, others' share 0.5-0.6 of the CPUs, the bound
    # allows x10-x16, and O_DIRECT is ~25x here)
    assert p50["verdict"] == "worse" and p50["low"] > 0.3, p50


def _kernel_threads_on_cpu_s() -> float:
    """The oracle: kthreadd's and its children's time on a CPU from /proc/PID/schedstat (the
    scheduler's nanoseconds, not the tick-sampled utime + stime machineload reads)."""
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            ppid = int(stat[stat.rfind(")") + 2:].split()[1])
            if entry.name == "2" or ppid == 2:
                total += int((entry / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total / 1e9


@pytest.mark.root
def test_the_kernels_own_threads_are_counted_apart(tmp_path):
    # journal commits and writeback of many small synced writes run in jbd2 and kworkers
    path = tmp_path / "synced"
    start, before = machineload.snapshot(), _kernel_threads_on_cpu_s()
    deadline = time.monotonic() + 2.0
    with open(path, "wb") as f:
        while time.monotonic() < deadline:
            f.write(b"x" * 4096)
            os.fsync(f.fileno())
    end, after = machineload.snapshot(), _kernel_threads_on_cpu_s()
    load = machineload.between(start, end)
    expected = (after - before) / load["interval_s"]
    assert 0.0 <= load["kernel_cpus"] <= load["others_cpus"]
    # a part of others' share: the threads' time as the scheduler counted it, at most what the
    # CPUs' busy time left beside the run's own (tick accounting puts some of it elsewhere)
    wanted = min(expected, load["others_cpus"])
    assert abs(load["kernel_cpus"] - wanted) <= 0.03 + 0.5 * wanted, (load, expected)


def _vmstat_drops() -> int:
    for line in Path("/proc/vmstat").read_text().splitlines():
        if line.startswith("drop_pagecache "):
            return int(line.split()[1])
    raise AssertionError("no drop_pagecache in /proc/vmstat")


@pytest.mark.root
def test_page_cache_drops_by_another_program_during_a_run_are_counted_and_noted(tmp_path):
    """A cache-reading run beside a program that drops the page cache three times while the run
    reads (others' benchmarks do): run.json counts the drops and says what they did; the same
    run left alone counts none. Oracle: the drops this test wrote, and vmstat read by the test
    around the whole run (which also holds the run's own drop before it starts)."""
    work = tmp_path / "data"
    work.mkdir()
    results = tmp_path / "results"
    argv = ["run", "randread", "--results", str(results), "--no-progress", "--monitors", "none",
            "--file-size", "16M", "--duration", "3s", "--warmup", "0", "--dir", str(work)]
    run_stallbench(*argv, "--variant", "alone", check=True)
    before = _vmstat_drops()
    proc = subprocess.Popen(stallbench_cmd(*argv, "--variant", "dropped"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    run_json = results / "dropped" / "randread" / "1" / "run.json"
    spool = run_json.parent / ".spool"
    try:
        deadline = time.monotonic() + 60
        while not (spool.is_dir() and any(p.stat().st_size for p in spool.iterdir())):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.01)
        for _ in range(3):                  # inside the 3 s of reading
            Path("/proc/sys/vm/drop_caches").write_text("1")
            time.sleep(0.3)
    finally:
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    in_all = _vmstat_drops() - before       # the run's own drop and the three of this test
    alone = json.loads((results / "alone" / "randread" / "1" / "run.json").read_text())
    dropped = json.loads(run_json.read_text())
    assert alone["machine_load"]["page_cache_drops"] == 0
    assert not [n for n in alone["notes"] if "dropped the page cache" in n]
    assert 3 <= dropped["machine_load"]["page_cache_drops"] <= in_all - 1
    notes = [n for n in dropped["notes"] if "another program dropped the page cache" in n]
    assert len(notes) == 1 and f"{dropped['machine_load']['page_cache_drops']} times" in notes[0]


def test_no_drops_no_note_and_an_old_kernel_says_nothing():
    start = machineload.Snapshot(0.0, 0.0, 0.0, 0.0, 2, 0.0, 5)
    assert machineload.between(start, machineload.Snapshot(1.0, 1.0, 0.0, 0.5, 2, 0.0, 5)
                               )["page_cache_drops"] == 0
    load = machineload.between(start, machineload.Snapshot(1.0, 1.0, 0.0, 0.5, 2, 0.0, 6))
    assert load["page_cache_drops"] == 1
    assert "dropped the page cache once during the run" in machineload.others_dropped_note(load)
    unknown = machineload.between(machineload.Snapshot(0.0, 0.0, 0.0, 0.0, 2),
                                  machineload.Snapshot(1.0, 1.0, 0.0, 0.5, 2))
    assert unknown["page_cache_drops"] is None
    assert machineload.others_dropped_note(unknown) is None
