"""The one-line explanations of the where section ("read p99 +310%: ..."), from the typed
subsections wheresection.py fills: delay accounting attributed to the ops (with the mechanism
by name, analysis/mechanism.py) and the slow ops' breakdown; and the section's warnings when
the kernel's delay accounting cannot be true. Pure.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

from . import delaymax
from . import monitors as am
from .delaykinds import BLOCKING
from .mechanism import Facts, mechanism, op_direction, throttle_words
from .wheresection import DeviceVerdict, Explanation, LongestDelay, RoleDelays, SlowOps


def explanations(label: str, tail_changes: Mapping[str, tuple[str, float | None]],
                 slow: Mapping[str, SlowOps], delays: Sequence[RoleDelays],
                 roles_of_op: Mapping[str, Sequence[str]],
                 longest_here: Mapping[str, LongestDelay],
                 longest_base: Mapping[str, LongestDelay],
                 facts: Facts | None = None,
                 device: Mapping[str, DeviceVerdict] | None = None,
                 base_delays: Sequence[RoleDelays] = (),
                 base_facts: Facts | None = None) -> list[Explanation]:
    """The one-line explanations of a candidate, per op whose tail grew: first from delay
    accounting of the one role that runs it (the share of all its op time, attributed to the
    ops, with the mechanism where the variant's settings and counters name it), then from its
    slow ops' breakdown (trace or stack samples: which wait, by name); then the longest single
    delays that grew."""
    out = []
    facts = facts or Facts()
    rows = {row.role: row for row in delays}
    for op, (stat, change) in sorted(tail_changes.items()):
        roles = roles_of_op.get(op, [])
        role = rows.get(roles[0]) if len(roles) == 1 else None
        direction = op_direction(op, role.io if role else {})
        if role is not None:
            base = next((r for r in base_delays if r.role == role.role), None)
            shares = {k: dataclasses.asdict(v) for k, v in role.delays.items()
                      if _grew(k, role, base)}
            blocking = any(kind in BLOCKING for kind, _ in am.delay_causes(shares))
            cpu_first = not blocking
            words = {kind: text for kind, _ in am.delay_causes(shares, cpu_first)
                     if (text := mechanism(kind, op, direction, facts, base_facts, blocking))}
            line = am.delay_explanation(op, change, role.role, shares, mechanism=words,
                                        cpu_first=cpu_first, stat=stat)
            if line:
                out.append(Explanation(label, op, line))
            elif role.impossible and device and op in device and device[op].verdict \
                    and change is not None and change > am.MIN_GROWTH:
                out.append(Explanation(label, op, (
                    f"{am.headline(op, stat, change)}: {device[op].verdict} (from the device's "
                    f"counters: the {', '.join(sorted(role.impossible))} delay accounting "
                    "was impossible here)")))
            elif stat == am.NEW_OP and not role.impossible:
                out.append(Explanation(label, op, _unnamed_new_op(op, role, direction,
                                                                  traced=op in slow)))
        if op in slow:
            line = am.explanation(op, change, slow[op].breakdown_ns, slow[op].source,
                                  stat=stat)
            if line:
                throttle = throttle_words(facts, "read" if direction == "read" else "write")
                if throttle and _device_bound(slow[op]):
                    line += f"; {throttle}"
                out.append(Explanation(label, op, line))
    for kind, entry in longest_here.items():
        base = longest_base.get(kind)
        line = delaymax.explanation(label, kind, entry.max_ns, base.max_ns if base else None)
        if line:
            out.append(Explanation(label, None, line))
    return out


def _unnamed_new_op(op: str, role: RoleDelays, direction: str, traced: bool) -> str:
    """An op only the candidate ran is all change, so it gets a line even where delay accounting
    names no wait of MIN_SHARE: the shares it did see, and where the rest of the time can be
    (`traced`: its slow ops' breakdown names the wait in the next line)."""
    seen = ", ".join(f"{delaymax.KIND_WORDS[kind]}s {role.delays[kind].share or 0:.0%}"
                     for kind in ("blkio", "cpu") if kind in role.delays)
    # ext4's fsync waits for jbd2's commit in wait_event (schedule, not io_schedule): a sleep
    # that taskstats accounts as no delay at all, while the journal thread does the I/O
    sleep = (" (as an fsync does while it waits for the journal's commit, which the journal "
             "thread writes)") if direction == "sync" else ""
    return (f"{am.headline(op, am.NEW_OP, math.inf)}: delay accounting names no wait over "
            f"{am.MIN_SHARE:.0%} of the {role.role} workers' op time ({seen}): the rest was on a "
            f"CPU or asleep outside block I/O{sleep}"
            + ("" if traced else "; --monitors stacks would name the wait"))


GREW = 1.2     # a delay is a cause of the change when its time per op grew by this factor


def _grew(kind: str, here: RoleDelays, base: RoleDelays | None) -> bool:
    """Its time per op grew against the baseline's role (no baseline role: taken as grown)."""
    if base is None or not base.ops or not here.ops:
        return True
    before = base.delays[kind].in_ops_ns / base.ops if kind in base.delays else 0.0
    return here.delays[kind].in_ops_ns / here.ops > GREW * before


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
    tasks' time off a CPU (analysis/inops.py), which no wait for the device can exceed."""
    return [f"{label}: taskstats accounted {accounted / 1e9:.2f} s of {kind} delay inside the "
            f"{role.role} workers' ops, more than the {room / 1e9:.2f} s they were off a CPU "
            "and not in a pacing sleep (a task waiting for the device is asleep): a kernel "
            f"accounting fault; their {kind} share is cut to that time"
            for role in delays for kind, (accounted, room) in sorted(role.beyond_off_cpu.items())]
