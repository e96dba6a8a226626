"""The causes of one op's change, each with its share of the op time here and its time per op
here and in the baseline, so that a where line leads with what changed, not with what is large
in both variants (pure).

Two sources, never added where they overlap:
- the stalls the tracepoints timed inside the op's own ops (reclaim, dirty throttling;
  analysis/where/tracedstalls.py): exact;
- delay accounting of the op's worker role (analysis/where/delays.py): lower bounds, per role. The
  kernel counts one sleep under several kinds: a reclaim that sleeps in io_schedule is both
  "freepages" and "block I/O", a dirty-throttling pause is "block I/O". So where a traced reclaim
  covers the op, freepages is not named beside it; and block I/O waits are split by the device's
  side (device.py): the part the device can have served (named with its mechanism), and the
  part it cannot (beyond the device's time for the role's own I/O, or in traced pauses),
  which belongs to the traced stall that holds it or is named as such.

A cause grew when its time per op grew by GREW against the baseline's same op (traced) or role
(delay accounting); the line leads with the causes that grew, largest growth first, except that
a traced stall holding block I/O waits the device did not serve comes before them (it names the
sleep those waits were; the kernel's label is only "block I/O") and run-queue waits come after a
blocking cause (each wake-up queues for a CPU); the ones that did not grow are named "also in
the baseline".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..delaykinds import BLOCKING, RECLAIM

GREW = 1.2          # a cause grew when its time per op grew by this factor
BEYOND = "blkio beyond the device"      # the block I/O waits the device cannot have served
RECLAIM_STALLS = ("direct reclaim", "memcg reclaim")   # traced stalls that are reclaim


@dataclass(frozen=True)
class Cause:
    kind: str                     # a delay kind, BEYOND, or a traced stall's kind
    share: float                  # of the op time (delay accounting: the role's, at least)
    ns_per_op: float
    base_ns_per_op: float | None  # None: the baseline has no such op or role
    traced: bool                  # timed by the tracepoints inside the op's own ops
    base_share: float | None = None
    holds_io: bool = False        # a traced stall that holds block I/O waits the device did
    #                               not serve (the kernel's label for its sleeps)

    @property
    def grew(self) -> bool:
        return self.base_ns_per_op is None or self.ns_per_op > GREW * self.base_ns_per_op

    @property
    def blocks(self) -> bool:
        """The op slept in it (not a run-queue wait, which follows every wake-up)."""
        return self.traced or self.kind == BEYOND or self.kind in BLOCKING


@dataclass(frozen=True)
class OpSide:
    """What one variant says about one op (all optional but the op)."""
    ops: int = 0                              # the op's samples
    role_ops: int = 0                         # the ops of its worker role
    role_in_ops_ns: Mapping[str, int] | None = None     # delay kind -> ns inside the role's ops
    role_shares: Mapping[str, float] | None = None      # delay kind -> share of the role's time
    stalls: Mapping[str, tuple[float, float]] | None = None   # traced kind -> (share, ns per op)
    not_device: float | None = None           # of the op time: block I/O the device did not serve
    held: tuple[str, ...] = ()                # ... inside these traced stalls (kinds)


def op_causes(here: OpSide, base: OpSide | None) -> list[Cause]:
    """Every cause of the op's time in the candidate (`here`) against the baseline, unsorted."""
    traced = _traced(here)
    base_traced = _traced(base) if base is not None else {}
    delays = _delays(here, traced)
    base_delays = _delays(base, base_traced) if base is not None else {}
    out = [Cause(kind, share, per_op, base_traced.get(kind, (0.0, 0.0))[1]
                 if base is not None else None, True,
                 base_traced.get(kind, (0.0, 0.0))[0] if base is not None else None,
                 kind in here.held)
           for kind, (share, per_op) in traced.items()]
    out += [Cause(kind, share, per_op,
                  (base_delays.get(kind, (0.0, 0.0))[1] if base.role_ops else None)
                  if base is not None else None, False,
                  base_delays.get(kind, (None, None))[0] if base is not None else None)
            for kind, (share, per_op) in delays.items()]
    return out


def _traced(side: OpSide) -> dict[str, tuple[float, float]]:
    return dict(side.stalls or {})


def _delays(side: OpSide, traced: Mapping[str, tuple[float, float]]
            ) -> dict[str, tuple[float, float]]:
    """delay kind -> (share, ns per op of the role), with block I/O split by the device's side
    and reclaim left to a traced reclaim."""
    shares, in_ops = side.role_shares or {}, side.role_in_ops_ns or {}
    out = {}
    for kind, share in shares.items():
        if share is None or not side.role_ops:
            continue
        if kind in RECLAIM and kind != "thrashing" and any(k in RECLAIM_STALLS for k in traced):
            continue        # the same time, which the traced reclaim has exactly
        per_op = in_ops.get(kind, 0) / side.role_ops
        if kind == "blkio" and side.not_device:
            beyond = min(share, side.not_device)
            part = share - beyond
            out[kind] = (part, per_op * part / share if share else 0.0)
            if not side.held:
                out[BEYOND] = (beyond, per_op * beyond / share if share else 0.0)
            continue
        out[kind] = (share, per_op)
    return out


def ranked(causes: list[Cause], min_share: float) -> tuple[list[Cause], list[Cause]]:
    """(the causes that grew, worth naming: blocking ones first when any grew, then by their
    growth per op; the ones of min_share that did not grow: "also in the baseline")."""
    worth = [c for c in causes if c.share >= min_share]
    grown = [c for c in worth if c.grew]
    blocking = any(c.blocks for c in grown)
    grown.sort(key=lambda c: (blocking and not c.blocks, not c.holds_io,
                              -(c.ns_per_op - (c.base_ns_per_op or 0.0)), -c.share))
    steady = sorted((c for c in worth if not c.grew), key=lambda c: -c.share)
    return grown, steady
