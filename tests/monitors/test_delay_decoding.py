"""taskstats decoding against independent readers (issue 22 item 8): the kernel's per-thread
/proc/PID/task/TID/schedstat (run_delay and timeslices: the same sched_info the taskstats cpu
fields are copied from), the C compiler's layout of struct taskstats v16 (offsets of every field
decoded), and the per-kind maxima's own consistency (mean <= max <= total)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stallbench.analysis.delaykinds import DELAY_KINDS
from stallbench.monitors.delay import DelayMonitor
from stallbench.monitors.taskstats import (
    _AC_PID,
    _AC_TGID,
    _MAX_AT,
    IO_FIELDS,
    MAX_SINCE_VERSION,
    TaskstatsSocket,
    decode_stats,
)

pytestmark = [pytest.mark.pure, pytest.mark.root]

SPIN = "import time\nend = time.time() + 30\nwhile time.time() < end: pass\n"


def _schedstat(pid: int) -> tuple[int, int]:
    on_cpu, run_delay, slices = Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()
    return int(run_delay), int(slices)


def test_cpu_delay_and_its_maximum_match_the_schedulers_own_counts(tmp_path: Path) -> None:
    if DelayMonitor.unavailable(None) is not None:
        pytest.skip(DelayMonitor.unavailable(None))
    from stallbench.core.context import EnvState, RunContext
    from stallbench.core.journal import Journal

    journal = Journal(tmp_path)
    ctx = RunContext(run_dir=tmp_path, env=EnvState(workdir=tmp_path), duration_s=30,
                     journal=journal)
    ctx.start_clock()
    monitor = DelayMonitor(interval_s=5)
    monitor.start(ctx)                       # kernel.task_delayacct on, journaled
    # more spinners than CPUs, so each one waits for a CPU
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN])
                for _ in range((os.cpu_count() or 1) + 2)]
    sock = TaskstatsSocket()
    try:
        import time
        time.sleep(1.5)
        for child in spinners:
            before, slices_before = _schedstat(child.pid)
            stats = decode_stats(sock.get(child.pid))
            after, slices_after = _schedstat(child.pid)
            assert stats["tid"] == child.pid and stats["tgid"] == child.pid
            assert before <= stats["cpu_ns"] <= after
            assert slices_before <= stats["cpu_count"] <= slices_after
            assert stats["cpu_ns"] > 0
            if stats["version"] >= MAX_SINCE_VERSION:
                mean = stats["cpu_ns"] / stats["cpu_count"]
                assert mean <= stats["cpu_max_ns"] <= stats["cpu_ns"], stats
            assert stats["io_read_syscalls"] is not None
    finally:
        sock.close()
        for child in spinners:
            child.kill()
            child.wait()
        monitor.stop()
        journal.undo_all()
        journal.close()


STRUCT = """
#include <stddef.h>
#include <stdio.h>
#include <linux/types.h>
struct taskstats {
  __u16 version; __u32 ac_exitcode; __u8 ac_flag; __u8 ac_nice;
  __u64 cpu_count __attribute__((aligned(8))); __u64 cpu_delay_total;
  __u64 blkio_count; __u64 blkio_delay_total; __u64 swapin_count; __u64 swapin_delay_total;
  __u64 cpu_run_real_total; __u64 cpu_run_virtual_total; char ac_comm[32];
  __u8 ac_sched __attribute__((aligned(8))); __u8 ac_pad[3];
  __u32 ac_uid __attribute__((aligned(8))); __u32 ac_gid; __u32 ac_pid; __u32 ac_ppid;
  __u32 ac_btime; __u64 ac_etime __attribute__((aligned(8))); __u64 ac_utime; __u64 ac_stime;
  __u64 ac_minflt; __u64 ac_majflt; __u64 coremem; __u64 virtmem; __u64 hiwater_rss;
  __u64 hiwater_vm; __u64 read_char; __u64 write_char; __u64 read_syscalls;
  __u64 write_syscalls; __u64 read_bytes; __u64 write_bytes; __u64 cancelled_write_bytes;
  __u64 nvcsw; __u64 nivcsw; __u64 ac_utimescaled; __u64 ac_stimescaled;
  __u64 cpu_scaled_run_real_total; __u64 freepages_count; __u64 freepages_delay_total;
  __u64 thrashing_count; __u64 thrashing_delay_total; __u64 ac_btime64;
  __u64 compact_count; __u64 compact_delay_total; __u32 ac_tgid;
  __u64 ac_tgetime __attribute__((aligned(8))); __u64 ac_exe_dev; __u64 ac_exe_inode;
  __u64 wpcopy_count; __u64 wpcopy_delay_total; __u64 irq_count; __u64 irq_delay_total;
  __u64 cpu_delay_max; __u64 cpu_delay_min; __u64 blkio_delay_max; __u64 blkio_delay_min;
  __u64 swapin_delay_max; __u64 swapin_delay_min; __u64 freepages_delay_max;
  __u64 freepages_delay_min; __u64 thrashing_delay_max; __u64 thrashing_delay_min;
  __u64 compact_delay_max; __u64 compact_delay_min; __u64 wpcopy_delay_max;
  __u64 wpcopy_delay_min; __u64 irq_delay_max; __u64 irq_delay_min;
};
#define F(name) printf(#name " %zu\\n", offsetof(struct taskstats, name));
int main(void) {
  F(ac_pid) F(ac_tgid) F(read_char) F(write_char) F(read_syscalls) F(write_syscalls)
  F(read_bytes) F(write_bytes)
  F(cpu_count) F(cpu_delay_total) F(blkio_count) F(blkio_delay_total) F(swapin_count)
  F(swapin_delay_total) F(freepages_count) F(freepages_delay_total) F(thrashing_count)
  F(thrashing_delay_total) F(compact_count) F(compact_delay_total) F(wpcopy_count)
  F(wpcopy_delay_total) F(irq_count) F(irq_delay_total)
  F(cpu_delay_max) F(blkio_delay_max) F(swapin_delay_max) F(freepages_delay_max)
  F(thrashing_delay_max) F(compact_delay_max) F(wpcopy_delay_max) F(irq_delay_max)
  return 0;
}
"""


def test_offsets_are_the_compilers_layout_of_struct_taskstats_v16(tmp_path: Path) -> None:
    """The struct as include/uapi/linux/taskstats.h declares it (version 16; v17 only appends
    timestamps after irq_delay_min), laid out by the C compiler."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler")
    (tmp_path / "layout.c").write_text(STRUCT)
    subprocess.run([compiler, "-o", str(tmp_path / "layout"), str(tmp_path / "layout.c")],
                   check=True)
    out = subprocess.run([str(tmp_path / "layout")], capture_output=True, text=True, check=True)
    offsets = {name: int(at) for name, at in (line.split() for line in out.stdout.splitlines())}
    assert offsets["ac_pid"] == _AC_PID and offsets["ac_tgid"] == _AC_TGID
    for name, at in IO_FIELDS.items():
        assert offsets[name] == at, name
    for index, kind in enumerate(DELAY_KINDS):
        assert offsets[f"{kind.name}_count"] == kind.count_at, kind
        assert offsets[f"{kind.name}_delay_total"] == kind.total_at, kind
        assert offsets[f"{kind.name}_delay_max"] == _MAX_AT + 16 * index, kind
