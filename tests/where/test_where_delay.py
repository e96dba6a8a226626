"""Delay accounting: impossible steps are dropped, and the explanation built from it alone."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from stallbench.analysis.montables import task_delays
from stallbench.analysis.where.delays import delays_in_ops, op_time_before, sleep_time_before
from stallbench.analysis.where.explanations import explanations
from stallbench.analysis.where.growth import NEW_OP, TailChange, growth
from stallbench.analysis.where.section import DelayShare, Facts, RoleDelays

pytestmark = pytest.mark.quiet

S = 1_000_000_000


def test_a_step_larger_than_the_wall_time_between_samples_is_dropped():
    # task 7 was born in the run; its first sample claims 6035 s of blkio after 1 s (a wait that
    # was in flight when delay accounting was switched on, reported from a zero start)
    tid = np.array([7, 8, 7, 8, 7, 8])
    t_ns = np.array([1, 1, 2, 2, 3, 3]) * S
    born = np.array([True, False, True, False, True, False])
    blkio = np.array([6035 * S, 50 * S, 6035 * S + S // 2, 50 * S + S // 4,
                      6035 * S + S, 50 * S + S // 2], dtype=float)
    result = task_delays(tid, born, {"blkio": blkio}, t_ns)
    assert result[7]["blkio"] == S          # the two plausible half-second steps
    assert result[8]["blkio"] == S // 2     # a task from before the run: last minus first
    # without times the old rule (last minus base) would count the bogus start
    assert task_delays(tid, born, {"blkio": blkio})[7]["blkio"] == 6036 * S


def test_a_task_whose_waits_outrun_time_is_left_out_of_the_run_totals():
    # task 7 accrues 30 s of block I/O per 1 s sample (CI's fresh VM), task 8 a real 0.25 s
    tid = np.array([7, 8, 7, 8, 7, 8])
    t_ns = np.array([1, 1, 2, 2, 3, 3]) * S
    born = np.array([True, False, True, False, True, False])
    blkio = np.array([30 * S, 50 * S, 60 * S, 50 * S + S // 4, 90 * S, 50 * S + S // 2],
                     dtype=float)
    impossible: dict[str, float] = {}
    result = task_delays(tid, born, {"blkio": blkio}, t_ns, impossible)
    assert "blkio" not in result[7] and result[8]["blkio"] == S // 2
    assert impossible == {"blkio": 30.0}


def test_delays_outside_the_ops_are_not_attributed_to_them():
    # a paced writer: 0.1 s of ops per 1 s step, 0.5 s of run-queue wait per step (after each
    # wake-up from its pacing sleep): at most 0.1 s of it can be inside the ops, none must be
    t_ns = np.array([1, 2, 3]) * S
    busy = np.array([0.1, 0.2, 0.3]) * S
    inside, op_time, accrued, *_ = delays_in_ops(t_ns, busy, True, {"cpu": busy * 5}, 0)
    assert inside == {"cpu": 0} and op_time == 0.3 * S and accrued == {"cpu": 1.5 * S}
    # a reader busy 99% of each step with 0.9 s of block I/O per step: 0.89 s is in its ops
    busy = np.array([0.99, 1.98, 2.97]) * S
    inside, op_time, *_ = delays_in_ops(t_ns, busy, True, {"blkio": busy / 1.1}, 0)
    assert abs(inside["blkio"] - 3 * 0.89 * S) < 1e3 and inside["blkio"] <= op_time


def test_waits_accounted_faster_than_time_passes_are_a_kernel_fault_not_a_share():
    # a reader blocked 90% of each 1 s step; the kernel adds 30 s of block I/O per step (as
    # CI's fresh 6.18 VM did) -> impossible at the rate the steps say, left out of the shares
    t_ns = np.array([1, 2, 3, 4]) * S
    busy = np.array([0.99, 1.98, 2.97, 3.96]) * S
    result = delays_in_ops(t_ns, busy, True, {"blkio": t_ns * 30.0, "cpu": busy / 10}, 0)
    assert result.impossible == {"blkio": 30.0}
    assert "blkio" not in result.inside and result.inside["cpu"] > 0
    # one wait in flight when accounting was switched on (the whole uptime, one step) is not
    # a rate: that step is dropped and the rest are shares
    blkio = np.array([6035.9, 6036.8, 6037.7, 6038.6]) * S
    result = delays_in_ops(t_ns, busy, True, {"blkio": blkio}, 0)
    assert result.impossible == {}
    assert abs(result.inside["blkio"] - 3 * 0.89 * S) < 1e3


def test_a_paced_worker_s_sleeps_are_read_from_its_planned_starts():
    # a write planned at 0 (0-10), the next planned at 100 but started at 105 (woken late),
    # then an fsync with no planned start right after it (115-135): asleep from 10 to 100 only
    start, latency = np.array([0, 105, 115]), np.array([10, 10, 20])
    intended = np.array([0, 100, -1])
    assert sleep_time_before(start, latency, intended, np.array([5, 50, 100, 200])).tolist() \
        == [0, 40, 90, 90]
    # the worker's previous op (an earlier batch) ended at -30: it slept from there until 0
    assert sleep_time_before(start, latency, intended, np.array([200]), -30).tolist() == [120]
    # an Arrow column with nulls comes as floats with NaN: none planned, as -1 (was a
    # RuntimeWarning and an undefined cast)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        floats = sleep_time_before(start, latency, np.array([0.0, 100.0, np.nan]),
                                   np.array([5, 50, 100, 200]))
    assert floats.tolist() == [0, 40, 90, 90]


def test_waits_in_a_paced_worker_s_ops_are_its_ops_once_its_sleeps_are_known():
    # per 1 s step: 0.1 s in ops, 0.85 s asleep until the next planned start, 0.1 s of block I/O
    # (its fsyncs): at most 0.05 s can be outside both, so at least 0.05 s is in the ops
    t_ns = np.array([1, 2, 3]) * S
    busy, asleep = np.array([0.1, 0.2, 0.3]) * S, np.array([0.85, 1.7, 2.55]) * S
    blkio = np.array([0.1, 0.2, 0.3]) * S
    inside, *_ = delays_in_ops(t_ns, busy, True, {"blkio": blkio}, 0, asleep)
    assert abs(inside["blkio"] - 3 * 0.05 * S) < 1e3
    # without the sleeps nothing must have been inside the ops
    assert delays_in_ops(t_ns, busy, True, {"blkio": blkio}, 0)[0] == {"blkio": 0}


def test_op_time_before_edges_counts_the_op_in_progress():
    start, latency = np.array([0, 10, 20]), np.array([5, 5, 5])
    assert op_time_before(start, latency, np.array([0, 3, 5, 12, 100])).tolist() == \
        [0, 3, 5, 7, 15]


def _explained(op: str, tail: TailChange, role: str, shares: dict[str, float],
               facts: Facts | None = None) -> list[str]:
    """The where lines of one op from its role's delay shares alone (of 1 s of op time)."""
    delays = RoleDelays(role, S, {kind: DelayShare(int(share * S), share, int(share * S))
                                  for kind, share in shares.items()}, ops=1000)
    return [e.text for e in explanations("cand", {op: tail}, {}, [delays], {op: [role]}, {}, {},
                                         facts)]


