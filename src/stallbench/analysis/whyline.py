"""The one-line explanations of the where section ("read p99 +310%: ..."), from the typed
subsections wheresection.py fills: delay accounting attributed to the ops (with the mechanism
by name, analysis/mechanism.py) and the slow ops' breakdown. Pure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from . import delaymax
from . import monitors as am
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


BLOCKING = ("blkio", "freepages", "thrashing", "compact", "swapin")
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
