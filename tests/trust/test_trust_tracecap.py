"""The trace monitors hold their raw trace text up to a cap (issue 34 item 14): past it the
events are still read out of the kernel's buffer, counted and dropped, and the run says so. The
oracle: the kernel's own count of the events read from the instance (per_cpu/cpu*/stats)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from stallbench.cli import main
from stallbench.core.context import EnvState, RunContext
from stallbench.core.journal import Journal
from stallbench.monitors import monitor_class
from stallbench.monitors.trace import TraceMonitor

pytestmark = [pytest.mark.machine, pytest.mark.root]
CAP = 64 << 10
SLEEPING = textwrap.dedent("""
    import os, sys, time
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o600)
    end = time.monotonic() + float(sys.argv[2])
    while time.monotonic() < end:
        os.pwrite(fd, b"x" * 4096, 0)
        os.fsync(fd)                      # sleeps in D state, each with its stack trace
        time.sleep(0.0002)                # and thousands of other switches and wake-ups
""")


def _kernel_events(instance: Path) -> int:
    """Events the ring buffer gave out or still holds, summed over the CPUs, by its stats."""
    total = 0
    for stats in instance.glob("per_cpu/cpu*/stats"):
        fields = dict(line.split(":", 1) for line in stats.read_text().splitlines())
        total += int(fields["entries"]) + int(fields["read events"])
    return total


def test_the_trace_past_its_cap_is_counted_and_dropped(tmp_path):
    (tmp_path / "state").mkdir()
    with Journal(tmp_path / "state") as journal:
        ctx = RunContext(run_dir=tmp_path, env=EnvState(workdir=tmp_path), duration_s=1,
                         journal=journal)
        monitor = monitor_class("trace")(max_bytes=CAP)
        if monitor.unavailable(ctx):
            pytest.skip(monitor.unavailable(ctx))
        ctx.start_clock()
        monitor.start(ctx)
        child = subprocess.Popen([sys.executable, "-c", SLEEPING, str(tmp_path / "f"), "1"])
        ctx.processes.add(child.pid)
        time.sleep(0.1)
        assert child.wait(timeout=30) == 0
        ctx.workload_ended()                       # tracing off: no event comes after this
        instance = Path(monitor._main.path)
        recorded = _kernel_events(instance)
        result = monitor.stop()
    held = b"".join(monitor._main_chunks)
    kept = sum(1 for line in held.split(b"\n")[:-1] if not line.startswith(b" =>"))
    status = result.summary
    assert len(held) <= CAP < len(held) + status["dropped_bytes"]
    assert kept + status["dropped_events"] == recorded, (kept, status, recorded)
    assert status["lost_events"] == 0 and status["max_bytes"] == CAP
    since_ns = status["dropped_from_s"] * 1e9
    rows = result.tables["trace"].to_pylist()
    assert rows and 0 < since_ns < 1.5e9
    # the table ends where the cap cut (dropped_from_s is rounded to the millisecond)
    assert max(r["t_ns"] for r in rows) <= since_ns + 0.5e6
    note, = (n for n in ctx.notes if n.startswith("trace monitor:"))
    assert f"{status['dropped_events']} trace events" in note
    assert f"covers the run up to {status['dropped_from_s']:.1f} s" in note


def test_a_real_runs_json_and_notes_say_what_was_dropped(tmp_path, monkeypatch):
    monkeypatch.setattr(TraceMonitor, "max_held_bytes", CAP)
    monkeypatch.setenv("STALLBENCH_STATE_DIR", str(tmp_path / "state"))
    # WAL commits and checkpoint fsyncs sleep in D state with their stacks many times a second
    # whatever the page cache holds (a cached randread may trace less than the cap in 1 s)
    assert main(["run", "pgioperf", "--duration", "1s", "--data-size", "16M", "--wal-size",
                 "4M", "--readers", "1", "--monitors", "trace,reclaim", "--no-drop-caches",
                 "--no-progress", "--variant", "capped",
                 "--results", str(tmp_path / "results")]) == 0
    meta = json.loads(next((tmp_path / "results").glob("capped/pgioperf/*/run.json"))
                      .read_text())
    trace = meta["monitors"]["trace"]
    assert trace["status"] == "ok" and trace["max_bytes"] == CAP
    assert trace["dropped_events"] > 0 and trace["dropped_bytes"] > 0
    assert "dropped_events" not in meta["monitors"]["reclaim"]      # far below its own cap
    assert any(n.startswith(f"trace monitor: {trace['dropped_events']} trace events")
               for n in meta["notes"])
