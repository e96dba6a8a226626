"""The mechanism behind a delay, by name, where the variant's own settings and counters tell;
where they cannot, which monitor would.

Delay accounting says *what* a task waited on (block I/O, a CPU, reclaim), not *why*: block I/O
waits are the device, an I/O throttle the variant set, dirty throttling (balance_dirty_pages
sleeps in io_schedule too), or reads of pages reclaim evicted. `Facts` is what a variant's runs
recorded about themselves (run.json: limits, sysctls, machine load; the counters' deltas);
`mechanism` turns a delay kind of an op into words from them. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping

from .. import monitornames as names
from ..delaykinds import RECLAIM
from ..display import format_size
from .section import Facts

IO_LIMIT_NAMES = {"read_iops": "riops", "write_iops": "wiops", "read_bps": "rbps",
                  "write_bps": "wbps"}
DIRTY_SYSCTLS = ("vm.dirty_bytes", "vm.dirty_ratio", "vm.dirty_background_bytes",
                 "vm.dirty_background_ratio")
SMALL_DIRTY_BYTES = 64 << 20
SYNC_WORDS = ("fsync", "fdatasync", "commit", "sync")
BUSY_OTHERS = 0.5        # CPUs used by other processes that make a run-queue wait theirs
GREW_OTHERS = 0.3        # CPUs more than in the baseline


def contention(facts: Facts, baseline: Facts | None) -> bool:
    """Run-queue waits are other processes' doing: they took 0.3 CPU more than in the
    baseline. (Kernel threads count as others: an fsync-heavy run's journal and writeback
    threads grow them too, by less.)"""
    others = facts.others_cpus
    if others is None or others < BUSY_OTHERS:
        return False
    if baseline is None or baseline.others_cpus is None:
        return True
    return others - baseline.others_cpus >= GREW_OTHERS


def op_direction(op: str, io: Mapping[str, int]) -> str:
    """'sync', 'read' or 'write': what the op's role mostly did (taskstats I/O accounting)."""
    if any(word in op for word in SYNC_WORDS):
        return "sync"
    if io:
        return "read" if io.get("read_char", 0) >= io.get("write_char", 0) else "write"
    return "read" if "read" in op else "write"


def throttle_words(facts: Facts, direction: str) -> str | None:
    """"the variant's I/O throttle riops=1000" when one applies to the direction."""
    prefix = "r" if direction == "read" else "w"
    limits = {k: v for k, v in facts.io_limits.items() if k.startswith(prefix)}
    if not limits:
        return None
    return "the variant's I/O throttle " + " ".join(f"{k}={v}" for k, v in sorted(limits.items()))


def memcg_bound(facts: Facts) -> bool:
    return facts.memory_limit is not None and bool(facts.memory_hits)


def _counter(facts: Facts, *prefixes: str) -> float:
    return sum(v for k, v in facts.counters.items() if k.startswith(prefixes))


def _has_stacks(facts: Facts) -> bool:
    return bool(set(names.STACK_MONITORS) & set(facts.monitors))


