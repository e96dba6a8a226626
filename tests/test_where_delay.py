"""Delay accounting: impossible steps are dropped, and the explanation built from it alone."""

from __future__ import annotations

import numpy as np

from stallbench.analysis.monitors import delay_explanation
from stallbench.analysis.montables import task_delays

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


def test_delay_explanation_names_the_largest_shares_below_the_cap():
    delays = {"cpu": {"total_ns": 17, "share": 0.22}, "blkio": {"total_ns": 25, "share": 0.32},
              "freepages": {"total_ns": 2, "share": 0.03},
              "swapin": {"total_ns": 99, "share": 1.0}}     # capped: accrued outside the ops
    line = delay_explanation("read", 1.5, "reader", delays)
    assert line == ("read p99 +150%: delay accounting puts 32% in block I/O waits and 22% "
                    "waiting for a CPU of the reader workers' op time")
    assert delay_explanation("read", 0.05, "reader", delays) is None      # the tail barely grew
    assert delay_explanation("read", 1.5, "reader", {"cpu": {"share": 0.05}}) is None