def test_delay_accounting_says_how_much_of_the_op_time_and_why():
    shares = {"cpu": 0.12, "blkio": 0.86, "freepages": 0.03}
    throttled = Facts(io_limits={"riops": "200"})
    (line,) = _explained("read", TailChange("p99", 1.5), "reader", shares, throttled)
    assert line == ("read p99 +150%: delay accounting: at least 86% of the reader workers' op "
                    "time was in block I/O waits (the variant's I/O throttle riops=200), 12% "
                    "waiting for a CPU (the run's own processes competing for the CPUs)")
    assert _explained("read", TailChange("p99", 0.05), "reader", shares) == []  # barely grew
    assert _explained("read", TailChange("p99", 1.5), "reader", {"cpu": 0.05}) == []


def test_an_op_the_baseline_never_ran_is_explained_as_new():
    # pgioperf's checkpoint-fsync under frequent fsyncs: no baseline p99 or mean to grow from
    stat, change = growth(None, None, new=True)
    assert stat == NEW_OP
    (line,) = _explained("checkpoint-fsync", TailChange(stat, change), "checkpointer",
                         {"blkio": 0.36})
    assert line.startswith("checkpoint-fsync (new: not in the baseline): delay accounting: at "
                           "least 36% of the checkpointer workers' op time was in block I/O "
                           "waits"), line
    assert growth(None, None) == ("p99", None)       # not new: nothing to explain


