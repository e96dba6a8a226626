"""The one-line explanations of the where section ("read p99 +310%: ..."), from the typed
subsections section.py holds: delay accounting attributed to the ops (with the mechanism
by name, analysis/where/mechanism.py) and the slow ops' breakdown; and the section's warnings when
the kernel's delay accounting cannot be true. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from .. import monitornames
from ..display import format_ns
from . import causes, longest, slowops
from .delays import DELAY_WORDS
from .growth import MIN_GROWTH, MIN_SHARE, NEW_OP, TailChange, headline, mark_undecided
from .hotspots import naming_hint
from .mechanism import mechanism, op_direction, throttle_words
from .oncpu import ON_CPU_LEADS, CpuAnswer, cpu_answer
from .section import (
    CpuChange,
    DeviceVerdict,
    Explanation,
    Facts,
    LongestDelay,
    OpStall,
    Pressure,
    RoleCpu,
    RoleDelays,
    SlowOps,
    Stacks,
)
from .stacks import change_line, grown_sleep
from .tracedstalls import stall_words


def explanations(label: str,
                 tail_changes: Mapping[str, TailChange | tuple[str, float | None]],
                 slow: Mapping[str, SlowOps], delays: Sequence[RoleDelays],
                 roles_of_op: Mapping[str, Sequence[str]],
                 longest_here: Mapping[str, LongestDelay],
                 longest_base: Mapping[str, LongestDelay],
                 facts: Facts | None = None,
                 device: Mapping[str, DeviceVerdict] | None = None,
                 base_delays: Sequence[RoleDelays] = (),
                 base_facts: Facts | None = None,
                 stalls: Mapping[str, Mapping[str, OpStall]] | None = None,
                 base_stalls: Mapping[str, Mapping[str, OpStall]] | None = None,
                 base_device: Mapping[str, DeviceVerdict] | None = None,
                 op_totals: Mapping[str, tuple[int, int]] | None = None,
                 base_op_totals: Mapping[str, tuple[int, int]] | None = None,
                 cpu: Sequence[RoleCpu] = (), base_cpu: Sequence[RoleCpu] = (),
                 cpu_changes: Mapping[str, Sequence[CpuChange]] | None = None
                 ) -> list[Explanation]:
    """The one-line explanations of a candidate, per op whose tail grew: first whether its added
    time was on a CPU (analysis/where/oncpu.py: where the op is its role's only one and the
    delay monitor saw both sides), and where it was not, the causes of its
    time (analysis/where/causes.py: the stalls the tracepoints timed in its ops and the delay
    accounting of the one role that runs it, block I/O split by the device's side), those that
    grew against the baseline first, with the mechanism where the variant's settings and
    counters name it; then its slow ops' breakdown (trace or stack samples: which wait, by
    name); then the longest single delays that grew. `op_totals[op]` / `base_op_totals[op]`:
    the op's (samples, latency sum) in the candidate and the baseline. The lines of an op whose
    change the comparison did not decide say so ("(not decided): if real, …")."""
    out = []
    facts = facts or Facts()
    rows = {row.role: row for row in delays}
    base_rows = {row.role: row for row in base_delays}
    for op, tail in sorted(tail_changes.items()):
        stat, change, decided = TailChange(*tail)
        first = len(out)
        roles = roles_of_op.get(op, [])
        role = rows.get(roles[0]) if len(roles) == 1 else None
        direction = op_direction(op, role.io if role else {})
        here = _side(op, role, (stalls or {}).get(op, {}), (device or {}).get(op),
                     op_totals or {}, roles_of_op)
        base = _side(op, base_rows.get(role.role) if role else None,
                     (base_stalls or {}).get(op, {}), (base_device or {}).get(op),
                     base_op_totals or {}, roles_of_op) if base_delays or base_stalls \
            else None
        grown, steady = causes.ranked(causes.op_causes(here, base), MIN_SHARE)
        shared = role is not None and sum(role.role in r for r in roles_of_op.values()) > 1
        on_cpu = None if role is None or shared else _cpu_answer(
            op, role.role, cpu, base_cpu, (cpu_changes or {}).get(role.role, ()),
            op_totals or {}, base_op_totals or {})
        line = _cause_line(op, stat, change, role, grown, steady, direction, facts, base_facts,
                           (device or {}).get(op), (stalls or {}).get(op, {}),
                           (base_stalls or {}).get(op, {}), shared, on_cpu)
        if role is not None and role.impossible and device and op in device \
                and device[op].verdict and change is not None and change > MIN_GROWTH \
                and (not line or "blkio" in role.impossible):
            # the blocking waits cannot be seen: the device's counters name the cause first
            out.append(Explanation(label, op, (
                f"{headline(op, stat, change)}: {device[op].verdict} (from the device's "
                f"counters: the {', '.join(sorted(role.impossible))} delay accounting "
                "was impossible here)")))
        elif line:
            out.append(Explanation(label, op, line))
        elif role is not None and stat == NEW_OP and not role.impossible:
            out.append(Explanation(label, op, _unnamed_new_op(op, role, direction,
                                                              traced=op in slow)))
        if op in slow:
            line = slowops.explanation(op, change, slow[op].breakdown_ns, slow[op].source,
                                  stat=stat)
            if line:
                throttle = throttle_words(facts, "read" if direction == "read" else "write")
                if throttle and _device_bound(slow[op]):
                    line += f"; {throttle}"
                out.append(Explanation(label, op, line))
        if not decided:
            out[first:] = [Explanation(e.variant, e.op,
                                       mark_undecided(e.text, op, stat, change))
                           for e in out[first:]]
    for kind, entry in longest_here.items():
        base_entry = longest_base.get(kind)
        line = longest.explanation(label, kind, entry.max_ns,
                                    base_entry.max_ns if base_entry else None)
        if line:
            out.append(Explanation(label, None, line))
    return out


def _cpu_answer(op: str, role: str, cpu: Sequence[RoleCpu], base_cpu: Sequence[RoleCpu],
                changes: Sequence[CpuChange], totals: Mapping[str, tuple[int, int]],
                base_totals: Mapping[str, tuple[int, int]]) -> CpuAnswer | None:
    """Whether the op's added time (its mean's growth per op) was on a CPU, from its role's CPU
    side in both variants; None where either side lacks it."""
    here = next((r for r in cpu if r.role == role), None)
    base = next((r for r in base_cpu if r.role == role), None)
    (n, total), (base_n, base_total) = totals.get(op, (0, 0)), base_totals.get(op, (0, 0))
    if here is None or base is None or not n or not base_n:
        return None
    return cpu_answer(here, base, changes, total / n - base_total / base_n)


def _side(op: str, role: RoleDelays | None, stalls: Mapping[str, OpStall],
          device: DeviceVerdict | None, totals: Mapping[str, tuple[int, int]],
          roles_of_op: Mapping[str, Sequence[str]]) -> causes.OpSide:
    """What causes.op_causes needs of one variant's op. Where its role runs other ops too (the
    WAL writer's writes and its commits), the role's delays are the op's only as far as its own
    time bounds them (op_share)."""
    samples, total = totals.get(op, (0, 0))
    shares = in_ops = None
    role_ops = 0
    if role is not None:
        mine = [other for other, runners in roles_of_op.items() if role.role in runners]
        role_time = sum(totals.get(other, (0, 0))[1] for other in mine)
        fraction = total / role_time if role_time else 1.0
        shares, in_ops, role_ops = {}, {}, role.ops
        for kind, delay in role.delays.items():
            if delay.share is None:
                continue
            shares[kind] = op_share(delay.share, fraction)
            in_ops[kind] = delay.in_ops_ns if fraction >= 1.0 else \
                int(shares[kind] * total)
        if fraction < 1.0:
            role_ops = samples
    return causes.OpSide(
        samples, role_ops, in_ops, shares,
        {k: (st.share or 0.0, st.ns_per_op or 0.0) for k, st in stalls.items()},
        device.not_device if device else None,
        tuple(device.not_device_in) if device else ())


def op_share(role_share: float, fraction: float) -> float:
    """The least share of one op's time a role's delay can have had, where the op is `fraction`
    of the role's op time: the rest of the role's ops can hold at most their own time of it."""
    if fraction >= 1.0:
        return role_share
    if fraction <= 0.0:
        return 0.0
    return max(0.0, role_share - (1.0 - fraction)) / fraction


def _cause_line(op: str, stat: str, change: float | None, role: RoleDelays | None,
                grown: list[causes.Cause], steady: list[causes.Cause], direction: str,
                facts: Facts, base_facts: Facts | None, device: DeviceVerdict | None,
                stalls: Mapping[str, OpStall], base_stalls: Mapping[str, OpStall],
                shared: bool = False, on_cpu: CpuAnswer | None = None) -> str | None:
    """'read p99 +174%: the added time was spent waiting (time on a CPU per op +1%); 25% of the
    read ops' time was in memcg reclaim (...), ...; also in the baseline: ...' from the ranked
    causes, or None when none grew; where the added time was on a CPU (`on_cpu`), that leads,
    and of the waits only those that grew and block follow ("the rest: ..."), when at least
    REST_WORTH of the added time was not on a CPU."""
    if change is None or change <= MIN_GROWTH:
        return None
    if on_cpu is not None and on_cpu.leads:
        rest = [c for c in grown if c.blocks] if 1.0 - on_cpu.share >= REST_WORTH else []
        hint = naming_hint(facts.monitors, base_facts.monitors if base_facts else [])
        text = f"{headline(op, stat, change)}: {on_cpu.text}" + (f"; {hint}" if hint else "")
        if rest:
            text += "; the rest: " + _joined(_cause_parts(
                op, role, rest, direction, facts, base_facts, device, stalls, base_stalls,
                shared))
        return text
    if not grown:
        return None
    text = f"{headline(op, stat, change)}: " + (f"{on_cpu.text}; " if on_cpu else "") + \
        _joined(_cause_parts(op, role, grown, direction, facts, base_facts, device, stalls,
                             base_stalls, shared))
    if steady:
        text += "; also in the baseline: " + ", ".join(
            f"{_steady_words(c)} {c.share:.0%}"
            + (f" ({c.base_share:.0%} there)" if c.base_share is not None else "")
            for c in steady[:MAX_CAUSES])
    return text


REST_WORTH = 1.0 - ON_CPU_LEADS     # the added time off a CPU worth naming after the CPU's


def _cause_parts(op: str, role: RoleDelays | None, grown: list[causes.Cause], direction: str,
                 facts: Facts, base_facts: Facts | None, device: DeviceVerdict | None,
                 stalls: Mapping[str, OpStall], base_stalls: Mapping[str, OpStall],
                 shared: bool) -> list[str]:
    """The words of the first MAX_CAUSES causes that grew."""
    blocking = any(c.blocks for c in grown)
    parts: list[str] = []
    said_delay = False
    for cause in grown[:MAX_CAUSES]:
        if cause.traced:
            parts.append(_stall_words(op, cause, stalls[cause.kind], base_stalls.get(cause.kind),
                                      device, first=not parts))
            continue
        words = _delay_words(cause.kind, op, direction, facts, base_facts, blocking)
        if not said_delay:
            whose = (f"the {op} ops' time (of the {role.role} workers' delays, as far as "
                     "this op's own time bounds them)" if shared and role is not None else
                     f"the {role.role if role else op} workers' op time")
            parts.append(f"delay accounting: at least {cause.share:.0%} of {whose} was {words}")
            said_delay = True
        else:
            parts.append(f"{cause.share:.0%} {words}")
    return parts


MAX_CAUSES = 2


def _joined(parts: list[str]) -> str:
    """Causes joined by commas, but by a semicolon after a traced stall's own clause (which has
    commas of its own)."""
    text = ""
    for part in parts:
        if text:
            text += "; " if text.endswith(";") or " stalls of " in text.rsplit(";", 1)[-1] \
                else ", "
            text = text.replace(";; ", "; ")
        text += part
    return text.removesuffix(";")


def _delay_words(kind: str, op: str, direction: str, facts: Facts, base_facts: Facts | None,
                 blocking: bool) -> str:
    if kind == causes.BEYOND:
        return ("in block I/O waits beyond the device's time for the op's own I/O (sleeps the "
                "kernel counts as I/O waits; --monitors reclaim times reclaim and dirty "
                "throttling)" if monitornames.RECLAIM not in facts.monitors else
                "in block I/O waits beyond the device's time for the op's own I/O (sleeps the "
                "kernel counts as I/O waits, outside reclaim and dirty throttling)")
    words = DELAY_WORDS[kind]
    if kind == "blkio":
        words = "in block I/O waits"
    text = mechanism(kind, op, direction, facts, base_facts, blocking)
    return words + (f" ({text})" if text else "")


def _steady_words(cause: causes.Cause) -> str:
    if cause.traced:
        return stall_words(cause.kind)
    if cause.kind == causes.BEYOND:
        return "block I/O waits beyond the device's time"
    if cause.kind == "blkio":
        return "block I/O waits the device can have served"
    return f"{longest.KIND_WORDS.get(cause.kind, cause.kind)}s"


def _stall_words(op: str, cause: causes.Cause, stall: OpStall, base: OpStall | None,
                 device: DeviceVerdict | None, first: bool) -> str:
    """'25% of the read ops' time was in memcg reclaim (1,020 of 2.1 ms mean, 0.13 per op;
    45 µs mean in the baseline), sleeps the kernel counts as block I/O waits'."""
    mean = format_ns(stall.mean_ns) if stall.mean_ns is not None else "?"
    before = (f"{base.stalls:,} of {format_ns(base.mean_ns)} mean in the baseline"
              if base is not None and base.stalls and base.mean_ns is not None
              else "none in the baseline")
    text = (f"{cause.share:.0%} of the {op} ops' time was in "
            f"{stall_words(cause.kind)}" if first
            else f"{cause.share:.0%} in {stall_words(cause.kind)}")
    text += f": {stall.stalls:,} stalls of {mean} mean, {stall.per_op or 0:.2g} per op, {before}"
    if cause.holds_io and device is not None and device.not_device:
        text += ("; sleeps the kernel counts as block I/O waits (beyond the device's time for "
                 f"the op's own I/O: {device.not_device:.0%} of the op time);")
    return text


