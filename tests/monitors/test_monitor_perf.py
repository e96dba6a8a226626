"""The profile and perfstat monitors on real runs: perf samples and counts the workload's
processes and only theirs, from the start gate to the last op; it is journaled while it runs and
gone after a run that ends, is stopped by SIGTERM or is killed with -9 (then `stallbench
cleanup`), and so is its scratch folder; without perf the monitors are skipped with one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from reliability_support import children, run_meta, sb, sb_start, wait_until

from conftest import alive

pytestmark = [pytest.mark.oracle, pytest.mark.root,
              pytest.mark.skipif(subprocess.run(["sh", "-c", "command -v perf"],
                                                capture_output=True).returncode != 0,
                                 reason="perf is not installed (linux-perf)")]

MONITORS = "profile,perfstat"


def _randread(results: Path, work: Path, variant: str, duration: str) -> list[str]:
    return ["run", "randread", "--variant", variant, "--results", str(results), "--dir",
            str(work), "--file-size", "8M", "--threads", "2", "--duration", duration,
            "--monitors", MONITORS, "--no-drop-caches", "--no-progress"]


def _perf_of(path: Path) -> list[int]:
    """The perf processes working in this results tree (their command line names it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"perf") and str(path).encode() in b" ".join(argv):
            found.append(int(entry.name))
    return found


def _scratch(run_dir: Path) -> list[Path]:
    return sorted(run_dir.glob(".stallbench-*"))


def test_perf_samples_and_counts_only_the_workers_and_leaves_nothing(tmp_path) -> None:
    results, work, state = tmp_path / "results", tmp_path / "work", tmp_path / "state"
    work.mkdir()
    done = sb(*_randread(results, work, "one", "1.5"), state=state, timeout=180)
    assert done.returncode == 0, done.stderr
    run_dir = results / "one" / "randread" / "1"
    meta = run_meta(run_dir)
    workers = {int(p) for p in meta["workload_summary"]["worker_pids"].values()}
    assert len(workers) == 2
    profile = meta["monitors"]["profile"]
    assert profile["status"] == "ok" and profile["event"] in ("cycles", "cpu-clock")
    samples = pq.read_table(run_dir / "monitors" / "profile.parquet")
    assert samples.num_rows == profile["samples"] > 0
    # only the workload's processes: every sample is one of the two readers'
    assert set(samples.column("pid").to_pylist()) <= workers
    # on the run's clock, from the start gate (before the first op) to the workload's end
    t_ns = np.array(samples.column("t_ns").to_pylist())
    first = int(np.min(pq.read_table(run_dir / "ops.parquet", columns=["start_ns"])
                       .column("start_ns").to_numpy()))
    assert profile["from_s"] * 1e9 <= first + 1e6     # (from_s is rounded to a ms)
    assert profile["from_s"] * 1e9 - 1e6 <= t_ns.min() and t_ns.max() <= profile["to_s"] * 1e9
    # the readers' read calls are in their stacks, with the kernel's frames named
    assert any("ksys_pread64" in s or "__x64_sys_pread64" in s or "vfs_read" in s
               for s in samples.column("stack").to_pylist())
    counts = pq.read_table(run_dir / "monitors" / "perfstat.parquet").to_pylist()
    assert {row["pid"] for row in counts} <= workers
    assert {row["event"] for row in counts} >= {"task-clock", "context-switches"}
    stat = meta["monitors"]["perfstat"]
    assert stat["pmu"] == (profile["event"] == "cycles")
    # nothing left: no perf, no scratch folder, no journal entry
    assert _perf_of(results) == []
    assert _scratch(run_dir) == []
    assert list(state.glob("journal-*.json")) == []


def _journaled_perf(state: Path) -> list[dict]:
    entries = []
    for journal in state.glob("journal-*.json"):
        try:
            entries += json.loads(journal.read_text()).get("entries", [])
        except (OSError, ValueError):
            continue
    return [e for e in entries if e.get("kind") == "kill" and e.get("what") == "perf"]


def test_sigterm_stops_perf_and_keeps_the_samples(tmp_path) -> None:
    results, work, state = tmp_path / "results", tmp_path / "work", tmp_path / "state"
    work.mkdir()
    proc = sb_start(*_randread(results, work, "term", "60"), state=state)
    run_dir = results / "term" / "randread" / "1"
    perfs = wait_until(lambda: len(_perf_of(results)) == 2 and _perf_of(results), proc,
                       timeout=120, poll=0.05)
    # journaled while it runs, by pid and start time
    assert {e["pid"] for e in _journaled_perf(state)} == set(perfs)
    wait_until(lambda: (run_dir / ".spool").is_dir(), proc)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=120)
    meta = run_meta(run_dir)
    assert meta["status"] == "interrupted"
    assert meta["monitors"]["profile"]["status"] == "ok"
    assert pq.read_table(run_dir / "monitors" / "profile.parquet").num_rows > 0
    assert _perf_of(results) == [] and _scratch(run_dir) == []
    assert list(state.glob("journal-*.json")) == []


def test_kill_9_leaves_no_perf_and_cleanup_removes_its_folder(tmp_path) -> None:
    results, work, state = tmp_path / "results", tmp_path / "work", tmp_path / "state"
    work.mkdir()
    proc = sb_start(*_randread(results, work, "k9", "60"), state=state)
    run_dir = results / "k9" / "randread" / "1"
    wait_until(lambda: len(_perf_of(results)) == 2, proc, timeout=120, poll=0.05)
    started = children(proc.pid)          # the workers (and perf), the run's lock shared
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    # perf dies with stallbench (PR_SET_PDEATHSIG) and with the workers it follows
    wait_until(lambda: not _perf_of(results), timeout=30, poll=0.1)
    # the workers flush what they recorded first (SIGTERM from PR_SET_PDEATHSIG); until they
    # end they hold the run's journal lock, and cleanup rightly leaves a run in progress alone
    # (seen once in the suite: the scratch folders still there after a cleanup that exited 0)
    wait_until(lambda: not [pid for pid in started if alive(pid)], timeout=60, poll=0.05)
    assert _scratch(run_dir)          # the killed run left its scratch folder ...
    cleanup = sb("cleanup", state=state)
    assert cleanup.returncode == 0, cleanup.stderr
    assert _scratch(run_dir) == []    # ... which cleanup removed, as the journal said
    assert list(state.glob("journal-*.json")) == []


def test_without_perf_the_monitors_are_skipped_with_one_line(tmp_path) -> None:
    results, work, state = tmp_path / "results", tmp_path / "work", tmp_path / "state"
    work.mkdir()
    empty = tmp_path / "bin"
    empty.mkdir()
    done = sb(*_randread(results, work, "noperf", "0.5"), state=state, PATH=str(empty))
    assert done.returncode == 0, done.stderr
    for name in MONITORS.split(","):
        reason = "perf is not installed (Debian: apt install linux-perf)"
        assert f"monitor {name} skipped: {reason}" in done.stderr.splitlines()
        assert run_meta(results / "noperf" / "randread" / "1")["monitors"][name] == {
            "status": "skipped", "reason": reason}
    assert os.environ.get("PATH")        # (the test's own PATH is untouched)
