"""Which kernel counters moved (vmstat, the memory cgroup's), per run, per second and per op,
and whether each only follows the op count or the clock: seed 000's GOOD/BAD table. Pure.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping, Sequence
from typing import Any

from .section import CounterRow

# the counters seed 000 looked for, in the order a reader wants them: reclaim (direct reclaim,
# failed charges, refaults), throttling, then writeback and dirtying
COUNTER_FAMILIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("reclaim", ("vmstat.allocstall", "vmstat.pgscan_direct", "vmstat.pgsteal_direct",
                 "memcg.failcnt", "memcg.events.max", "memcg.events.oom", "memcg.pgscan",
                 "memcg.pgsteal", "memcg.workingset_refault", "memcg.pgmajfault",
                 "vmstat.pgscan", "vmstat.pgsteal", "vmstat.workingset_refault",
                 "vmstat.pgmajfault", "vmstat.compact_stall", "vmstat.pageoutrun",
                 "memcg.total_pgmajfault", "memcg.total_workingset_refault")),
    ("throttling", ("vmstat.nr_throttled_written", "memcg.events.high")),
    ("writeback", ("vmstat.nr_dirtied", "vmstat.nr_written", "vmstat.nr_vmscan_write",
                   "vmstat.pgpgout", "memcg.pgpgout")),
)
FOLLOWS = 0.25      # a change per op (or per second) below this: the counter follows the ops
#                     (or the clock), and is not a cause


def counter_family(name: str) -> str | None:
    for family, prefixes in COUNTER_FAMILIES:
        if name.startswith(prefixes):
            return family
    return None


def counters_comparison(baseline: Sequence[Mapping[str, int]],
                        candidate: Sequence[Mapping[str, int]],
                        baseline_seconds: float, candidate_seconds: float,
                        baseline_ops: int, candidate_ops: int) -> list[dict[str, Any]]:
    """Seed 000's GOOD/BAD table: mean delta per run in each variant, per second and per
    operation side by side, with the change of each; counters that did not move are left out.
    A counter whose change per op is small while its rate changed only follows the op count
    (`follows` "ops"); one whose rate stayed while its count per op changed follows the clock
    ("time": background counts divided by fewer ops). Order: the reclaim, throttling and
    writeback counters that follow neither (in each family those that grew per op before those
    that fell), then the others by the smaller of their two changes, then those that follow.
    `baseline`/`candidate` hold one {counter: delta} per run."""
    names = sorted({n for run in [*baseline, *candidate] for n in run})
    rows = []
    for name in names:
        base_total = sum(run.get(name, 0) for run in baseline)
        cand_total = sum(run.get(name, 0) for run in candidate)
        if base_total == 0 and cand_total == 0:
            continue
        base_mean = base_total / max(1, len(baseline))
        cand_mean = cand_total / max(1, len(candidate))
        if base_mean == cand_mean:
            continue
        base_rate = base_total / baseline_seconds if baseline_seconds > 0 else None
        cand_rate = cand_total / candidate_seconds if candidate_seconds > 0 else None
        base_per_op = base_total / baseline_ops if baseline_ops else None
        cand_per_op = cand_total / candidate_ops if candidate_ops else None
        change = _ratio_change(base_per_op, cand_per_op)
        if base_per_op is None:
            change = _ratio_change(base_rate, cand_rate)
        change_per_s = _ratio_change(base_rate, cand_rate)
        follows = None
        if change is not None and change_per_s is not None:
            if abs(change) < FOLLOWS <= abs(change_per_s):
                follows = "ops"
            elif abs(change_per_s) < FOLLOWS <= abs(change):
                follows = "time"
        rows.append({"counter": name, "baseline": base_mean, "candidate": cand_mean,
                     "delta": cand_mean - base_mean, "baseline_per_s": base_rate,
                     "candidate_per_s": cand_rate, "baseline_per_op": base_per_op,
                     "candidate_per_op": cand_per_op, "change": change,
                     "change_per_s": change_per_s, "follows": follows,
                     "family": counter_family(name)})
    families = [family for family, _ in COUNTER_FAMILIES]

    def order(row: dict[str, Any]) -> tuple[bool, int, bool, float, float]:
        # a counter that appears from nothing is the largest change of all; one that fell per
        # op (refaults falling because the reads fell) explains no slowdown: after the others
        sizes = [float("inf") if c is None else abs(c)
                 for c in (row["change"], row["change_per_s"])]
        rank = families.index(row["family"]) if row["family"] in families else len(families)
        fell = row["change"] is not None and row["change"] < 0
        return (row["follows"] is not None, rank, fell, -min(sizes), -abs(row["delta"]))

    rows.sort(key=order)
    return rows


def _ratio_change(base: float | None, cand: float | None) -> float | None:
    return cand / base - 1.0 if base and cand is not None else None


def counter_rows(base: Sequence[Mapping[str, int]], cand: Sequence[Mapping[str, int]],
                 base_seconds: float, cand_seconds: float, base_ops: int, cand_ops: int,
                 unit: typing.Callable[[str], str]) -> list[CounterRow]:
    rows = counters_comparison(base, cand, base_seconds, cand_seconds, base_ops, cand_ops)
    return [CounterRow(**row, unit=unit(row["counter"])) for row in rows]
