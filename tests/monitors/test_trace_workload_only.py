# ruff: noqa: E501  (real trace_pipe lines are long)
"""The trace monitor keeps only the workload's own waits: sched_switch is recorded when either
side is traced, so the task switched away from may be anyone's (issue 15 item 2)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest

from stallbench.core.context import EnvState, RunContext
from stallbench.core.journal import Journal
from stallbench.logformats.ftrace import parse_trace
from stallbench.monitors import monitor_class

pytestmark = pytest.mark.machine

TRACE = """\
     kworker/1:2-50      (     50) [001] d..2.   10.000100: sched_switch: prev_comm=kworker/1:2 prev_pid=50 prev_prio=120 prev_state=D ==> next_comm=python next_pid=100 next_prio=120
     kworker/1:2-50      (     50) [001] d..2.   10.000101: <stack trace>
 => __schedule
 => io_schedule
 => blk_mq_get_tag
          python-100    (    100) [001] d..2.   10.000200: sched_switch: prev_comm=python prev_pid=100 prev_prio=120 prev_state=D ==> next_comm=stallbench next_pid=7 next_prio=120
          python-100    (    100) [001] d..2.   10.000201: <stack trace>
 => __schedule
 => io_schedule
 => filemap_read
      stallbench-7       (      7) [001] d..2.   10.000300: sched_switch: prev_comm=stallbench prev_pid=7 prev_prio=120 prev_state=D ==> next_comm=python next_pid=101 next_prio=120
          <idle>-0       (-------) [000] dNs4.   10.000600: sched_wakeup: comm=python pid=100 prio=120 target_cpu=001
          <idle>-0       (-------) [000] dNs4.   10.000700: sched_wakeup: comm=kworker/1:2 pid=50 prio=120 target_cpu=001
          python-101    (    100) [000] .....   10.001000: mm_vmscan_memcg_reclaim_begin: order=0 gfp_flags=GFP_HIGHUSER_MOVABLE
          python-101    (    100) [000] .....   10.001250: mm_vmscan_memcg_reclaim_end: nr_reclaimed=32
        kswapd0-60       (     60) [000] .....   10.002000: mm_vmscan_direct_reclaim_begin: order=0 gfp_flags=GFP_KERNEL
        kswapd0-60       (     60) [000] .....   10.002500: mm_vmscan_direct_reclaim_end: nr_reclaimed=8
      stallbench-7       (      7) [001] .....   10.003000: balance_dirty_pages: bdi 254:0: limit=1 setpoint=1 dirty=1 wb_setpoint=1 wb_dirty=1 dirty_ratelimit=1 task_ratelimit=1 dirtied=1 dirtied_pause=1 paused=0 pause=4 period=4 think=0 cgroup_ino=1
"""


def test_rows_of_tasks_outside_the_workload_are_dropped() -> None:
    rows = parse_trace(TRACE, 10_000_000_000, workload={100})
    assert sorted((r["kind"], r["tid"]) for r in rows) == [("D", 100), ("memcg reclaim", 101)]
    d = next(r for r in rows if r["kind"] == "D")
    assert (d["t_ns"], d["duration_ns"], d["stack"]) == (200_000, 400_000,
                                                         "filemap_read;io_schedule")
    everything = parse_trace(TRACE, 10_000_000_000)        # no workload given: all rows
    assert {r["tid"] for r in everything} == {7, 50, 60, 100, 101}


FOREIGN = textwrap.dedent("""
    import os, sys, time
    os.sched_setaffinity(0, {0})
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o600)
    end = time.monotonic() + float(sys.argv[2])
    while time.monotonic() < end:
        os.pwrite(fd, b"x" * 4096, 0)
        os.fsync(fd)                      # D-state sleeps of a task that is not the workload
""")
WORKLOAD = textwrap.dedent("""
    import os, sys, time
    os.sched_setaffinity(0, {0})
    end = time.monotonic() + float(sys.argv[1])
    while time.monotonic() < end:
        time.sleep(0.0002)                # switches in and out on the same CPU, often
""")


@pytest.mark.root
def test_a_live_trace_holds_only_the_workloads_tasks(tmp_path) -> None:
    (tmp_path / "state").mkdir()
    with Journal(tmp_path / "state") as journal:
        ctx = RunContext(run_dir=tmp_path, env=EnvState(workdir=tmp_path), duration_s=2,
                         journal=journal)
        monitor = monitor_class("trace")()
        if monitor.unavailable(ctx):
            pytest.skip(monitor.unavailable(ctx))
        ctx.start_clock()
        foreign = subprocess.Popen([sys.executable, "-c", FOREIGN, str(tmp_path / "f"), "3"])
        monitor.start(ctx)
        child = subprocess.Popen([sys.executable, "-c", WORKLOAD, "2"])
        ctx.processes.add(child.pid)
        time.sleep(0.1)
        assert child.wait(timeout=30) == 0
        result = monitor.stop()
        foreign.wait(timeout=30)
    rows = result.tables["trace"].to_pylist()
    assert all(r["tid"] == child.pid or r["pid"] == child.pid for r in rows), \
        sorted({(r["comm"], r["tid"]) for r in rows if r["tid"] != child.pid})