def test_the_mechanism_comes_from_what_the_variant_set():
    from stallbench.analysis.where.mechanism import contention, limit_warning, mechanism
    from stallbench.analysis.where.section import Facts

    throttled = Facts(io_limits={"riops": "200"})
    assert mechanism("blkio", "read", "read", throttled) == "the variant's I/O throttle riops=200"
    assert "riops" not in (mechanism("blkio", "wal", "write", throttled) or "")
    dirty = Facts(sysctls={"vm.dirty_bytes": "1048576"})
    assert "dirty throttling" in mechanism("blkio", "wal", "write", dirty)
    assert "--monitors stacks" in mechanism("blkio", "wal", "write", dirty)
    assert "--monitors stacks" not in mechanism("blkio", "wal", "write",
                                                Facts(**{**dirty.__dict__, "monitors": ["stacks"]}))
    bound = Facts(memory_limit=32 << 20, memory_hits=5)
    assert "memcg reclaim evicted" in mechanism("blkio", "read", "read", bound)
    assert mechanism("freepages", "read", "read", bound).startswith("memcg reclaim")
    # others' load: grew by 0.4 CPU; not when it stayed or grew a little
    base = Facts(others_cpus=1.2, own_cpus=0.6)
    assert contention(Facts(others_cpus=1.6, own_cpus=0.6), base)
    assert not contention(Facts(others_cpus=1.4, own_cpus=0.3), base)
    assert not contention(Facts(others_cpus=1.2, own_cpus=0.6), base)
    assert "CPU contention" not in mechanism("cpu", "read", "read",
                                             Facts(others_cpus=1.6, own_cpus=0.6), base,
                                             blocking=True)
    never = Facts(memory_limit=48 << 20, memory_hits=0, memory_peak=3 << 20,
                  data_bytes=128 << 20)
    assert "never bound" in limit_warning("v", never) and "page cache" in limit_warning("v", never)
    assert limit_warning("v", bound) is None