PRESSURE_ROSE = 0.05       # memory pressure's share of the run's time rose by this much


def variant_lines(label: str, psi: Mapping[str, Pressure], base_psi: Mapping[str, Pressure],
                  stacks: Stacks | None, base_stacks: Stacks | None) -> list[Explanation]:
    """The candidate's lines that are not one op's: memory pressure (PSI) where it rose, and
    the sleep its blocked stacks moved to, with where their stack leaves the baseline's."""
    out = []
    # the workload's own cgroup where it has one, else the whole system: one line
    for scope in ("cgroup", "system"):
        item, before = psi.get(f"{scope}.memory.some"), base_psi.get(f"{scope}.memory.some")
        if item is None:
            continue
        was = before.share_of_time if before else 0.0
        if item.share_of_time - was >= PRESSURE_ROSE:
            whose = "the run's" if scope == "cgroup" else "the system's"
            out.append(Explanation(label, None, (
                f"{label}: memory pressure rose: {whose} tasks stalled on memory (PSI some: "
                f"reclaim, refaults, throttling) {item.share_of_time:.0%} of the run's time, "
                f"{was:.0%} in the baseline")))
        break
    if stacks is not None and stacks.top:
        here = [(row.stack, row.share) for row in stacks.top]
        base = [(row.stack, row.share) for row in base_stacks.top] if base_stacks else []
        change = grown_sleep(here, base)
        if change is not None:
            out.append(Explanation(label, None, change_line(label, change)))
    return out