def mechanism(kind: str, op: str, direction: str, facts: Facts,
              baseline: Facts | None = None, blocking: bool = False) -> str | None:
    """Why the op's time went into a delay of `kind`, in words, or which monitor would say;
    `baseline` the baseline's facts, `blocking` whether a wait that puts the op to sleep (block
    I/O, reclaim) is named too (run-queue waits then follow the wake-ups)."""
    stacks_hint = None if _has_stacks(facts) else "--monitors stacks would name the wait"
    if kind == "blkio":
        throttle = throttle_words(facts, direction if direction != "sync" else "write")
        if throttle:
            return throttle
        if direction == "write" and _small_dirty_limit(facts):
            setting = _dirty_setting(facts)
            return (f"with {setting}: dirty throttling (balance_dirty_pages) waits count here"
                    + (f"; {stacks_hint} (dirty throttling or writeback)" if stacks_hint
                       else ""))
        if direction == "sync":
            return "fdatasync / journal commit waiting for the device"
        if direction == "read" and memcg_bound(facts):
            refaults = _counter(facts, "memcg.workingset_refault", "memcg.total_workingset_"
                                "refault")
            return (f"reads of pages memcg reclaim evicted: the {format_size(facts.memory_limit)}"
                    f" limit was hit {facts.memory_hits} times"
                    + (f", {refaults:.0f} refaults" if refaults else ""))
        if direction == "read" and facts.system_memory is not None:
            return (f"reads of pages evicted under low system memory "
                    f"({format_size(facts.system_memory)} left to the system)")
        return stacks_hint
    if kind in RECLAIM:
        if memcg_bound(facts):
            return f"memcg reclaim: the {format_size(facts.memory_limit)} limit was hit " \
                   f"{facts.memory_hits} times"
        stalls = _counter(facts, "vmstat.allocstall")
        where = (f"direct reclaim under low system memory ({format_size(facts.system_memory)} "
                 "left to the system)" if facts.system_memory is not None else "direct reclaim")
        text = where + (f", {stalls:.0f} allocation stalls" if stalls else "")
        if not set(names.STALL_TABLES) & set(facts.monitors):
            text += "; --monitors reclaim would time each reclaim and its throttling"
        return text
    if kind == "cpu":
        others = facts.others_cpus
        before = baseline.others_cpus if baseline is not None else None
        if not blocking and contention(facts, baseline) and others is not None:
            return (f"CPU contention: processes outside the run (not the kernel's threads) kept "
                    f"{others:.1f} of "
                    f"{facts.cpus or 0:.0f} CPUs busy"
                    + (f", {before:.1f} in the baseline" if before is not None else ""))
        if others is not None and others >= BUSY_OTHERS:
            after = "after waking from those waits, " if blocking else ""
            return (f"{after}on CPUs that processes outside the run (not the kernel's threads) "
                    f"kept busy: {others:.1f} of {facts.cpus or 0:.0f}"
                    + (f", {before:.1f} in the baseline" if before is not None else ""))
        own = f" ({facts.own_cpus:.1f} of {facts.cpus or 0:.0f} CPUs)" \
            if facts.own_cpus is not None else ""
        return f"the run's own processes competing for the CPUs{own}"
    return None


def _small_dirty_limit(facts: Facts) -> bool:
    for key in ("vm.dirty_bytes", "vm.dirty_background_bytes"):
        value = facts.sysctls.get(key)
        if value is not None and value.isdigit() and 0 < int(value) <= SMALL_DIRTY_BYTES:
            return True
    ratio = facts.sysctls.get("vm.dirty_ratio")
    return ratio is not None and ratio.isdigit() and int(ratio) <= 2


def _dirty_setting(facts: Facts) -> str:
    return ", ".join(f"{k}={facts.sysctls[k]}" for k in DIRTY_SYSCTLS if k in facts.sysctls)


def limit_warning(label: str, facts: Facts) -> str | None:
    """A memory limit that never bound: the comparison measured no limit at all."""
    if facts.memory_limit is None or facts.memory_hits is None or facts.memory_hits:
        return None
    peak = facts.memory_peak
    if peak is not None and peak >= 0.9 * facts.memory_limit:
        return None
    text = (f"{label}: the memory limit of {format_size(facts.memory_limit)} never bound "
            f"(peak use {format_size(peak) if peak is not None else 'unknown'}, never hit)")
    if facts.data_bytes is not None and facts.data_bytes > facts.memory_limit:
        text += (f" although the data ({format_size(facts.data_bytes)}) is larger: pages already "
                 "in the page cache stay charged to the cgroup that read them and are not "
                 "limited; let the run drop caches (no --no-drop-caches) so the workload reads "
                 "them in from inside its cgroup")
    return text