def test_a_new_op_gets_a_line_where_delay_accounting_names_no_wait():
    # a checkpointer whose fsyncs sleep in the journal's commit wait: 2% block I/O, 1% run-queue
    role = RoleDelays("checkpointer", 10 * S, {"blkio": DelayShare(S // 5, 0.02, S // 5),
                                               "cpu": DelayShare(S // 10, 0.01, S // 10)},
                      io={"write_char": 1 << 20}, ops=100)
    new = {"checkpoint-fsync": (NEW_OP, math.inf)}
    lines = [e.text for e in explanations("b", new, {}, [role], {"checkpoint-fsync":
                                                                  ["checkpointer"]}, {}, {})]
    assert lines == ["checkpoint-fsync (new: not in the baseline): delay accounting names no "
                     "wait over 10% of the checkpointer workers' op time (block I/O waits 2%, "
                     "run-queue waits 1%): the rest was on a CPU or asleep outside block I/O "
                     "(as an fsync does while it waits for the journal's commit, which the "
                     "journal thread writes); --monitors stacks would name the wait"]
    # an op that was in the baseline too and whose waits are as small gets no line
    grown = {"checkpoint": ("p99", 0.5)}
    assert explanations("b", grown, {}, [role], {"checkpoint": ["checkpointer"]}, {}, {}) == []


def test_block_io_waits_beyond_the_time_off_a_cpu_are_cut_to_it():
    # a reader in its ops 99% of each 1 s step, on a CPU half of each step; the kernel accounts
    # 0.98 s of block I/O per step (as waits timed from an earlier wait's start would): at most
    # the 0.5 s per step it was off a CPU can have been a wait for the device
    t_ns = np.array([1, 2, 3]) * S
    busy = np.array([0.99, 1.98, 2.97]) * S
    blkio = np.array([0.98, 1.96, 2.94]) * S
    half = np.array([0.5, 1.0, 1.5]) * S
    result = delays_in_ops(t_ns, busy, True, {"blkio": blkio}, 0, None, half)
    assert result.beyond_off_cpu == {"blkio": (int(3 * 0.97 * S), int(1.5 * S))}
    assert abs(result.inside["blkio"] - 1.5 * S) < 1e3
    # on a CPU 1% of each step: 0.97 s per step fits in the 0.99 s off a CPU, nothing is cut
    result = delays_in_ops(t_ns, busy, True, {"blkio": blkio}, 0, None, half / 50)
    assert result.beyond_off_cpu == {} and abs(result.inside["blkio"] - 3 * 0.97 * S) < 1e3
    # run.json's totals take the same rule: 3 s lived, 1.5 s on a CPU, 2.94 s accounted
    cut: dict[str, int] = {}
    totals = task_delays(np.array([7, 7, 7]), np.ones(3, bool), {"blkio": blkio}, t_ns,
                         None, half, cut)
    assert totals == {7: {"blkio": int(1.5 * S)}} and cut == {"blkio": int(1.44 * S)}
    # a run recorded before oncpu_ns (NaN): nothing to bound with
    assert task_delays(np.array([7, 7, 7]), np.ones(3, bool), {"blkio": blkio}, t_ns, None,
                       np.full(3, np.nan), cut)[7]["blkio"] == int(2.94 * S)


def test_the_where_section_says_when_block_io_was_cut_to_the_time_off_a_cpu():
    from stallbench.analysis.where.delays import RunDelays, role_delays
    from stallbench.analysis.where.explanations import off_cpu_warnings
    # one checkpointer task (pid 5): 3 s, in ops 99%, on a CPU half the time, 0.98 s of
    # block I/O accounted per second: 2.91 s inside its ops against 1.5 s off a CPU
    t_ns = np.array([1, 2, 3]) * S
    columns = {"tid": np.array([5, 5, 5]), "pid": np.array([5, 5, 5]), "t_ns": t_ns,
               "born_in_run": np.ones(3, bool), "blkio_ns": np.array([0.98, 1.96, 2.94]) * S,
               "oncpu_ns": np.array([0.5, 1.0, 1.5]) * S}
    rows = role_delays([RunDelays(columns, {5: "checkpointer"},
                                  np.array([0.99, 1.98, 2.97]) * S, 0)])
    assert rows[0].beyond_off_cpu == {"blkio": [int(2.91 * S), int(1.5 * S)]}
    assert abs(rows[0].delays["blkio"].share - 1.5 / 2.97) < 1e-6
    assert off_cpu_warnings("b", rows) == [
        "b: taskstats accounted 2.91 s of blkio delay inside the checkpointer workers' ops, more "
        "than the 1.50 s they were off a CPU and not in a pacing sleep (a task waiting for the "
        "device is asleep): a kernel accounting fault; their blkio share is cut to that time"]


def test_the_lines_of_an_undecided_change_say_if_real():
    # a checkpointer whose op time was 60% block I/O waits: its line is the same whether the
    # comparison decided the p99's change or not, only the undecided one says "if real"
    role = RoleDelays("checkpointer", 10 * S, {"blkio": DelayShare(6 * S, 0.6, 6 * S)},
                      io={"write_char": 1 << 20}, ops=100)
    roles = {"checkpoint": ["checkpointer"]}
    decided = explanations("b", {"checkpoint": TailChange("p99", 1.03, True)}, {}, [role],
                           roles, {}, {})
    undecided = explanations("b", {"checkpoint": TailChange("p99", 1.03, False)}, {}, [role],
                             roles, {}, {})
    assert len(decided) == len(undecided) == 1
    head = "checkpoint p99 +103%: "
    assert decided[0].text.startswith(head)
    assert undecided[0].text == ("checkpoint p99 +103% (not decided): if real, "
                                 + decided[0].text[len(head):])
    # a plain (stat, change) pair, as older callers pass, counts as decided
    assert explanations("b", {"checkpoint": ("p99", 1.03)}, {}, [role], roles, {}, {}) == decided
