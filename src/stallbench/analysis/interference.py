"""Was one variant's machine busier with outside work than the other's?

Runs of one configuration on a shared machine differ most when something else takes the CPUs:
a schedule lag that goes from milliseconds to seconds, a commit that waits for its writer to be
scheduled. Two runs per side cannot tell that from a change when it hits one side's runs only
(benchmarks/aa.py: the pgioperf 2+2 A/A calls). run.json's `machine_load` (machineload.py) says
how many CPUs' worth of time went to other processes and to the hypervisor (steal) during each
run; when one side's mean exceeds the other's by BUSIER_SHARE of the machine, verdicts that the
extra load could explain (worse on the busier side) are not given, unless they hold with the
saturated machine's run-to-run prior below: a 30x slower read is not a busier machine's doing.

On a saturated machine (every CPU busy, most of it with other work) that mean no longer
measures the outside demand: it is what the workload left over. Separate runs there differ far
beyond the A/A prior (benchmarks/aa.py on a machine with 1.5-1.8 of 2 CPUs taken by others:
a cached randread's p50 30x apart between runs, whole runs on one side or the other), so a
pair with a saturated run gets a run-to-run sd of at least saturated_sd(), which grows with the
share of the CPUs others took; the runs' measured spread counts beside it, never below it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

BUSIER_SHARE = 0.10     # of the machine's CPUs: 0.2 of 2 CPUs, measured outside load
SATURATED_BUSY = 0.90   # a run whose machine was busy this share of its CPUs ...
SATURATED_OTHERS = 0.50  # ... with at least this share taken by other processes and steal
# the run-to-run sd at SATURATED_AT_SHARE of the CPUs taken by others: ten A/A runs of a cached
# randread with others at 1.5-1.8 of 2 CPUs had p50 of 1.3 µs in some and ~40 µs in others,
# τ̂ 1.8 at p50 and 2.0 at p90-p99 (BENCHMARKS.md "Power at equal honesty", aa7)
SATURATED_SD = 2.0   # (1.0 let 25% of 3+3 A/A comparisons call something, 1.5 none)
SATURATED_AT_SHARE = 0.80
QUIET_SHARE = 0.05      # outside load below this share of a full machine: none was waiting
SATURATED_PRIOR_DOF = 4.0  # its weight beside a saturated pair's own runs
# The share of a busier side's ops that outside load can lengthen by a whole scheduler slice
# (milliseconds, whatever the op's own time): a quantile further out than this is not bounded by
# load_sd. A/A runs of a cached randread (µs reads) beside a 0.25-CPU test suite had p99.9
# x24 (+2343%, the interval with load_sd still above +148%) while p99 stayed (aa8, last session).
PREEMPTED_TAIL = 0.01


def bounded_by_load(probability: float | None) -> bool:
    """Whether load_sd bounds what a busier side's outside load does to this statistic: every
    non-quantile (rate, mean) and every quantile up to 1 - PREEMPTED_TAIL."""
    return probability is None or probability <= 1.0 - PREEMPTED_TAIL + 1e-12


@dataclass(frozen=True)
class OutsideLoad:
    cpus: int
    mean_cpus: float        # others + steal, mean over the runs that recorded it
    runs: int
    saturated: int = 0      # runs whose machine was saturated (see saturated())
    busy_share: float = 0.0  # mean share of the CPUs busy (anyone's work and steal)


def saturated(load: dict[str, Any]) -> bool:
    cpus = max(int(load.get("cpus") or 1), 1)
    outside = float(load.get("others_cpus") or 0.0) + float(load.get("steal_cpus") or 0.0)
    return (float(load.get("busy_cpus") or 0.0) + float(load.get("steal_cpus") or 0.0)
            >= SATURATED_BUSY * cpus and outside >= SATURATED_OTHERS * cpus)


def saturated_sd(loads: Sequence[OutsideLoad | None]) -> float:
    """The run-to-run sd (log scale) a pair with a saturated side is given at least: 0 when
    neither side was saturated, else load_sd() of the side others took more of."""
    seen = [load for load in loads if load is not None]
    if not any(load.saturated for load in seen):
        return 0.0
    return max(load_sd(load) for load in seen)


def load_sd(load: OutsideLoad) -> float:
    """SATURATED_SD scaled by the share of the CPUs others took, from 0 at QUIET_SHARE to
    SATURATED_SD at SATURATED_AT_SHARE, and beyond it: the spread outside load of that size
    can put between runs (also the bound MACHINE BUSIER holds a busier side's change to)."""
    share = load.mean_cpus / load.cpus
    return SATURATED_SD * max(0.0, share - QUIET_SHARE) / (SATURATED_AT_SHARE - QUIET_SHARE)


def outside_load(loads: Sequence[dict[str, Any] | None]) -> OutsideLoad | None:
    """Mean outside load (other processes + steal) over a variant's runs; None if none recorded."""
    seen = [load for load in loads if isinstance(load, dict)
            and isinstance(load.get("others_cpus"), (int, float))]
    if not seen:
        return None
    values = [float(load["others_cpus"]) + float(load.get("steal_cpus") or 0.0) for load in seen]
    cpus = max(int(load.get("cpus") or 1) for load in seen)
    busy = [float(load.get("busy_cpus") or 0.0) + float(load.get("steal_cpus") or 0.0)
            for load in seen]
    return OutsideLoad(cpus, sum(values) / len(values), len(seen), sum(map(saturated, seen)),
                       sum(busy) / len(busy) / cpus)


def busier_side(baseline: OutsideLoad | None, candidate: OutsideLoad | None) -> int:
    """+1 if the candidate's runs had more outside load by BUSIER_SHARE of the machine, -1 if
    the baseline's had, 0 otherwise or when either side did not record it.

    On a machine with room, others' share is their demand; on a full one (SATURATED_BUSY) it is
    only what the workload left them, a lower bound. So the quieter side's figure must be a
    demand: its machine had room, or others got next to nothing (QUIET_SHARE) of a full one,
    which the scheduler would not do to a runnable task. Otherwise a variant that uses less CPU
    (O_DIRECT beside cached reads on a loaded machine) would look 'busier' by what it left."""
    if baseline is None or candidate is None:
        return 0
    margin = BUSIER_SHARE * max(baseline.cpus, candidate.cpus)
    difference = candidate.mean_cpus - baseline.mean_cpus
    if abs(difference) <= margin:
        return 0
    quieter = baseline if difference > 0 else candidate
    if quieter.busy_share >= SATURATED_BUSY and quieter.mean_cpus >= QUIET_SHARE * quieter.cpus:
        return 0
    return 1 if difference > 0 else -1
