"""Device or above it, per op, from the op's own I/O (pure).

Not the device's time per request against the op's mean: a page-cached read of 1 µs next to a
device at 469 µs per request is not "in the device". What the op's role read from the block
layer (taskstats read_bytes against the bytes its read calls returned) says whether its reads
reached the device at all; the share of its op time in block I/O waits (delays attributed to
the ops, analysis/inops.py) whether it waited for it; a throttle the variant set is named.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import monitors as am
from .mechanism import Facts, op_direction, throttle_words


@dataclass
class DeviceVerdict:
    op_mean_ns: float
    device_ns_per_request: float | None
    device_share_upper_bound: float | None
    verdict: str | None
    from_device: float | None = None        # bytes the op's role read from the block layer /
    #                                         bytes its read calls returned (taskstats)
    blkio_share: float | None = None        # of the role's op time, in block I/O waits
    requests_per_op: float | None = None    # all the devices' requests / the run's ops


@dataclass
class RoleIO:
    ops_latency_ns: int
    blkio_in_ops_ns: int | None         # None: the kernel accounted the waits impossibly
    io: dict[str, int] = field(default_factory=dict)


PAGE_CACHE_FRACTION = 0.02     # bytes from the device below this share: page-cache reads
DEVICE_WAIT_SHARE = 0.5        # block I/O waits above this share of the op time: the device
PARTLY_SHARE = 0.2             # above this share: partly the device
REACHED_DEVICE = 0.5           # bytes from the device at or above this share: reads reached it
BINDING = 0.8                  # a throttle binds when the device ran at this share of its limit
LIMIT_RATES = {"riops": "read_iops", "wiops": "write_iops", "rbps": "read_bytes_per_s",
               "wbps": "write_bytes_per_s"}      # io.max key -> the DiskSummary rate it limits
ABOVE = "above the device (page cache, reclaim, locks, CPU)"


def device_vs_above(disks: Mapping[str, Any], op_totals: Mapping[str, tuple[int, int]],
                    runs: int, delays: Mapping[str, RoleIO] | None = None,
                    roles_of_op: Mapping[str, Sequence[str]] | None = None,
                    facts: Facts | None = None) -> dict[str, DeviceVerdict]:
    """Per op: was its time spent in the device or above it, judged from the op's own I/O:
    the share of the bytes its role read that came from the block layer (taskstats), and the
    share of its op time in block I/O waits (delays attributed to the ops); a throttle the
    variant set is named as such. Without delay accounting only a bound is possible: with far
    fewer device requests than ops, most ops cannot have reached the device.
    `op_totals[op]` = (samples, latency sum) over the runs."""
    roles_of_op = roles_of_op or {}
    by_role = delays or {}
    if not disks and not by_role:
        return {}
    requests = sum((d.reads or 0) + (d.writes or 0) for d in disks.values())
    device_ns = sum((d.ns_per_request or 0) * ((d.reads or 0) + (d.writes or 0))
                    for d in disks.values())
    per_request = device_ns / requests if requests else None
    all_ops = sum(n for n, _ in op_totals.values())
    result = {}
    for op, (samples, total) in op_totals.items():
        if samples == 0:
            continue
        mean = total / samples
        roles = [by_role[r] for r in roles_of_op.get(op, []) if r in by_role]
        per_op = requests / max(1, runs) / (all_ops / max(1, runs)) if disks and all_ops \
            else None
        from_device = blkio = None
        verdict = None
        bound = am.device_share(total, requests / max(1, runs), per_request)
        if roles:
            io = {k: sum(r.io.get(k, 0) for r in roles) for k in ("read_char", "read_bytes",
                                                                 "write_char")}
            latency = sum(r.ops_latency_ns for r in roles)
            waits = [r.blkio_in_ops_ns for r in roles]
            blkio = sum(waits) / latency if latency and None not in waits else None
            direction = op_direction(op, io)
            if io["read_char"]:
                from_device = min(1.0, io["read_bytes"] / io["read_char"])
            verdict = _verdict(direction, from_device, blkio, facts)
            if verdict is None and None in waits:
                verdict = _without_waits(direction, from_device, bound, facts, disks)
        elif per_op is not None and per_op < PAGE_CACHE_FRACTION:
            verdict = f"{ABOVE}: {per_op:.1%} device requests per op"
        result[op] = DeviceVerdict(mean, per_request, bound, verdict, from_device, blkio, per_op)
    return result


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


def _verdict(direction: str, from_device: float | None, blkio: float | None,
             facts: Facts | None) -> str | None:
    """In words; the shares themselves are the verdict's own columns."""
    if direction == "read" and from_device is not None and from_device < PAGE_CACHE_FRACTION:
        return "above the device: page cache"
    if blkio is None:
        return None
    throttle = throttle_words(facts, direction if direction == "read" else "write") \
        if facts else None
    if throttle and blkio >= PARTLY_SHARE:
        return f"in {throttle}, before the device"
    if blkio >= DEVICE_WAIT_SHARE:
        return "waiting for the device"
    if blkio >= PARTLY_SHARE or (from_device is not None and from_device >= REACHED_DEVICE):
        return "partly the device, the rest above it"
    return ABOVE
