"""Device or above it, per op, from the op's own I/O and the device's side (pure).

Not the device's time per request against the op's mean: a page-cached read of 1 µs next to a
device at 469 µs per request is not "in the device". What the op's role read from the block
layer (taskstats read_bytes against the bytes its read calls returned) says whether its reads
reached the device at all; the share of its op time in block I/O waits (delays attributed to
the ops, analysis/where/delays.py) whether it waited for it; a throttle the variant set is named.

A block I/O wait is not always the device's time: the kernel counts every io_schedule sleep as
one, so a dirty-throttling pause (balance_dirty_pages), a writeback wait inside reclaim or a
back-off in reclaim is "block I/O" though the device served nothing of the op. The device's
own side bounds it: what the role read from the block layer and wrote to it (taskstats
read_bytes, write_bytes: bytes read at submission, written at dirtying or direct submission),
at the device's time per byte (diskstats: request time over bytes, the slowest device's, so a
bound and not an estimate) is the most the device can have spent on the role's own I/O; block
I/O waits beyond that, and the dirty-throttling pauses the tracepoints timed inside the op, are
sleeps the device did not serve (`not_device`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from .mechanism import op_direction, throttle_words
from .section import DeviceVerdict, Facts, RoleIO
from .tracedstalls import counted_as_block_io, stall_words

PAGE_CACHE_FRACTION = 0.02     # bytes from the device below this share: page-cache reads
DEVICE_WAIT_SHARE = 0.5        # block I/O waits above this share of the op time: the device
PARTLY_SHARE = 0.2             # above this share: partly the device
REACHED_DEVICE = 0.5           # bytes from the device at or above this share: reads reached it
HELD_SHARE = 0.1               # above this share, sleeps a traced stall holds are named
BINDING = 0.8                  # a throttle binds when the device ran at this share of its limit
LIMIT_RATES = {"riops": "read_iops", "wiops": "write_iops", "rbps": "read_bytes_per_s",
               "wbps": "write_bytes_per_s"}      # io.max key -> the DiskSummary rate it limits
ABOVE = "above the device (page cache, reclaim, locks, CPU)"


def device_share(op_latency_total_ns: float, requests: float, ns_per_request: float | None,
                 ) -> float | None:
    """Fraction of the ops' total latency that the device's request time could account for.

    Upper bound: all device time of the run divided by all time the ops took. Near 1 the
    operations waited on the device; near 0 their time went above the block layer."""
    total = float(op_latency_total_ns)
    if total <= 0 or ns_per_request is None:
        return None
    return min(1.0, requests * ns_per_request / total)


def device_vs_above(disks: Mapping[str, Any], op_totals: Mapping[str, tuple[int, int]],
                    runs: int, delays: Mapping[str, RoleIO] | None = None,
                    roles_of_op: Mapping[str, Sequence[str]] | None = None,
                    facts: Facts | None = None,
                    stalls: Mapping[str, Mapping[str, float]] | None = None,
                    baseline: Mapping[str, DeviceVerdict] | None = None
                    ) -> dict[str, DeviceVerdict]:
    """Per op: was its time spent in the device or above it, judged from the op's own I/O:
    the share of the bytes its role read that came from the block layer (taskstats), and the
    share of its op time in block I/O waits (delays attributed to the ops), less what the device
    cannot have served (module docstring); a throttle the variant set is named as such. Without
    delay accounting only a bound is possible: with far fewer device requests than ops, most ops
    cannot have reached the device. `op_totals[op]` = (samples, latency sum) over the runs;
    `stalls[op][kind]` the share of the op's time in traced stalls of each kind; `baseline`
    the baseline's verdicts, whose block I/O waits against their bound say how tight the bound
    is on this device and workload (module docstring)."""
    roles_of_op = roles_of_op or {}
    by_role = delays or {}
    if not disks and not by_role:
        return {}
    requests = sum((d.reads or 0) + (d.writes or 0) for d in disks.values())
    device_ns = sum((d.ns_per_request or 0) * ((d.reads or 0) + (d.writes or 0))
                    for d in disks.values())
    per_request = device_ns / requests if requests else None
    per_byte = ns_per_byte(disks, "read"), ns_per_byte(disks, "write")
    all_ops = sum(n for n, _ in op_totals.values())
    result = {}
    for op, (samples, total) in op_totals.items():
        if samples == 0:
            continue
        mean = total / samples
        roles = [by_role[r] for r in roles_of_op.get(op, []) if r in by_role]
        per_op = requests / max(1, runs) / (all_ops / max(1, runs)) if disks and all_ops \
            else None
        from_device = blkio = served = None
        beyond = Beyond(None, [])
        verdict = None
        bound = device_share(total, requests / max(1, runs), per_request)
        if roles:
            io = {k: sum(r.io.get(k, 0) for r in roles) for k in ("read_char", "read_bytes",
                                                                 "write_char", "write_bytes")}
            latency = sum(r.ops_latency_ns for r in roles)
            waits = [r.blkio_in_ops_ns for r in roles]
            blkio = sum(waits) / latency if latency and None not in waits else None
            direction = op_direction(op, io)
            if io["read_char"]:
                from_device = min(1.0, io["read_bytes"] / io["read_char"])
            # an fsync waits for flushes (no bytes) and the journal's writes (the journal
            # thread's bytes): the role's own bytes do not bound its device time
            if latency and per_byte != (None, None) and not syncs(roles_of_op, op):
                served = min(1.0, sum(io[f"{way}_bytes"] * ns for way, ns
                                      in zip(("read", "write"), per_byte, strict=True) if ns)
                             / latency)
            if facts is not None and throttle_words(facts, "read" if direction == "read"
                                                    else "write"):
                served = None       # the throttle the variant set is the named wait
            beyond = not_served(blkio, served if served is None else
                                served * tightness((baseline or {}).get(op)),
                                (stalls or {}).get(op, {}))
            verdict = verdict_words(direction, from_device, blkio, facts, beyond)
            if verdict is None and None in waits:
                verdict = _without_waits(direction, from_device, bound, facts, disks)
        elif per_op is not None and per_op < PAGE_CACHE_FRACTION:
            verdict = f"{ABOVE}: {per_op:.1%} device requests per op"
        result[op] = DeviceVerdict(mean, per_request, bound, verdict, from_device, blkio, per_op,
                                   served, beyond.share, beyond.where)
    return result


def syncs(roles_of_op: Mapping[str, Sequence[str]], op: str) -> bool:
    """Some role that runs the op also runs an fsync-like op."""
    roles = set(roles_of_op.get(op, ()))
    return any(op_direction(other, {}) == "sync" and roles & set(runners)
               for other, runners in roles_of_op.items())


def ns_per_byte(disks: Mapping[str, Any], way: str) -> float | None:
    """The device's time per byte read or written (`way`): request time over bytes, of the
    devices that did any, the slowest's; None where none did."""
    ratios = []
    for d in disks.values():
        count, per_request = getattr(d, f"{way}s"), getattr(d, f"{way}_ns_per_request")
        rate = getattr(d, f"{way}_bytes_per_s")
        if count and per_request and rate and d.seconds:
            ratios.append(per_request * count / (rate * d.seconds))
    return max(ratios) if ratios else None


