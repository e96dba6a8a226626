"""analysis/where/oncpu.py on delay rows made by hand: each number below is computed by hand
from the rows, not by the module's own formulas; and the lead statistic of a where line
(analysis/where/growth.py)."""

from __future__ import annotations

import numpy as np
import pytest

from stallbench.analysis.where.delays import RunDelays
from stallbench.analysis.where.growth import growth
from stallbench.analysis.where.oncpu import cpu_answer, cpu_changes, cpu_steps, role_cpu
from stallbench.analysis.where.section import RoleCpu

pytestmark = pytest.mark.pure

S = 1_000_000_000


def _run(oncpu: list[float], busy: list[float], done: list[float], stime: list[float],
         utime: list[float], data_start: int | None = None) -> RunDelays:
    """One worker (pid 7, a reader) born in the run, sampled at 1, 2, 3 and 4 s."""
    n = len(oncpu)
    columns = {"t_ns": np.arange(1, n + 1) * S, "pid": np.full(n, 7), "tid": np.full(n, 7),
               "born_in_run": np.ones(n, bool), "oncpu_ns": np.array(oncpu),
               "stime_ns": np.array(stime), "utime_ns": np.array(utime),
               "io_read_char": np.array(done) * 4096, "io_write_char": np.zeros(n)}
    return RunDelays(columns, {7: "reader"}, np.array(busy, float), 0, None,
                     np.array(done, float), data_start)


def test_steps_after_the_warm_up_give_the_cpu_per_op_and_the_share_in_the_ops() -> None:
    # steps of 1 s: on a CPU 0.5, 0.8, 0.8, 0.8 s; in ops 0.6, 0.9, 0.9, 0.9 s (so outside
    # them 0.4, 0.1, 0.1, 0.1 s); 100, 1000, 1000, 1000 ops; ticks: 3/4 of the time in the kernel
    run = _run(oncpu=[0.5 * S, 1.3 * S, 2.1 * S, 2.9 * S],
               busy=[0.6 * S, 1.5 * S, 2.4 * S, 3.3 * S], done=[100, 1100, 2100, 3100],
               stime=[0.3 * S, 0.9 * S, 1.5 * S, 2.1 * S],
               utime=[0.1 * S, 0.3 * S, 0.5 * S, 0.7 * S], data_start=int(1.2 * S))
    [role] = role_cpu(cpu_steps([run]))
    # the first step (0-1 s, its middle before 1.2 s) is the warm-up's: the other three count
    assert role.ops == 3000
    assert role.oncpu_ns == pytest.approx(2.4 * S)
    assert role.op_time_ns == pytest.approx(2.7 * S)
    # surely in the ops: each step's 0.8 s on a CPU less its 0.1 s outside the ops
    assert role.in_ops_ns == pytest.approx(3 * 0.7 * S)
    assert role.system_ns == pytest.approx(0.75 * 2.4 * S)
    assert role.user_ns == pytest.approx(0.25 * 2.4 * S)
    assert role.bytes_moved == 3000 * 4096


def test_the_added_time_on_a_cpu_leads_in_the_kernel_or_is_said_to_be_waited() -> None:
    base = RoleCpu("reader", 1000, 10_000_000, 9_000_000, 8_000_000, 1_000_000, 8_000_000, None)
    # +10 µs per op of op time, of which +9.5 µs surely on a CPU in the ops, +9 µs in the kernel
    here = RoleCpu("reader", 1000, 20_000_000, 18_500_000, 17_500_000, 1_000_000, 17_000_000,
                   None)
    answer = cpu_answer(here, base, [], 10_000.0)
    assert answer is not None and answer.leads
    assert answer.share == pytest.approx(0.95)
    assert answer.text == ("95% of the added op time was on a CPU, in the kernel (system time "
                           "+9 µs per op)")
    # the same CPU time with 1 ms added per op: the added time was waited
    waited = cpu_answer(base, base, [], 1_000_000.0)
    assert waited is not None and not waited.leads
    assert waited.text == "the added time was spent waiting"
    assert cpu_answer(here, base, [], -5.0) is None      # the op time did not grow


def test_two_runs_a_side_give_an_interval_that_holds_the_change() -> None:
    def runs(per_op: float, wobble: float) -> list[RunDelays]:
        return [_run(oncpu=[k * per_op * (1 + w) * 1000 for k in (1, 2, 3, 4)],
                     busy=[k * 0.9 * S for k in (1, 2, 3, 4)], done=[1000, 2000, 3000, 4000],
                     stime=[k * 0.5 * S for k in (1, 2, 3, 4)],
                     utime=[k * 0.1 * S for k in (1, 2, 3, 4)])
                for w in (-wobble, wobble)]
    base, here = cpu_steps(runs(400_000, 0.02)), cpu_steps(runs(600_000, 0.02))
    changes = {c.stat: c for c in cpu_changes(base, here)["reader"]}
    change = changes["oncpu_per_op"]
    assert change.change == pytest.approx(0.5)
    assert change.low is not None and change.high is not None
    assert change.low < 0.5 < change.high
    # runs ±2% apart around +50%: the interval is far from 0 and not wider than ±20%
    assert change.low > 0.3 and change.high < 0.7


@pytest.mark.parametrize("called, expected", [
    ({"p50": 0.69}, ("p50", 0.69)),
    ({"p50": 0.69, "p99": 1.04}, ("p99", 1.04)),
    ({"p50": 0.30, "p90": 0.45}, ("p90", 0.45)),
    ({}, ("p99", 1.04)),
])
def test_the_line_leads_with_the_statistic_called(called: dict, expected: tuple) -> None:
    assert growth(1.04, 0.5, False, called) == expected


def test_where_only_the_rate_was_called_the_line_leads_with_the_added_op_time():
    # fewer ops, each longer: the mean's growth is the op time the causes are shares of
    assert growth(0.49, 0.59, False, {}, rate_called=True) == ("mean", 0.59)
    assert growth(0.49, 0.05, False, {}, rate_called=True) == ("p99", 0.49)
