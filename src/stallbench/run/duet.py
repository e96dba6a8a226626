"""Duet rounds (Bulej et al., "Duet Benchmarking", ICPE 2020): the variants of a round run at
the same time on this machine, each pinned to its own CPUs, so that whatever the host does for
seconds at a time (its CPU level, a neighbour, frequency) falls on both sides of the round and
cancels in the ratio of the pair; the comparison then pairs the runs of a round
(analysis/paired.py).

What a duet shares, and so what it measures: the page cache, the block device under the files,
the memory bus and the last-level cache, and the kernel's own threads. A change in one side's
I/O or memory load reaches the other side's latencies too: a duet measures the difference
*under shared load*, which is not the difference of two runs alone (a variant that reads more
slows its partner a little, and the pair's ratio shows less than the whole change). Each side
keeps its own environment (its loop filesystem, memory cgroup, journal, run directory), so
the settings that are per process (memory limits, cgroup I/O knobs, workload options, a
filesystem on its own loop device) can be compared in a duet. System-wide ones cannot:
`check_plan` refuses them with the reason.

A run's machine_load counts the whole duet as its own (both sides are this process's tree):
`others` is the rest of the machine, which both sides of a round shared, so the comparison
applies no MACHINE BUSIER rule between duet pairs (a saturated machine still gets the
sequential model and its floor, analysis/paired.py).

Each side's data files: a variant without fs or dir gets the default directory of its CPU
slot (results/.work/<workload>/duet-<slot>), which rotates with the CPUs. A file kept by one
variant for all rounds carries its own layout (page cache folios, blocks) into every pair, a
fixed difference that pairs cannot cancel (an A/A duet of cached randreads once called the
twin's rate 5.4% worse in all three pairs); moving with the slot, it alternates like CPU 0.

Round protocol (runner.run_duet_round): every side sets up its environment and prepares its
files; at the first barrier the page cache is dropped once for the round (it is machine-wide);
then every side starts its clock and monitors, and at the second barrier all release their
workers at once. The CPU sets rotate from round to round, so no variant always has CPU 0
(which takes more of the interrupts).
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from ..core.errors import UsageError
from ..plan.plan import Plan
from ..settings.variant import VariantSettings

START_TIMEOUT_S = 600.0   # from the prepare barrier to the start: monitors only


def available_cpus() -> list[int]:
    """The CPUs this process may run on, in order."""
    return sorted(os.sched_getaffinity(0))


def check_plan(plan: Plan, cpus: list[int] | None = None, hosts: object = None) -> None:
    """Refuse, with the reason in one line, a duet that could not be honest (`hosts`: the
    command line's --hosts)."""
    cpus = available_cpus() if cpus is None else cpus
    variants = plan.variants
    if len(variants) < 2:
        raise UsageError("--duet runs the variants of a plan at the same time: give two or more "
                         "variants (stallbench run --plan PLAN --duet)")
    if len(variants) > len(cpus):
        raise UsageError(f"--duet: {len(variants)} variants need {len(variants)} CPUs, one "
                         f"each, and this process may use {len(cpus)}; give at most "
                         f"{len(cpus)} variants (or run without --duet)")
    if hosts or plan.hosts is not None or any(v.hosts for v in variants):
        raise UsageError("--duet runs on this machine: a plan with hosts (a fleet) runs each "
                         "variant on its own host; drop --duet or the hosts")
    for v in variants:
        if v.kernel is not None:
            raise UsageError(f"--duet: variant {v.name} boots a kernel; one machine runs one "
                             "kernel at a time, so kernels are compared in sequential rounds "
                             "(without --duet)")
        if v.system_memory is not None:
            raise UsageError(f"--duet: variant {v.name} sets system_memory, which takes memory "
                             "from the whole machine, both sides of the duet at once; compare "
                             "it without --duet (or use memory, a per-variant cgroup limit)")
        if v.sysctls:
            keys = ", ".join(sorted(v.sysctls))
            raise UsageError(f"--duet: variant {v.name} sets sysctls ({keys}): a sysctl is "
                             "system-wide, so it would apply to both sides of the duet at "
                             "once; compare it in sequential rounds (without --duet), or set "
                             "it on the machine before the duet")
        if v.scheduler is not None and v.fs is None:
            raise UsageError(f"--duet: variant {v.name} sets the I/O scheduler of a device the "
                             "other side uses too; give each variant its own loop filesystem "
                             "(fs) or run without --duet")
    if len({v.drop_caches for v in variants}) > 1:
        raise UsageError("--duet: the variants differ in drop_caches, but the page cache is "
                         "the machine's: it is dropped once per round for both sides or for "
                         "neither; give every variant the same drop_caches")
    dirs: dict[str, str] = {}
    for v in variants:
        if v.fs is None and v.dir is not None:
            key = str(Path(v.dir).resolve())
            if key in dirs:
                raise UsageError(f"--duet: variants {dirs[key]} and {v.name} would use the "
                                 f"same files in {v.dir} at the same time; give each its own "
                                 "dir or fs")
            dirs[key] = v.name


def decide_hint(plan: Plan) -> str | None:
    """For a plan of one run per variant (the first-time path: the demo, `iterations = 1`): the
    one line that says how to decide more than large changes, with duets where this plan may
    run as duets (check_plan), and calibrate; None for a plan that repeats or has no file."""
    if plan.iterations > 1 or plan.until_decided or plan.source is None or \
            len(plan.variants) < 2:
        return None
    name = str(plan.source)
    try:
        check_plan(plan)
    except UsageError as exc:
        why = re.split(r"[:;]|, which", str(exc).removeprefix("--duet: "))[0]
        repeat = f"set `iterations = 3` in {name} and run it again (not as duets: {why})"
    else:
        repeat = (f"`stallbench run --plan {name} --duet` with `iterations = 3` in it (the "
                  "variants at the same time, a pair per round: the host's drift cancels)")
    return (f"to decide more than large changes: {repeat}; or once `stallbench calibrate "
            f"{name}` (this host's A/A spread, used from then on)")


def slots(count: int, round_index: int) -> list[int]:
    """The CPU group index of each variant in round `round_index` (see assign_cpus)."""
    return [(i + round_index) % count for i in range(count)]


def assign_cpus(count: int, round_index: int, cpus: list[int]) -> list[list[int]]:
    """CPU sets for `count` variants in round `round_index` (0-based): the CPUs split into
    `count` contiguous groups (the last takes what is left over), rotated by the round, so
    variant i gets group (i + round) mod count."""
    if count < 1 or count > len(cpus):
        raise ValueError(f"{count} variants on {len(cpus)} CPUs")
    size = len(cpus) // count
    groups = [cpus[i * size:(i + 1) * size] for i in range(count)]
    groups[-1] = cpus[(count - 1) * size:]
    return [groups[slot] for slot in slots(count, round_index)]


def pinned(cpus: list[int], setup: Callable[[], None]) -> Callable[[], None]:
    """A child-setup function that pins the child to `cpus`, then runs `setup` (the cgroup
    joins): every worker or program of the side runs on its own CPUs."""
    chosen = set(cpus)

    def run() -> None:
        os.sched_setaffinity(0, chosen)
        setup()

    return run


class DuetRound:
    """What the sides of one round share: the two barriers and who is who."""

    def __init__(self, round_number: int, variants: list[VariantSettings],
                 cpus: list[list[int]], drop: Callable[[], str | None] | None,
                 slots: list[int] | None = None):
        self.number = round_number
        # the CPU slot of each variant this round: its default directory goes with the slot
        self.slots = {v.name: (slots[i] if slots else i) for i, v in enumerate(variants)}
        self.id = f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{os.getpid()}-{round_number}"
        self.cpus = {v.name: list(c) for v, c in zip(variants, cpus, strict=True)}
        self.drop_note: str | None = None
        self._drop = drop
        self._paths: dict[str, str] = {}
        self._lock = threading.Lock()
        self._prepared = threading.Barrier(len(variants), action=self._on_prepared)
        self._start = threading.Barrier(len(variants), timeout=START_TIMEOUT_S)

    def _on_prepared(self) -> None:
        if self._drop is not None:
            self.drop_note = self._drop()     # once for the round: the page cache is shared

    def slot_dir(self, variant: str) -> str:
        """The default work directory's name for `variant` this round: the slot's, not the
        variant's, so that a data file's own layout (its page cache folios, its blocks) moves
        between the variants with the CPUs instead of staying with one variant all along."""
        return f"duet-{self.slots[variant]}"

    def register(self, variant: str, path: Path) -> None:
        with self._lock:
            self._paths[variant] = str(Path(path).resolve())

    def wait_prepared(self) -> str | None:
        """Every side's files are ready (and the caches dropped): the note of the drop."""
        self._prepared.wait()
        return self.drop_note

    def wait_start(self) -> None:
        """Every side's clock and monitors run: release the workers together."""
        self._start.wait()

    def abort(self) -> None:
        """A side failed or was interrupted: the others stop waiting for it."""
        self._prepared.abort()
        self._start.abort()

    def record(self, variant: str) -> dict[str, Any]:
        """run.json's `duet` of one side."""
        with self._lock:
            partners = [{"variant": name, "path": self._paths.get(name),
                         "cpus": self.cpus[name]} for name in self.cpus if name != variant]
        return {"round": self.number, "id": self.id, "partners": partners,
                "cpus": self.cpus[variant]}


class DuetSeat(NamedTuple):
    """One side's place in a duet round: the round it shares and the CPUs it is pinned to."""

    round: DuetRound
    cpus: list[int]