class Beyond(NamedTuple):
    share: float | None     # of the op time: block I/O waits the device did not serve
    where: list[str]        # the traced stalls' kinds that hold them


def tightness(base: DeviceVerdict | None) -> float:
    """How much of the bound the baseline's own block I/O waits filled (at most 1; 1 without a
    baseline): the bound counts queueing and read-ahead the op did not wait for, by about the
    same factor on the same device and workload, so the candidate's device time is taken as its
    bound times the baseline's fill. Growth of block I/O beyond the growth of the device's time
    is then not the device's: the sleep a kernel change added is not hidden by the bound's
    slack. Only where the baseline's reads reached the device and it waited for them."""
    if base is None or not base.device_share or base.blkio_share is None \
            or base.blkio_share < PARTLY_SHARE or (base.not_device or 0.0) > 0.0 \
            or base.from_device is None or base.from_device < REACHED_DEVICE:
        return 1.0      # the baseline did not wait for the device enough to tell
    return min(1.0, base.blkio_share / base.device_share)


def not_served(blkio: float | None, served: float | None,
               stalls: Mapping[str, float]) -> Beyond:
    """Block I/O waits the device did not serve, as a share of the op time: beyond the device's
    time for the role's reads (`served`), and at least the dirty-throttling pauses timed inside
    the op (which taskstats counts as block I/O); with the traced stalls that hold them. Less
    than HELD_SHARE beyond the bound is taken as the bound's error. Where the kernel accounted
    the block I/O waits impossibly (`blkio` None) the traced pauses alone still say it."""
    pauses = sum(share for kind, share in stalls.items() if counted_as_block_io(kind))
    if blkio is None:
        if pauses < HELD_SHARE:
            return Beyond(None, [])
        return Beyond(pauses, [kind for kind, share in sorted(stalls.items(), key=lambda kv: -kv[1])
                               if counted_as_block_io(kind)][:2])
    beyond = max(0.0, blkio - served) if served is not None else 0.0
    if beyond < HELD_SHARE:
        beyond = 0.0        # within the calibrated bound's own error: the device's
    beyond = max(beyond, min(blkio, pauses))
    if served is None and not pauses:
        return Beyond(None, [])
    held = [kind for kind, share in sorted(stalls.items(), key=lambda kv: -kv[1])
            if beyond and share >= min(PARTLY_SHARE, beyond) / 2]
    return Beyond(beyond, held[:2])