def _unnamed_new_op(op: str, role: RoleDelays, direction: str, traced: bool) -> str:
    """An op only the candidate ran is all change, so it gets a line even where delay accounting
    names no wait of MIN_SHARE: the shares it did see, and where the rest of the time can be
    (`traced`: its slow ops' breakdown names the wait in the next line)."""
    seen = ", ".join(f"{longest.KIND_WORDS[kind]}s {role.delays[kind].share or 0:.0%}"
                     for kind in ("blkio", "cpu") if kind in role.delays)
    # ext4's fsync waits for jbd2's commit in wait_event (schedule, not io_schedule): a sleep
    # that taskstats accounts as no delay at all, while the journal thread does the I/O
    sleep = (" (as an fsync does while it waits for the journal's commit, which the journal "
             "thread writes)") if direction == "sync" else ""
    return (f"{headline(op, NEW_OP, math.inf)}: delay accounting names no wait over "
            f"{MIN_SHARE:.0%} of the {role.role} workers' op time ({seen}): the rest was on a "
            f"CPU or asleep outside block I/O{sleep}"
            + ("" if traced else "; --monitors stacks would name the wait"))


def _device_bound(slow: SlowOps) -> bool:
    """The slow ops' largest cause is the device or a wait for it."""
    if not slow.shares:
        return False
    top = max(slow.shares, key=lambda k: slow.shares[k])
    return top in ("device", "direct I/O to the device") or "block" in top or "D state" in top \
        or top.startswith("other")


def impossible_warnings(label: str, delays: Sequence[RoleDelays]) -> list[str]:
    """One line per role and kind whose waits the kernel accounted faster than time passes."""
    return [f"{label}: taskstats accounted {kind} delay to a {role.role} worker at {rate:.1f} s "
            "per second of its time, which no task can wait: a kernel accounting fault (a wait "
            f"timed from an earlier start?); {kind} is left out of the delay shares"
            for role in delays for kind, rate in sorted(role.impossible.items())]


def off_cpu_warnings(label: str, delays: Sequence[RoleDelays]) -> list[str]:
    """One line per role and kind whose waits inside the ops the kernel accounted beyond the
    tasks' time off a CPU (analysis/where/delays.py), which no wait for the device can exceed."""
    return [f"{label}: taskstats accounted {accounted / 1e9:.2f} s of {kind} delay inside the "
            f"{role.role} workers' ops, more than the {room / 1e9:.2f} s they were off a CPU "
            "and not in a pacing sleep (a task waiting for the device is asleep): a kernel "
            f"accounting fault; their {kind} share is cut to that time"
            for role in delays for kind, (accounted, room) in sorted(role.beyond_off_cpu.items())]
