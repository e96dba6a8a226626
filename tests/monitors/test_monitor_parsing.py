# ruff: noqa: E501  (real trace_pipe lines are long)
"""Monitor parsers and the pure steps of analysis/where/ against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from stallbench.analysis.where import slowops
from stallbench.analysis.where.counters import counters_comparison
from stallbench.analysis.where.disk import diskstats_summary
from stallbench.analysis.where.histograms import log2_histogram
from stallbench.analysis.where.stacks import classify_stack
from stallbench.logformats.ftrace import parse_block_trace, parse_trace
from stallbench.monitors.diskstats import parse_diskstats
from stallbench.monitors.psi import parse_pressure
from stallbench.monitors.stacks import parse_proc_stack

pytestmark = pytest.mark.pure

TRACE = """\
          python-100    (    100) [001] d..2.   10.000100: sched_switch: prev_comm=python prev_pid=100 prev_prio=120 prev_state=D ==> next_comm=swapper/1 next_pid=0 next_prio=120
          python-100    (    100) [001] d..2.   10.000103: <stack trace>
 => trace_event_raw_event_sched_switch
 => __traceiter_sched_switch
 => __schedule
 => schedule
 => io_schedule
 => folio_wait_bit_common
 => filemap_read
 => vfs_read
          <idle>-0       (-------) [001] dNs4.   10.000600: sched_wakeup: comm=python pid=100 prio=120 target_cpu=001
          python-100    (    100) [001] .....   10.001000: mm_vmscan_memcg_reclaim_begin: order=0 gfp_flags=GFP_HIGHUSER_MOVABLE
          python-100    (    100) [001] .....   10.001250: mm_vmscan_memcg_reclaim_end: nr_reclaimed=32
          python-100    (    100) [001] .....   10.003000: mm_vmscan_throttled: nid=0 usec_timeout=100000 usect_delayed=700 reason=VMSCAN_THROTTLE_WRITEBACK
          python-101    (    100) [000] .....   10.004000: balance_dirty_pages: bdi 254:0: limit=1 setpoint=1 dirty=1 wb_setpoint=1 wb_dirty=1 dirty_ratelimit=1 task_ratelimit=1 dirtied=1 dirtied_pause=1 paused=0 pause=4 period=4 think=0 cgroup_ino=1
          python-101    (    100) [000] .....   10.005000: sys_enter: NR 75 (3, 0, 0, 0, 0, 0)
          python-101    (    100) [000] .....   10.005900: sys_exit: NR 75 = 0
