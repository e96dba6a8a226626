"""Scenario 2: kill -9 of stallbench mid-run, and of one worker mid-run."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from reliability_support import (
    children,
    leftovers,
    run_meta,
    sb,
    sb_start,
    sysctl,
    wait_until,
)

pytestmark = [pytest.mark.machine, pytest.mark.root]
SYSCTL = "vm.dirty_expire_centisecs"


def _recorded(run_dir: Path) -> dict[str, int]:
    """Rows per op in ops.parquet, counted with numpy (not through stallbench's reader)."""
    ops = np.array(pq.read_table(run_dir / "ops.parquet").column("op").to_pylist())
    names, counts = np.unique(ops, return_counts=True)
    return dict(zip(names.tolist(), counts.tolist(), strict=True))


def _gone(pids: list[int]) -> bool:
    return not any(Path(f"/proc/{pid}").exists() and
                   Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z" for pid in pids)


def _run_args(results: Path, work: Path, duration: str) -> list[str]:
    return ["run", "pgioperf", "--variant", "k9", "--results", str(results), "--fs", "ext4",
            "--work-dir", str(work), "--data-size", "16M", "--wal-size", "1M", "--readers", "2",
            "--duration", duration, "--sysctl", f"{SYSCTL}=1234", "--monitors", "default",
            "--no-progress"]


def test_kill_9_of_stallbench_then_cleanup_recovers_ops_and_restores_the_machine(tmp_path):
    results, work, state = tmp_path / "results", tmp_path / "work", tmp_path / "state"
    work.mkdir()
    before = sysctl(SYSCTL)
    assert before != "1234"
    proc = sb_start(*_run_args(results, work, "60"), state=state)
    run_dir = results / "k9" / "pgioperf" / "1"
    wait_until(lambda: (run_dir / ".spool").is_dir() and sysctl(SYSCTL) == "1234", proc)
    workers = wait_until(lambda: len(children(proc.pid)) >= 4 and children(proc.pid), proc)
    time.sleep(1.0)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)

    # the run is never shown as complete
    assert run_meta(run_dir)["status"] == "running"
    show = sb("show", str(run_dir), state=state)
    assert "incomplete: the run was killed" in show.stdout + show.stderr
    compare = sb("compare", str(run_dir), str(run_dir), state=state)
    assert compare.returncode == 2
    assert "incomplete: the run was killed" in compare.stderr
    # the machine is still changed: the scenario is real
    assert sysctl(SYSCTL) == "1234"
    assert leftovers(proc.pid, work)

    # the orphaned workers stop at once (SIGTERM on the parent's death), not at the deadline
    # 60 s away, flush what they recorded and write their own counters
    wait_until(lambda: _gone(workers), timeout=20, poll=0.1)
    counted: dict[str, int] = {}
    for summary in (run_dir / ".spool").glob("w*.summary.json"):
        for op, n in json.loads(summary.read_text())["counted"].items():
            counted[op] = counted.get(op, 0) + n
    assert counted.get("read", 0) > 0

    cleanup = sb("cleanup", state=state)
    assert cleanup.returncode == 0, cleanup.stderr
    assert leftovers(proc.pid, work) == []
    assert sysctl(SYSCTL) == before
    assert list(state.glob("journal-*.json")) == []
    meta = run_meta(run_dir)
    assert meta["status"] == "failed"
    assert "killed" in meta["reason"] and "recovered" in meta["reason"]
    recorded = _recorded(run_dir)
    assert {op: n for op, n in recorded.items() if n} == {op: n for op, n in counted.items() if n}
    assert not (run_dir / ".spool").exists()
    # cleanup wrote the killed run's summary in the same pass, and it matches its ops.parquet
    from stallbench.results import summaryfile
    summary = summaryfile.read(run_dir, summaryfile.fingerprint(run_dir / "ops.parquet"))
    assert summary is not None
    assert {op: int(s.block_count.sum()) for op, s in summary.ops.items()
            if not op.endswith(" (response)") and s.block_count.sum()} == \
        {op: n for op, n in recorded.items() if n}
    show = sb("show", str(run_dir), state=state)
    assert show.returncode == 0 and "failed" in show.stdout

    # the next run works, and cleanup then has nothing to do
    again = sb(*_run_args(results, work, "1"), state=state)
    assert again.returncode == 0, again.stderr
    assert run_meta(results / "k9" / "pgioperf" / "2")["status"] == "complete"
    assert sysctl(SYSCTL) == before
    second = sb("cleanup", state=state).stdout   # (may name other live runs: left alone)
    assert "undone" not in second and str(proc.pid) not in second


def _wal_writer(pid: int) -> int | None:
    """The worker holding pgioperf.wal open."""
    for child in children(pid):
        try:
            fds = os.listdir(f"/proc/{child}/fd")
            if any(os.readlink(f"/proc/{child}/fd/{fd}").endswith("/pgioperf.wal")
                   for fd in fds):
                return child
        except OSError:
            continue
    return None


def test_kill_9_of_one_worker_fails_the_run_at_once_and_keeps_the_rest(tmp_path):
    results, work, state = tmp_path / "results", tmp_path / "work", tmp_path / "state"
    work.mkdir()
    before = sysctl(SYSCTL)
    proc = sb_start(*_run_args(results, work, "60"), state=state)
    run_dir = results / "k9" / "pgioperf" / "1"
    wait_until(lambda: (run_dir / ".spool").is_dir(), proc)
    victim = wait_until(lambda: _wal_writer(proc.pid), proc)
    time.sleep(1.0)
    os.kill(victim, signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err

    meta = run_meta(run_dir)
    assert meta["status"] == "failed"
    assert "wal worker 0 died (killed by signal 9)" in meta["reason"]
    assert meta["duration_s"] < 30                 # the others were stopped, not left to run
    recorded = _recorded(run_dir)
    assert recorded.get("wal", 0) > 0              # what the dead worker flushed is kept
    for op in ("checkpoint", "read"):
        assert recorded[op] == meta["counted"][op] > 0, op
    assert leftovers(proc.pid, work) == []
    assert sysctl(SYSCTL) == before
    assert list(state.glob("journal-*.json")) == []
    assert "Traceback" not in err