def _without_waits(direction: str, from_device: float | None, bound: float | None,
                   facts: Facts | None, disks: Mapping[str, Any]) -> str | None:
    """Where the block I/O waits cannot be used: the ops' I/O reached the device, the device's
    time could account for under PARTLY_SHARE of theirs, and a throttle the variant set ran the
    device at its limit: the time was in that throttle."""
    if facts is None or bound is None or bound >= PARTLY_SHARE:
        return None
    if direction == "read" and (from_device is None or from_device < REACHED_DEVICE):
        return None
    throttle = throttle_words(facts, direction if direction == "read" else "write")
    if throttle and throttle_binds(facts, direction, disks):
        return f"in {throttle}, before the device"
    return None


def throttle_binds(facts: Facts, direction: str, disks: Mapping[str, Any]) -> bool:
    """Some device ran at BINDING of a limit the variant's throttle set for the direction."""
    prefix = "r" if direction == "read" else "w"
    for key, value in facts.io_limits.items():
        rate = LIMIT_RATES.get(key)
        if rate is None or not key.startswith(prefix):
            continue
        try:
            limit = float(value)
        except ValueError:
            continue
        if any((getattr(d, rate, None) or 0) >= BINDING * limit for d in disks.values()):
            return True
    return False


def verdict_words(direction: str, from_device: float | None, blkio: float | None,
             facts: Facts | None, beyond: Beyond) -> str | None:
    """In words; the shares themselves are the verdict's own columns."""
    if direction == "read" and from_device is not None and from_device < PAGE_CACHE_FRACTION:
        return "above the device: page cache"
    if blkio is None:
        if beyond.share is None or not beyond.where:
            return None
        # the kernel's waits unusable, the traced pauses timed inside the ops are not
        return f"above the device: at least {beyond.share:.0%} in " + \
            " and ".join(map(stall_words, beyond.where))
    throttle = throttle_words(facts, direction if direction == "read" else "write") \
        if facts else None
    if throttle and blkio >= PARTLY_SHARE:
        return f"in {throttle}, before the device"
    waited = blkio - (beyond.share or 0.0)      # the block I/O waits the device can have served
    if beyond.share is not None and (beyond.share >= PARTLY_SHARE and beyond.share >= waited
                                     or beyond.where and beyond.share >= HELD_SHARE):
        where = (" in " + " and ".join(map(stall_words, beyond.where))
                 if beyond.where else " beyond the device's time for its own I/O")
        if waited >= DEVICE_WAIT_SHARE:
            return f"the device ({waited:.0%}) and above it: {beyond.share:.0%}{where}"
        if waited >= PARTLY_SHARE:
            return f"partly the device ({waited:.0%}), and above it: {beyond.share:.0%}{where}"
        return f"above the device: {beyond.share:.0%}{where}"
    if waited >= DEVICE_WAIT_SHARE:
        return "waiting for the device"
    if blkio >= PARTLY_SHARE or (from_device is not None and from_device >= REACHED_DEVICE):
        return "partly the device, the rest above it"
    return ABOVE