"""


def test_parse_trace_intervals_by_hand() -> None:
    t0 = 10_000_000_000
    rows = {r["kind"]: r for r in parse_trace(TRACE, t0)}
    d = rows["D"]
    assert (d["t_ns"], d["duration_ns"], d["pid"]) == (100_000, 500_000, 100)
    assert d["stack"] == "vfs_read;filemap_read;folio_wait_bit_common;io_schedule"
    reclaim = rows["memcg reclaim"]
    assert (reclaim["t_ns"], reclaim["duration_ns"]) == (1_000_000, 250_000)
    throttle = rows["vmscan throttled (writeback)"]
    assert (throttle["t_ns"], throttle["duration_ns"]) == (3_000_000 - 700_000, 700_000)
    bdp = rows["balance_dirty_pages"]
    assert (bdp["t_ns"], bdp["duration_ns"], bdp["tid"], bdp["pid"]) == (
        4_000_000, 4_000_000, 101, 100)
    assert rows["syscall 75"]["duration_ns"] == 900_000


def test_parse_block_trace_pairs_issue_and_complete() -> None:
    text = (
        "  dd-7  [000] .....  5.000000: block_rq_issue: 254,0 R 4096 () 800 + 8 be,0,4 [dd]\n"
        "  <idle>-0 [001] d.h1.  5.000250: block_rq_complete: 254,0 R () 800 + 8 be,0,4 [0]\n")
    rows = parse_block_trace(text, 5_000_000_000, {(254 << 20): "vda"})
    assert len(rows) == 1 and rows[0]["duration_ns"] == 250_000 and rows[0]["device"] == "vda"


def test_parse_proc_stack_leaf_last() -> None:
    text = ("[<0>] folio_wait_bit_common+0x13c/0x350\n[<0>] filemap_read+0x1/0x2\n"
            "[<0>] vfs_read+0x9e/0x170\n")
    assert parse_proc_stack(text) == ["vfs_read", "filemap_read", "folio_wait_bit_common"]


def test_parse_pressure_and_diskstats() -> None:
    psi = parse_pressure("some avg10=1.50 avg60=0.00 avg300=0.00 total=1234\n"
                         "full avg10=0.00 avg60=0.00 avg300=0.00 total=99\n")
    assert psi == {"some": (1.5, 1_234_000), "full": (0.0, 99_000)}
    disk = parse_diskstats(" 254 0 vda 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17\n")
    assert disk["vda"][:3] == [1, 2, 3] and disk["vda"][-1] == 17


def test_log2_histogram_matches_numpy() -> None:
    rng = np.random.default_rng(4)
    values = rng.integers(0, 5_000_000, size=2000)
    rows = log2_histogram(values)
    assert sum(r["count"] for r in rows) == len(values)
    usec = values // 1000
    for r in rows:
        lo, hi = r["lo_ns"] // 1000, r["hi_ns"] // 1000
        assert r["count"] == int(((usec >= lo) & (usec < hi)).sum())


def test_slow_op_breakdown_by_hand() -> None:
    # one op of task 7 from 0 to 1000: reclaim 100-300, D (page lock) 200-600 -> only 300-600
    # counts as page lock; block in flight 550-800 -> device gets 600-800
    breakdown = slowops.slow_op_breakdown(
        np.array([0]), np.array([1000]), np.array([7]),
        {"memcg reclaim": {7: (np.array([100]), np.array([300]))},
         "waiting on page lock": {7: (np.array([200]), np.array([600]))}},
        device=(np.array([550]), np.array([800])))
    assert breakdown == {"memcg reclaim": 200, "waiting on page lock": 300, "device": 200,
                         "elsewhere (CPU, runnable, not traced)": 300}


def test_sampled_breakdown_scales_to_op_time() -> None:
    result = slowops.sampled_breakdown(np.array([0]), np.array([50]), np.array([1]),
                                  np.array([10, 20, 30, 99]), np.array([1, 1, 1, 1]),
                                  ["a", "a", "b", "a"], interval_ns=20)
    # 3 samples inside (60 ns of estimate) scaled to the op's 50 ns
    assert result == {"a": 33, "b": 16, "elsewhere (not sampled in D state)": 1}


def test_counters_comparison_sorted_and_unmoved_left_out() -> None:
    rows = counters_comparison([{"a": 10, "b": 5, "c": 0}], [{"a": 20, "b": 5, "c": 7}],
                                  10.0, 10.0, 100, 100)
    assert [r["counter"] for r in rows] == ["c", "a"]
    assert rows[1]["change"] == 1.0 and rows[1]["candidate_per_s"] == 2.0
    assert rows[1]["baseline_per_op"] == 0.1


def test_diskstats_summary_by_hand() -> None:
    zeros = np.zeros(2, np.int64)
    counters = {f: zeros for f in ("reads", "writes", "read_ms", "write_ms", "read_sectors",
                                   "write_sectors", "weighted_ms", "io_ms")}
    counters.update(reads=np.array([0, 200]), read_ms=np.array([0, 100]),
                    read_sectors=np.array([0, 1600]), io_ms=np.array([0, 1000]),
                    weighted_ms=np.array([0, 4000]))
    s = diskstats_summary(np.array([0, 2_000_000_000]), counters)
    assert s["read_iops"] == 100.0 and s["read_ns_per_request"] == 500_000
    assert s["read_bytes_per_s"] == 1600 * 512 / 2 and s["queue_depth"] == 2.0
    assert s["utilisation"] == 0.5


def test_explanation_line() -> None:
    line = slowops.explanation("read", 3.1, {"memcg reclaim": 62, "waiting on page lock": 30,
                                        "elsewhere (CPU, runnable, not traced)": 8})
    assert line == ("read p99 +310%: 62% of slow reads' time was in memcg reclaim, "
                    "30% waiting on page lock")
    assert slowops.explanation("read", 0.01, {"memcg reclaim": 1}) is None
    assert slowops.explanation("read", 2.0, {"elsewhere (CPU, runnable, not traced)": 1}) is None


def test_classify_stack() -> None:
    assert classify_stack("vfs_read;filemap_read;folio_wait_bit_common;io_schedule") == \
        "waiting on page lock"
    assert classify_stack("x;try_charge_memcg;try_to_free_mem_cgroup_pages;shrink_node") == \
        "memcg reclaim"
    assert classify_stack("__x64_sys_fdatasync;ext4_sync_file;jbd2_log_wait_commit") == \
        "fdatasync / journal commit"


def test_monitor_registry_names_match_the_classes() -> None:
    from stallbench.monitors import (
        default_monitor_names,
        monitor_class,
        monitor_names,
        parse_monitor_list,
    )

    assert monitor_names() == ["counters", "psi", "diskstats", "delay", "reclaim", "stacks",
                               "trace", "trace-full", "profile", "perfstat"]
    assert all(monitor_class(name).name == name for name in monitor_names())
    assert default_monitor_names() == ["counters", "psi", "diskstats", "delay", "reclaim"]
    assert parse_monitor_list("all") == ["counters", "psi", "diskstats", "delay", "reclaim",
                                         "stacks", "trace", "profile", "perfstat"]


PERF_SCRIPT = """\
dd  6061/6061    295.450986123:\x20
\tffffffff81bb61a2 chacha_permute
\tffffffff81bb636e chacha_block_generic
\tffffffff81d76616 get_random_bytes_user
\tffffffff81000130 entry_SYSCALL_64_after_hwframe
\t           f82ad read

python3  7779/7782    404.027359851:\x20
\t          199bdd _PyDict_LoadGlobal
\t    7fa618d329c0 [unknown]
\t    7fa619456240 [unknown]

kworker/u4:1 x  12/13    404.5:
my comm  20/21    405.000000001:
\t               0 [unknown]
"""


def test_perf_script_samples_outermost_first_by_hand() -> None:
    from stallbench.monitors.profile import parse_script

    rows = list(parse_script(PERF_SCRIPT.splitlines(keepends=True), 295_000_000_000))
    assert rows == [
        (450_986_123, 6061, 6061, "dd", "read;entry_SYSCALL_64_after_hwframe;"
         "get_random_bytes_user;chacha_block_generic;chacha_permute"),
        # the unnamed frames perf found beyond the interpreter's leaf are one [unknown]
        (109_027_359_851, 7779, 7782, "python3", "[unknown];_PyDict_LoadGlobal"),
        (110_000_000_001, 20, 21, "my comm", "[unknown]")]


def test_perf_stat_per_thread_lines_by_hand() -> None:
    from stallbench.monitors.perfstat import parse_stat

    lines = ["# started on Mon Dec  7 17:28:01 2026", "",
             "python-5322,367.29,msec,task-clock,367287856,100.00,0.296,CPUs utilized",
             "python-5322,307,,context-switches,367287856,100.00,835.857,/sec",
             "my-worker-77,<not supported>,,cycles,0,100.00,,",
             "my-worker-77,1200,,instructions:u,5000,50.00,,"]
    assert parse_stat(lines, {5322: 5300}) == [
        (5300, 5322, "python", "task-clock", 367_290_000, 1.0),
        (5300, 5322, "python", "context-switches", 307, 1.0),
        (77, 77, "my-worker", "cycles", None, None),
        (77, 77, "my-worker", "instructions", 1200, 0.5)]
